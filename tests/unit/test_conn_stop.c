/* test_conn_stop.c — a stop runs no request pipelined behind an answered
 * one that the app does not have yet, whichever comes first in the stop's
 * pass: the sweep that closes such a connection (conn_stop_unstarted), or
 * a pool thread freeing for the request (conn_start_app's guard). Driven
 * through the real connection code (tests/fuzz/conn_harness.c); the server
 * on sockets: tests/integration/test_stop_pipelined.py. */
#include "../fuzz/conn_harness.h"
#include "check.h"

int main(void)
{
    unsigned runs = harness_stop_pipelined(false);
    CHECK(runs == 1, "the sweep first: the app ran %u of the two requests, the answered one only expected", runs);
    runs = harness_stop_pipelined(true);
    CHECK(runs == 1, "a thread frees first: the app ran %u of the two requests, the answered one only expected",
          runs);
    return check_summary();
}
