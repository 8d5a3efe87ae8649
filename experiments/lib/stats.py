"""Medians with an interval: a percentile-bootstrap 95 % confidence interval
where there are at least MIN_BOOT values, else the range (min–max).

With few values a percentile bootstrap of the median says nothing the range
does not: with n = 5 the 2.5th and 97.5th percentiles of the resampled
medians are the smallest and the largest value (a resample's median is the
minimum whenever three of its five draws are), so its "95 % interval" is just
[min, max] and its coverage is not 95 %. Below MIN_BOOT, median_ci() and
ratio_ci() therefore return the range itself and interval_kind() names it
"range"; reports print ranges as min–max, never as confidence intervals.

A fixed seed makes every interval reproducible: the same results give the
same report, which the prose-numbers test relies on.

Two runs of the same plan agree or not by their medians (agreement()), not by
overlapping intervals: ranges of five runs overlap for almost anything."""
import random
import statistics

B = 2000      # bootstrap resamples: enough for a stable 95 % percentile interval
SEED = 12345  # fixed: reports are deterministic functions of the results
MIN_BOOT = 10  # fewer values: the interval is the range (min–max), not a bootstrap CI


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
    """(median, lo, hi): a bootstrap CI from MIN_BOOT values on, below that
    the range (min, max). One value: its interval is the value itself."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None, None
    m = statistics.median(xs)
    if len(xs) < MIN_BOOT:
        return m, min(xs), max(xs)
    boots = sorted(_boot_medians(xs, random.Random(seed), b))
    a = (1 - level) / 2
    return m, _pct(boots, a), _pct(boots, 1 - a)


def ratio_ci(num, den, level=0.95, b=B, seed=SEED):
    """median(num)/median(den) and its interval: bootstrapped (both samples
    resampled) when both have MIN_BOOT values, else the range of the ratio,
    min(num)/max(den) .. max(num)/min(den)."""
    num = [x for x in num if x is not None]
    den = [x for x in den if x is not None and x != 0]
    if not num or not den:
        return None, None, None
    r = statistics.median(num) / statistics.median(den)
    if min(len(num), len(den)) < MIN_BOOT:
        return r, min(num) / max(den), max(num) / min(den)
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(num, k=len(num))) /
                   statistics.median(rng.choices(den, k=len(den))) for _ in range(b))
    a = (1 - level) / 2
    return r, _pct(boots, a), _pct(boots, 1 - a)


def interval_kind(*ns):
    """What median_ci()/ratio_ci() return for samples of these sizes: "CI" or "range"."""
    return "CI" if ns and min(ns) >= MIN_BOOT else "range"


DIFF = 0.10  # two runs' medians differ when they are more than 10 % apart


def rel_diff(a, b):
    """(b - a) / a, or None."""
    return None if a in (None, 0) or b is None else (b - a) / a


def agreement(pairs, diff=DIFF):
    """pairs: [(label, median A, median B, regime A, regime B)]. Returns
    {"of", "differ" (|Δmedian| > diff), "flips" (regime labels differ),
    "rows": [(label, Δ, differs?, flipped?)]}."""
    rows = []
    for lab, a, b, ra, rb in pairs:
        d = rel_diff(a, b)
        if d is None:
            continue
        rows.append((lab, d, abs(d) > diff, ra != rb))
    return {"of": len(rows), "differ": sum(r[2] for r in rows), "flips": sum(r[3] for r in rows), "rows": rows}


def overlap(a, b):
    """Do two (est, lo, hi) intervals overlap? (Two full runs 'agree' when they do.)"""
    return a[1] is not None and b[1] is not None and a[1] <= b[2] and b[1] <= a[2]


def quantiles(xs, qs=(0.05, 0.25, 0.5, 0.75, 0.95)):
    s = sorted(x for x in xs if x is not None)
    return {q: _pct(s, q) for q in qs} if s else {}
