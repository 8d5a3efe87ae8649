"""How `make perf-check` measures and decides.

A check compares arms (the default and an option, say) by counters or
times that depend on how the kernel schedules threads. One run of an arm
is one sample; the arms run in turn, round after round (interleaved), so
a slow minute of the machine falls on every arm alike. The decision is on
each arm's median over the rounds, never on one run or the best run.

A run is disturbed when, during it, the hypervisor stole more than
MAX_STEAL of the machine's CPU time, or processes other than this one and
its children (the servers, wrk) used more than MAX_FOREIGN of it. A
disturbed run is run again, at most RERUNS times; the table marks the runs
that stayed disturbed, and a check whose rounds were disturbed more often
than not fails as inconclusive, saying so, rather than deciding on a
machine that was not quiet.

PERF_ROUNDS (environment) sets the rounds; 5 by default.
"""
import os
import statistics
import time

ROUNDS = int(os.environ.get("PERF_ROUNDS", "5"))
MAX_STEAL = 0.05
MAX_FOREIGN = 0.10
RERUNS = 2
NCPU = os.cpu_count() or 1
HZ = os.sysconf("SC_CLK_TCK")


def _proc_stat():
    """(busy, steal, total) CPU seconds of the whole machine since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq
    return busy / HZ, steal / HZ, (busy + idle + iowait + steal) / HZ


def _own():
    """CPU seconds of this process and of its children it has waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Watch:
    """What the machine did while a run ran: steal and foreign CPU, each as
    a share of all the machine's CPU time over the run."""

    def __enter__(self):
        self.m0, self.o0, self.w0 = _proc_stat(), _own(), time.monotonic()
        return self

    def __exit__(self, *exc):
        busy0, steal0, total0 = self.m0
        busy1, steal1, total1 = _proc_stat()
        wall = time.monotonic() - self.w0
        total = max(total1 - total0, wall * NCPU, 1e-9)
        self.steal = (steal1 - steal0) / total
        self.foreign = max(0.0, (busy1 - busy0) - (_own() - self.o0)) / total
        return False

    @property
    def disturbed(self):
        return self.steal > MAX_STEAL or self.foreign > MAX_FOREIGN


def interleaved(arms, rounds=ROUNDS):
    """arms: {name: run()}, where run() returns {metric: number}. Runs every
    arm once a round, in turn, for rounds rounds. Returns {name: [sample]},
    a sample being the run's metrics plus "_steal", "_foreign" and
    "_disturbed" (whether it stayed disturbed after its reruns)."""
    out = {name: [] for name in arms}
    for _ in range(rounds):
        for name, run in arms.items():
            for attempt in range(RERUNS + 1):
                with Watch() as w:
                    sample = dict(run())
                if not w.disturbed:
                    break
            sample.update(_steal=w.steal, _foreign=w.foreign, _disturbed=w.disturbed)
            out[name].append(sample)
    return out


def medians(samples):
    """{metric: median over the samples} for every metric the runs gave."""
    keys = [k for k in samples[0] if not k.startswith("_")]
    return {k: statistics.median(s[k] for s in samples) for k in keys}


def report(title, results):
    """Print every sample and each arm's median and range; fail as
    inconclusive when most rounds of an arm stayed disturbed."""
    print(f"\n  {title} ({ROUNDS} interleaved rounds; median [min, max]; * = disturbed)")
    for name, samples in results.items():
        for k in (k for k in samples[0] if not k.startswith("_")):
            vals = [s[k] for s in samples]
            runs = " ".join(f"{v:g}{'*' if s['_disturbed'] else ''}" for v, s in zip(vals, samples))
            print(f"    {name:>22} {k:<24} {statistics.median(vals):>10g} "
                  f"[{min(vals):g}, {max(vals):g}]  runs: {runs}")
    for name, samples in results.items():
        bad = [s for s in samples if s["_disturbed"]]
        if len(bad) * 2 > len(samples):
            worst = max(bad, key=lambda s: s["_steal"] + s["_foreign"])
            raise AssertionError(
                f"inconclusive: {len(bad)} of {len(samples)} runs of {name!r} lost CPU to other work "
                f"(up to {worst['_steal']:.0%} stolen, {worst['_foreign']:.0%} to other processes); "
                f"run make perf-check on a quiet machine")
    return {name: medians(samples) for name, samples in results.items()}
