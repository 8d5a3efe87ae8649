"""The experiment plan: every configuration of every sweep, for the full run
and for the quick one. A configuration is a dict; its label is derived from it
(label()), and repeats of one configuration share the label.

Dimensions (connections × app cost × handoff × blocking threads):
  server   cserve | granian | uwsgi | gunicorn
  handoff  ring | dgram | condvar | eventfd      (cserve; mode inline/native bypass it)
  bt       blocking (pool) threads
  app      hello | cpuN (N µs of GIL-holding Python, apps/cpu.py) | gil-sleepN |
           flask | django
  conns    client connections
  client   wrk (closed loop, one request in flight per connection) |
           wrk-p16 (pipelined, 16 per connection: a cheap client) |
           wrk-browser (closed loop, browser-like request head)
  placement  shared (default: any thread on any CPU) | loop-alone | dedicated
           (lib/pinning.py; part of the label where not shared)

The `calib` sweep is the model's input and nothing else: report.py fits the
stage costs on it and predicts every other sweep's rate (out of sample)."""

HANDOFFS = ["ring", "dgram", "condvar", "eventfd"]
# Fine steps over the loop/pool crossover (a few µs of app work on this guest).
FINE_US = [0, 1, 2, 3, 4, 6, 8, 10, 14, 20]
# condvar and eventfd: the ends and the middle of the same axis.
COARSE_US = [0, 10, 20]
# uWSGI's threads in the one-process rows: one per client connection (c64).
UWSGI_THREADS = 64
# The uninstrumented build (make BUILD=build-noinst INSTRUMENTS=0): what a
# user runs, so the one rows compared with other servers use.
NOINST = "build-noinst/cserve"


def cs(**kw):
    r = {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 64, "client": "wrk"}
    r.update(kw)
    return r


def peer(server, **kw):
    r = {"server": server, "app": "hello", "conns": 64, "client": "wrk"}
    r.update(kw)
    return r


def app_cost(us):
    return "hello" if us == 0 else f"cpu{us}"


def full():
    S = {}
    # The model's inputs: the loop alone (native-hello), each handoff with the
    # cheapest Python app, and one app cost per handoff for the pool's slope.
    # The cpu app's own fixed cost (its query parsing and call: cpu0) is
    # calibrated apart from hello's, so cpuN's intercept is not hello's.
    S["calib"] = ([cs(mode="native", client="wrk-p16", conns=16)] +
                  [cs(handoff=h, client="wrk-p16", conns=16) for h in ("ring", "dgram")] +
                  [cs(handoff=h, app=a, client="wrk-p16", conns=16) for a in ("cpu0", "cpu20")
                   for h in ("ring", "dgram")] +
                  [cs(handoff="ring", conns=64)] +  # the closed-loop client's cost per request
                  # One connection: every request pays the wake-ups (des.py fits its wake latency here).
                  [cs(handoff=h, conns=1) for h in ("ring", "dgram")])
    S["connections"] = ([cs(handoff=h, conns=c) for h in ("ring", "dgram") for c in (4, 16, 64, 256)] +
                        [cs(handoff=h, conns=c) for h in ("condvar", "eventfd") for c in (4, 16, 64, 256)] +
                        [cs(handoff=h, client="wrk-p16", conns=c) for h in ("ring", "dgram") for c in (4, 64)] +
                        [cs(mode="native", client="wrk-p16", conns=c) for c in (4, 64)])
    S["appcost"] = [cs(handoff=h, app=app_cost(us), client="wrk-p16", conns=16)
                    for h in ("ring", "dgram") for us in FINE_US] + \
        [cs(handoff=h, app=app_cost(us), client="wrk-p16", conns=16) for h in ("condvar", "eventfd") for us in COARSE_US] + \
        [cs(handoff="ring", app=app_cost(us), client="wrk-p16", conns=64) for us in (0, 4, 8, 14, 20)]
    S["threads"] = ([cs(handoff="ring", bt=b) for b in (1, 2, 4)] +
                    [cs(app="gil-sleep200", bt=b, conns=16) for b in (1, 4)])
    S["peers"] = ([cs(handoff=h, conns=c) for h in ("ring", "dgram") for c in (16, 64)] +
                  [peer("granian", conns=c) for c in (16, 64, 256)] +
                  [cs(handoff=h, conns=256) for h in ("ring", "dgram")] +
                  # uWSGI serves a connection per thread: as many threads as the
                  # client has connections, so it keeps every request in flight.
                  [peer("uwsgi", bt=UWSGI_THREADS), peer("gunicorn"), cs(mode="native"), cs(mode="inline")] +
                  # Across servers: the uninstrumented build (the rows above give the per-thread view).
                  [cs(handoff=h, conns=c, binary=NOINST) for h in ("ring", "dgram") for c in (16, 64, 256)] +
                  [cs(mode="native", binary=NOINST)])
    S["frameworks"] = ([cs(handoff=h, app=a, conns=16) for a in ("flask", "django") for h in ("ring", "dgram")] +
                       # the loop polls the ring for 20 µs before sleeping (pool-bound apps)
                       [cs(app=a, conns=16, args=["--loop-spin", "20"]) for a in ("flask", "django")] +
                       [peer("granian", app=a, conns=16) for a in ("flask", "django")] +
                       [cs(handoff="ring", app=a, conns=16, binary=NOINST) for a in ("flask", "django")])
    # The instruments' own cost: counters compiled out (make INSTRUMENTS=0
    # BUILD=build-noinst), interleaved with the normal build like any config.
    S["instruments"] = [cs(conns=64), cs(conns=64, binary=NOINST)]
    S["browser"] = [cs(handoff="ring", client="wrk-browser"), cs(handoff="dgram", client="wrk-browser"),
                    peer("granian", client="wrk-browser")]
    # The same shapes with the loop alone on a core, the pool and the client
    # on the other (lib/pinning.py): the shared rows above are their pairs.
    S["placement"] = [cs(handoff=h, conns=64, placement="loop-alone") for h in ("ring", "dgram")] + \
        [cs(handoff=h, client="wrk-p16", conns=16, placement="loop-alone") for h in ("ring", "dgram")]
    return S


