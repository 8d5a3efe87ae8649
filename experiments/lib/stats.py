"""Medians with percentile-bootstrap confidence intervals, and ratios of two
medians with an interval from bootstrapping both samples.

A fixed seed makes every interval reproducible: the same results give the
same report, which the prose-numbers test relies on. With n = 5 repeats the
bootstrap interval of a median is roughly the 2nd..4th order statistics —
wide, honest, and exactly what five runs can say."""
import random
import statistics

B = 2000      # bootstrap resamples: enough for a stable 95 % percentile interval
SEED = 12345  # fixed: reports are deterministic functions of the results


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _pct(sorted_xs, q):
    # Linear interpolation between order statistics (numpy's default).
    if not sorted_xs:
        return None
    k = (len(sorted_xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def _boot_medians(xs, rng, b):
    n = len(xs)
    return [statistics.median(rng.choices(xs, k=n)) for _ in range(b)]


def median_ci(xs, level=0.95, b=B, seed=SEED):
    """(median, lo, hi). One value: its interval is the value itself (n is reported beside it)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None, None
    m = statistics.median(xs)
    if len(xs) == 1:
        return m, m, m
    boots = sorted(_boot_medians(xs, random.Random(seed), b))
    a = (1 - level) / 2
    return m, _pct(boots, a), _pct(boots, 1 - a)


def ratio_ci(num, den, level=0.95, b=B, seed=SEED):
    """median(num)/median(den) and its bootstrap interval (both samples resampled)."""
    num = [x for x in num if x is not None]
    den = [x for x in den if x is not None and x != 0]
    if not num or not den:
        return None, None, None
    r = statistics.median(num) / statistics.median(den)
    if len(num) == 1 and len(den) == 1:
        return r, r, r
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(num, k=len(num))) /
                   statistics.median(rng.choices(den, k=len(den))) for _ in range(b))
    a = (1 - level) / 2
    return r, _pct(boots, a), _pct(boots, 1 - a)


def overlap(a, b):
    """Do two (est, lo, hi) intervals overlap? (Two full runs 'agree' when they do.)"""
    return a[1] is not None and b[1] is not None and a[1] <= b[2] and b[1] <= a[2]


def quantiles(xs, qs=(0.05, 0.25, 0.5, 0.75, 0.95)):
    s = sorted(x for x in xs if x is not None)
    return {q: _pct(s, q) for q in qs} if s else {}
