"""The seed's published figures, quoted as data (not measured here).

Source: the m0serve design note "The one-thread WSGI gap is the loop thread,
not the bridge" (measured 2026-09-05): m0serve, a WSGI server written in
Mojo, on an Apple M4 under macOS (kqueue), CPython 3.13.6, granian 2.8.2;
1 worker, 1 handler thread, a bare WSGI hello, `wrk -t2` with browser-like
request headers; per-thread CPU from `ps -M` sampled once a second (medians),
on-CPU profiles from Instruments' Time Profiler scaled to µs per request by
the run's rate and the thread's CPU fraction.

experiments/seed.py measures the same shapes here and sets these beside its
records (experiments/results/seed/seed.md); the verdicts are computed there,
claim by claim. Nothing here is edited to fit a result: these are the
note's numbers as it printed them."""

NOTE = ('the m0serve design note "The one-thread WSGI gap is the loop thread, not the bridge"')
PLATFORM = {"machine": "Apple M4", "os": "macOS", "poller": "kqueue", "cpython": "3.13.6",
            "granian": "2.8.2", "client": "wrk -t2, browser-like headers"}

# Per thread at 16 connections: rps, I/O-thread and Python-thread share of a
# core (fractions), process cores. Keys are the rows of seed.py's table.
PER_THREAD_C16 = {
    "pool":    {"server": "m0serve --workers 1 --blocking-threads 1 (dgram socketpairs)",
                "rps": 131_200, "io": 0.986, "py": 0.698, "cores": 1.68},
    "granian": {"server": "granian --workers 1 --blocking-threads 1",
                "rps": 180_800, "io": 0.965, "py": 0.810, "cores": 1.77},
    "native":  {"server": "apps/hello, no Python", "rps": 149_300, "io": 0.988, "py": None, "cores": 0.99},
    "inline":  {"server": "m0serve, app inline on the loop", "rps": 103_700, "io": 0.974, "py": None, "cores": 0.97},
}

# Over connections: (rps, I/O share, Python share) for the pooled server and Granian.
BY_CONNS = {
    16:  {"pool": (131_200, 0.986, 0.698), "granian": (180_800, 0.965, 0.810)},
    64:  {"pool": (147_800, 0.991, 0.688), "granian": (198_600, 0.950, 0.801)},
    256: {"pool": (150_900, 0.983, 0.669), "granian": (203_600, 0.968, 0.754)},
}
RATIO_RANGE = (0.73, 0.76)  # the pooled server's rate over Granian's, as the note states it

# The I/O thread's µs of CPU per request, by category (on-CPU profile).
# "handoff" is the note's submit sendto (0.65) plus completion recvfroms
# (0.58); Granian's is its semaphore_signal wake (0.07). "other" is the
# clock reads. The note's rows sum to its totals within rounding.
LOOP_US = {
    "native":  {"recv": 1.2, "send": 1.6, "epoll": 0.35, "handoff": None, "user": 3.1, "other": 0.08, "total": 6.4},
    "pool":    {"recv": 1.2, "send": 1.6, "epoll": 0.24, "handoff": 1.23, "user": 2.85, "other": 0.09, "total": 7.2},
    "granian": {"recv": 1.6, "send": 1.8, "epoll": 0.32, "handoff": 0.07, "user": 1.3, "other": 0.14, "total": 5.3},
}
# The Python thread's µs per request. "handoff": the job recvfrom (0.82)
# plus the completion sendto (0.58); Granian's spin-yield and park (0.29)
# plus its wake of the runtime (0.05). "user": the environ build, the call,
# the response read (the bridge and Python); "other": thread-state save and
# restore.
POOL_US = {
    "pool":    {"handoff": 1.40, "user": 3.7, "other": 0.04, "total": 5.1},
    "granian": {"handoff": 0.34, "user": 4.0, "other": 0.04, "total": 4.3},
}

# The note's claims, restated; seed.py's verdicts name them by key.
CLAIMS = [
    ("loop_saturated", "At one worker and one handler thread the I/O (loop) thread is the bound: it is saturated "
     "(the note: 98.6 % at 16 connections, 98.3–99.1 % up to 256) while the Python thread has slack (about 70 %)."),
    ("granian_io_saturated", "Granian in the same shape also saturates its I/O thread (95.0–96.8 %) with slack "
     "on its blocking thread (75–81 %)."),
    ("ratio", "The pooled server serves 0.73–0.76× Granian's rate, at every connection count."),
    ("dgram_cost", "The datagram handoff (two socketpairs, four syscalls a request plus the EAGAIN read) costs "
     "about 1.2 µs of CPU a request on the loop and 1.4 µs on the Python thread."),
    ("bridge_cheaper", "The bridge (environ build, the call, the response read) costs the Python thread less per "
     "request than Granian's crossing (3.7 against 4.0 µs)."),
    ("ring_saves", "An in-memory ring that wakes a side only when it is parked would save most of the handoff's "
     "cost on both threads."),
    ("ring_ratio", "With that ring the pooled row would reach about 0.9× Granian."),
    ("pool_next", "Once the loop is faster, the Python thread becomes the bound."),
]
