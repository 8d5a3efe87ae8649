/* option_names.c — whole names and near misses of the long options. */
#include "option_names.h"

#include <string.h>

const struct option *option_named(const struct option *table, const char *name, size_t len)
{
    for (const struct option *o = table; o->name; o++)
        if (strlen(o->name) == len && memcmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

/* Edits (insert, delete, replace) between a and b, both short. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return (size_t)-1;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const struct option *option_closest(const struct option *table, const char *typed)
{
    size_t len = strlen(typed);
    const struct option *closest = NULL;
    if (len > 0)
        for (const struct option *o = table; o->name; o++)
            if (strncmp(o->name, typed, len) == 0 && (!closest || strlen(o->name) < strlen(closest->name)))
                closest = o;
    if (closest)
        return closest;
    size_t best = (size_t)-1;
    for (const struct option *o = table; o->name; o++) {
        size_t d = edit_distance(typed, o->name);
        if (d < best) {
            best = d;
            closest = o;
        }
    }
    return best <= (len / 3 > 2 ? len / 3 : 2) ? closest : NULL;
}
