#include "httpdate.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static _Thread_local time_t cached_sec = -1;
static _Thread_local char cached[HTTP_DATE_LEN + 1];

const char *http_date_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts); /* vDSO, no syscall */
    if (ts.tv_sec != cached_sec) {
        static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
        static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char tmp[64]; /* roomy: the compiler cannot see that the fields are in range */
        snprintf(tmp, sizeof tmp, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
                 tm.tm_mday, months[tm.tm_mon], (tm.tm_year + 1900) % 10000, tm.tm_hour,
                 tm.tm_min, tm.tm_sec);
        memcpy(cached, tmp, HTTP_DATE_LEN);
        cached[HTTP_DATE_LEN] = '\0';
        cached_sec = ts.tv_sec;
    }
    return cached;
}
