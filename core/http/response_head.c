#include "response_head.h"

#include <string.h>

#include "httpdate.h"

#define APPEND_LIT(out, lit) do { memcpy((out)->data + (out)->len, lit, sizeof lit - 1); \
                                  (out)->len += sizeof lit - 1; } while (0)

void response_head_start(struct buffer *out, const char *status, size_t status_len)
{
    APPEND_LIT(out, "HTTP/1.1 ");
    memcpy(out->data + out->len, status, status_len);
    out->len += status_len;
    APPEND_LIT(out, "\r\nServer: cserve\r\nDate: ");
    memcpy(out->data + out->len, http_date_now(), HTTP_DATE_LEN);
    out->len += HTTP_DATE_LEN;
    APPEND_LIT(out, "\r\n");
}

void response_head_end(struct buffer *out, bool close, int minor_version)
{
    if (close) {
        APPEND_LIT(out, "Connection: close\r\n\r\n");
    } else if (minor_version == 0) {
        APPEND_LIT(out, "Connection: keep-alive\r\n\r\n");
    } else {
        APPEND_LIT(out, "\r\n");
    }
}
