/* response_head.h — the parts of a response head every responder shares:
 * the status line with Server and Date first, and the connection fields last. */
#ifndef CSERVE_RESPONSE_HEAD_H
#define CSERVE_RESPONSE_HEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "buffer.h"

/* The reason phrase of a status the server answers with itself (RFC 9110
 * §15): "Bad Request" for 400; "Internal Server Error" for one it never
 * sends. */
const char *http_reason_phrase(int status);

/* Room every head needs beyond the app's own fields. */
#define RESPONSE_HEAD_FIXED 128

/* "HTTP/1.1 <status>\r\nServer: cserve\r\nDate: ...\r\n"; status is "200 OK".
 * The caller reserved len(status) + RESPONSE_HEAD_FIXED bytes. */
void response_head_start(struct buffer *out, const char *status, size_t status_len);

/* The connection field and the empty line: "close" when the connection
 * closes after this response, else "keep-alive" for an HTTP/1.0 client
 * (minor_version 0), which would otherwise close. Whether to close is the
 * caller's to decide (job_head_end in job.h). The caller reserved
 * RESPONSE_HEAD_FIXED bytes. */
void response_head_end(struct buffer *out, bool close, int minor_version);

#endif
