#include "buffer.h"

#include <stdlib.h>
#include <string.h>

#include "../../lib/aligned.h"

bool buffer_reserve(struct buffer *b, size_t more)
{
    if (b->cap - b->len >= more)
        return true;
    size_t want = b->len + more;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < want)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return false;
    b->data = p;
    b->cap = cap;
    return true;
}

bool buffer_append(struct buffer *b, const void *p, size_t n)
{
    if (!buffer_reserve(b, n))
        return false;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return true;
}

void buffer_reset(struct buffer *b, size_t keep)
{
    b->len = 0;
    if (b->cap > keep) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
}

void buffer_free(struct buffer *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void *calloc_lines(size_t n, size_t size)
{
    size_t bytes = n * size;
    if (size && bytes / size != n)
        return NULL;
    return aligned_zalloc(bytes);
}