# The rows the headlines cite (README's results block and the paper's
# abstract): the full run gives each HEADLINE_REPEATS runs instead of the
# plan's repeats, the extra ones spread over the same interleaved rounds,
# so their medians carry a bootstrap interval (lib/stats.py: MIN_BOOT).
HEADLINE_REPEATS = 10


def headline():
    return [cs(handoff="ring", conns=c) for c in (16, 64, 256)] + [cs(handoff="dgram", conns=64)] + \
        [peer("granian", conns=c) for c in (16, 64, 256)] + \
        [cs(mode="native", client="wrk-p16", conns=16), cs(handoff="ring", conns=64, binary=NOINST)] + \
        [cs(handoff="ring", app=a, conns=16) for a in ("flask", "django")] + \
        [peer("granian", app=a, conns=16) for a in ("flask", "django")]


def quick():
    """Each dimension once, tiny: the plumbing end to end, not a measurement."""
    S = {}
    S["calib"] = [cs(mode="native", client="wrk-p16", conns=16), cs(client="wrk-p16", conns=16),
                  cs(app="cpu0", client="wrk-p16", conns=16), cs(app="cpu20", client="wrk-p16", conns=16),
                  cs(conns=16)]
    S["calib"].append(cs(conns=1))
    S["connections"] = [cs(conns=4), cs(handoff="dgram", conns=16)]
    S["appcost"] = [cs(app="cpu6", client="wrk-p16", conns=16)]
    S["threads"] = [cs(bt=2, conns=16)]
    S["peers"] = [peer("granian", conns=16)]
    S["browser"] = [cs(client="wrk-browser", conns=16)]
    S["placement"] = [cs(client="wrk-p16", conns=16, placement="loop-alone")]
    return S


def label(run):
    client = run.get("client", "wrk")
    if run.get("placement") not in (None, "shared"):  # lib/pinning.py; shared labels stay as recorded
        client += f" @{run['placement']}"
    # workers and a peer's threads only where they are not 1, so the
    # one-process labels stay what every recorded run calls them
    shape = (f" w{run['workers']}" if run.get("workers", 1) > 1 else "")
    if run["server"] != "cserve":
        shape += f" bt{run['bt']}" if run.get("bt", 1) > 1 else ""
        return f"{run['server']}{shape} {run['app']} c{run['conns']} {client}"
    mode = run.get("mode") or f"{run['handoff']} bt{run.get('bt', 1)}"
    mode += shape
    extra = " ".join(run.get("args", []) + ([run["binary"]] if run.get("binary") else []))
    extra = f" {extra}" if extra else ""
    return f"cserve {mode}{extra} {run['app']} c{run['conns']} {client}"


def app_us(app):
    """Nominal app cost in µs of GIL-holding work (None where not a cpu app)."""
    if app == "hello":
        return 0.0
    if app.startswith("cpu"):
        return float(app[3:])
    return None
