/* config_toml.h — --config FILE: a TOML file read by the embedded
 * Python's own tomllib (3.11 and later), not by a parser of cserve's. */
#ifndef CSERVE_CONFIG_TOML_H
#define CSERVE_CONFIG_TOML_H

#include <stddef.h>

/* One top-level key of the file, its value as text. kind: 'b' a boolean
 * ("true"/"false"), 'n' a number, 's' a string, 'a' an array of strings
 * and numbers (joined with ','), 't' a table, 'o' anything else (value:
 * what it is). */
struct config_entry {
    const char *key;
    char kind;
    const char *value;
};

/* Read path: its entries into *entries (*n of them, in the file's order;
 * kept for the process's life). Returns 0, or -1 with why (the file cannot
 * be read, TOML's error with its line and column, or a Python without
 * tomllib) in err. Python runs in a child process, so this process's
 * interpreter is started later as the options say (its virtualenv). */
int config_toml_read(const char *path, struct config_entry **entries, size_t *n, char *err, size_t cap);

#endif
