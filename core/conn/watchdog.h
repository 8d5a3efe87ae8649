/* watchdog.h — --app-timeout: the loop's check on pool threads stuck in the app. */
#ifndef CSERVE_WATCHDOG_H
#define CSERVE_WATCHDOG_H

struct loop;

/* Called by the loop once a pass; looks at the pool threads a few times a
 * second. A thread in the app on one request for longer than --app-timeout
 * gets every thread's Python stack written to stderr, its connections are
 * closed, and the worker asks to be replaced. */
void watchdog_check(struct loop *l);

#endif
