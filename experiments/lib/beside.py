"""Whether two threads of a process share a CPU, sampled through a window.

On two CPUs the ring's three busy threads (the loop, its pool thread and
the client) cannot each have one, and the ring's unpipelined rate moves
with whether the kernel puts the pool thread on the loop's CPU
(experiments/results/placement-c16). `Beside` reads, every `interval`
seconds from a thread of its own, the CPU each of the two threads last
ran on (`threadcpu.last_cpu`), and `share()` is the fraction
of those samples in which it was the same one. A sample says where each
thread last ran, not where it ran throughout: a share of samples, not a
placement. At 10 ms a window of a few seconds takes a few hundred
samples, two small reads each.
"""
import threading

from experiments.lib import pinning
from experiments.lib.threadcpu import last_cpu


def find_tid(pid, prefix):
    """The lowest tid of pid whose name starts with prefix, or None."""
    found = [int(t) for t in pinning.tasks(pid) if (pinning.thread_name(pid, t) or "").startswith(prefix)]
    return min(found) if found else None


def share(samples):
    """The fraction of (cpu_a, cpu_b) samples with both on one CPU, over the
    samples that read both; None without any."""
    both = [(x, y) for x, y in samples if x is not None and y is not None]
    return sum(x == y for x, y in both) / len(both) if both else None


class Beside:
    """with Beside(pid, "cserve-loop", "cserve-pool-0") as b: ...; b.share()
    (None when either thread is missing, as native-hello has no pool)."""

    def __init__(self, pid, a, b, interval=0.01, read=last_cpu, tid_of=find_tid):
        self.interval, self.read = interval, read
        self.tids = (tid_of(pid, a), tid_of(pid, b))
        self.samples = []
        self._stop = threading.Event()
        self._thread = None

    def _run(self):
        ta, tb = self.tids
        while not self._stop.wait(self.interval):
            self.samples.append((self.read(ta), self.read(tb)))

    def __enter__(self):
        if None not in self.tids:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join()
        return False

    def share(self):
        return share(self.samples)
