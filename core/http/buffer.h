/* buffer.h — a growable byte buffer reused across requests. */
#ifndef CSERVE_BUFFER_H
#define CSERVE_BUFFER_H

#include <stdbool.h>
#include <stddef.h>

struct buffer {
    char *data;
    size_t len;
    size_t cap;
};

/* Make room for at least `more` bytes past len. Returns false on ENOMEM. */
bool buffer_reserve(struct buffer *b, size_t more);
bool buffer_append(struct buffer *b, const void *p, size_t n);
/* Drop the storage if it grew past keep bytes (so one huge response does not
 * pin memory on an idle connection); always empties. */
void buffer_reset(struct buffer *b, size_t keep);
void buffer_free(struct buffer *b);

/* Zeroed memory aligned to a cache line, for structs that keep one
 * thread's counters away from another's (free with free()). */
void *calloc_lines(size_t n, size_t size);

#endif
