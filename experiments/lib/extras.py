"""Numbers from the non-sweep experiments (open-loop, start-up/stop,
handoff timeline, simulation) for numbers.json. Each is optional: a quick
run or a machine without oha simply has fewer keys."""
from . import stats


def knee(points):
    """The highest offered rate the server still met (achieved >= 95 % of
    offered and p99 under 10x the lightest load's p99)."""
    pts = sorted(points, key=lambda p: p["offered"])
    if not pts:
        return None
    base = pts[0]["p99_us"] or 1
    ok = [p["offered"] for p in pts if p["achieved"] >= 0.95 * p["offered"] and (p["p99_us"] or 0) < 10 * base]
    return max(ok) if ok else None


def openloop_groups(ol):
    """{(server, load): [records]}, the repeats of one offered load. A repeat
    offers fractions of the closed-loop capacity it measured just before, so
    its rates differ from another repeat's by a few per cent: repeats group by
    that fraction (load), not by the exact rate offered."""
    by = {}
    for r in ol:
        cap = r.get("capacity_closed_loop")
        load = round(r["offered"] / cap, 2) if cap else float(r["offered"])
        by.setdefault((r["server"], load), []).append(r)
    return by


def numbers(extra, put, N):
    ol = [r for r in extra.get("openloop", []) if "error" not in r]
    groups = openloop_groups(ol)
    for srv in sorted({r["server"] for r in ol}):
        # median over the repeats of each offered load
        by = {load: rs for (s, load), rs in groups.items() if s == srv}
        pts = [{"offered": stats.median([r["offered"] for r in rs]),
                "achieved": stats.median([r["achieved"] for r in rs]),
                "p99_us": stats.median([r["p99_us"] for r in rs])} for rs in by.values()]
        k = knee(pts)
        if k is None:
            N[f"openloop_knee:{srv}"] = {"value": None, "text": "none of the offered rates",
                                         "text_ci": "none of the offered rates"}
        put(f"openloop_knee:{srv}", k, kind="{:,.0f}")
        lo = min(by)
        put(f"openloop_p99_light:{srv}", stats.median([r["p99_us"] for r in by[lo]]), kind="{:.0f} µs")
    for r in extra.get("startup", []):
        if "error" in r:
            continue
        put(f"startup_ms:{r['server']}", r["start_median_s"] * 1e3, kind="{:.0f} ms")
        if r.get("stop_median_s") is not None:
            put(f"stop_ms:{r['server']}", r["stop_median_s"] * 1e3, kind="{:.0f} ms")
    for r in extra.get("timeline", []):
        if "error" in r:
            continue
        put(f"timeline_switches_per_req:{r['handoff']}", r.get("switches_per_request"), kind="{:.2f}")
        put(f"timeline_wakeups_per_req:{r['handoff']}", r.get("wakeups_per_request"), kind="{:.2f}")
    for r in extra.get("des", []):
        if r.get("kind") == "validation":
            put("des_abs_err_median", r["abs_err_median"], kind="pct")
            put("des_validated_on", r["n"], kind="{:d}")
        elif r.get("kind") == "prediction":
            put(f"des_pred:{r['scenario']}", r["rps"], kind="{:,.0f}")
