/* fault.h — a handoff for tests: another backend whose submits fail.
 *
 * Never one of handoff_backends[] (--handoff cannot name it): the worker
 * of a test build (TEST_HOOKS=1) wraps its backend in it only when
 * CSERVE_FAULT_SUBMIT=MS is set, for the tests of the loop's paths a healthy
 * backend never takes (a full queue that stays full, then a submit error). */
#ifndef CSERVE_FAULT_H
#define CSERVE_FAULT_H

#include "handoff.h"

/* inner, whose every submit from the first on reports HANDOFF_FULL for
 * full_ms, then HANDOFF_ERROR (errno EIO). Everything else is inner's; the
 * wrapper's destroy destroys inner too. NULL (errno set) on failure, when
 * inner is left as it was. */
struct handoff *handoff_fault_wrap(struct handoff *inner, long full_ms);

#endif
