/* httpdate.h — the Date header value (RFC 9110 §5.6.7 IMF-fixdate), cached
 * per thread and re-formatted only when the second changes. */
#ifndef CSERVE_HTTPDATE_H
#define CSERVE_HTTPDATE_H

#define HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */

/* Pointer to this thread's current date string (HTTP_DATE_LEN bytes, NUL-terminated). */
const char *http_date_now(void);

#endif
