"""The account of one run: what a request cost each group of threads, from
the kernel's own per-thread counts over the measured window
(window_cpu["sched"], pinning.sched_window), divided by the requests the
client counted (wrk's rate, the same instrument for every server).

Groups, by thread name (pinning.role_of) and process:
  loop    cserve's loop thread(s), Granian's tokio threads: socket I/O
  app     the threads that run Python: cserve's pool threads (with
          --inline the loop is both, and counts as loop), every other
          thread of a peer (uWSGI's and gunicorn's threads do their own
          I/O too)
  other   cserve's remaining threads (the supervisor, the metrics thread)
  client  the client's threads

Per request and group:
  cpu_us    on-CPU time (schedstat's first field: nanoseconds, no tick
            quantisation), µs
  delay_us  run delay (schedstat's second field): µs the group's threads
            were runnable and waiting for a CPU
  vcs       voluntary context switches: the thread blocked (a sleep, so
            each one is also a wake-up someone paid for)
  ivcs      involuntary ones: the thread was preempted while runnable
Plus the machine's idle cores over the window (lib/model.idle_cores) and
the run's requests in flight (model.in_flight). A thread under 1 % on CPU
and in run delay is left out of the window (sched_window), so its
switches are not counted: a few per second at most, against thousands of
requests."""
from . import model, pinning

GROUPS = ("loop", "app", "other")
FIELDS = ("cpu_us", "delay_us", "vcs", "ivcs")


def group_of(row, is_cserve):
    if row["role"] == "client":
        return "client"
    role = pinning.role_of(row["name"])
    if role == "loop":
        return "loop"
    if role == "pool" or not is_cserve:
        return "app"
    return "other"


def of_run(rec):
    """{group: {cpu_us, delay_us, vcs, ivcs}} per request, "server" (every
    server group summed), "idle_cores", "in_flight", "rps"; None where the
    run has no window, no switch counts or no rate."""
    w = rec.get("window_cpu") or {}
    rows, secs, rps = w.get("sched"), w.get("seconds"), rec.get("rps_wrk")
    if not rows or not secs or not rps or "error" in rec:
        return None
    if any("vcs" not in r for r in rows):
        return None
    n = rps * secs  # requests in the window
    is_cserve = rec["config"]["server"] == "cserve"
    out = {g: dict.fromkeys(FIELDS, 0.0) for g in GROUPS + ("client",)}
    for r in rows:
        g = out[group_of(r, is_cserve)]
        g["cpu_us"] += r["on_cpu"] * secs / n * 1e6
        g["delay_us"] += r["run_delay"] * secs / n * 1e6
        g["vcs"] += r["vcs"] / n
        g["ivcs"] += r["ivcs"] / n
    out["server"] = {k: sum(out[g][k] for g in GROUPS) for k in FIELDS}
    out["idle_cores"] = model.idle_cores(rec)
    out["in_flight"] = model.in_flight(rec)[0]
    out["rps"] = rps
    return out


def flat(acc):
    """One level of names ("server.cpu_us", "loop.vcs", ...) for medians."""
    if not acc:
        return {}
    out = {}
    for g in GROUPS + ("client", "server"):
        for k in FIELDS:
            out[f"{g}.{k}"] = acc[g][k]
        out[f"{g}.cs"] = acc[g]["vcs"] + acc[g]["ivcs"]
    out["idle_cores"] = acc["idle_cores"]
    return out
