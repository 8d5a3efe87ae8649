/* test_log_stamp.c — the UTC stamp that starts every log line
 * (core/base/log.c's log_utc_stamp): its own calendar arithmetic against
 * the C library's gmtime_r, day by day over four centuries either side of
 * 1970 (leap years, the skipped leap days of 1900 and 2100, 2000's kept
 * one), second by second across one day, and the milliseconds cut, never
 * rounded. */
#include <string.h>
#include <time.h>

#include "check.h"
#include "../../core/base/log.c" /* one small file: built in, no Makefile rule of its own */

static void expect(time_t sec, long nsec)
{
    struct timespec ts = {.tv_sec = sec, .tv_nsec = nsec};
    char got[64], want[64];
    struct tm tm;
    gmtime_r(&sec, &tm);
    snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nsec / 1000000);
    int n = log_utc_stamp(got, sizeof got, &ts);
    CHECK(n == 24 && strcmp(got, want) == 0, "second %lld: got %s, want %s", (long long)sec, got, want);
}

int main(void)
{
    const time_t day = 86400;
    for (time_t d = -146097; d <= 146097; d++) /* 0 AD-ish to 2370: every day, a few seconds in */
        expect(d * day + 3723, 0);
    for (time_t s = 0; s < day; s += 7)
        expect(951782400 + s, 0); /* 2000-02-29 */
    expect(4107456000 - 1, 999999999); /* 2100-02-28T23:59:59.999: 2100 has no leap day */
    expect(4107456000, 0);
    expect(-2203891200 + 59 * day, 0); /* 1900-03-01 */
    expect(-1, 500000000); /* 1969-12-31T23:59:59.500 */
    expect(1796256000, 999999); /* .000: cut, not rounded */
    char small[8];
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 0};
    CHECK(log_utc_stamp(small, sizeof small, &ts) == 24 && strlen(small) == 7, "cut to the buffer, as snprintf");
    return check_summary();
}
