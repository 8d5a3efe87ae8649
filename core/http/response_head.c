#include "response_head.h"

#include <string.h>

#include "httpdate.h"

#define APPEND_LIT(out, lit) do { memcpy((out)->data + (out)->len, lit, sizeof lit - 1); \
                                  (out)->len += sizeof lit - 1; } while (0)

const char *http_reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Internal Server Error";
    }
}

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
