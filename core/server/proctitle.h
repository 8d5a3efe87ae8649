/* proctitle.h — what ps shows for a process: "cserve: supervisor [app]",
 * "cserve: worker 2 [app]" (a lone worker keeps its command line). */
#ifndef CSERVE_PROCTITLE_H
#define CSERVE_PROCTITLE_H

/* Before anything reads argv's or environ's strings in place: they are
 * moved to the heap (argv's copy is returned; environ is replaced), and
 * their memory becomes the title's. */
char **proctitle_init(int argc, char **argv);
void proctitle_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
