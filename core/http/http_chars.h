/* http_chars.h — byte classes shared by the HTTP parsers (internal). */
#ifndef CSERVE_HTTP_CHARS_H
#define CSERVE_HTTP_CHARS_H

extern const unsigned char http_tchar[256];       /* token characters */
extern const unsigned char http_field_vchar[256]; /* HTAB, SP, VCHAR, obs-text */
extern const unsigned char http_target_char[256]; /* VCHAR, obs-text */
extern const unsigned char http_host_char[256];   /* reg-name, but pct-encoded */

/* The value of a hex digit, or -1. */
static inline int http_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20; /* ASCII lower case; maps no non-letter into 'a'..'f' */
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

#endif
