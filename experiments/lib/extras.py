"""Numbers from the non-sweep experiments (open-loop, start-up/stop,
handoff timeline, simulation) for numbers.json. Each is optional: a quick
run or a machine without oha simply has fewer keys."""
from . import stats


# The knee, one definition for the code and the prose (numbers.json's
# const:knee_achieved and const:knee_p99_factor): the highest offered rate at
# which the achieved rate was at least KNEE_ACHIEVED of the offer and p99
# under KNEE_P99_FACTOR times the lightest load's p99.
KNEE_ACHIEVED = 0.95
KNEE_P99_FACTOR = 10
CLIENT_SAT = 0.90  # oha at this share of a core or more: the knee is the client's


def knee(points):
    """The highest offered rate the server still met (see KNEE_ACHIEVED)."""
    pts = sorted(points, key=lambda p: p["offered"])
    if not pts:
        return None
    base = pts[0]["p99_us"] or 1
    ok = [p["offered"] for p in pts if p["achieved"] >= KNEE_ACHIEVED * p["offered"]
          and (p["p99_us"] or 0) < KNEE_P99_FACTOR * base]
    return max(ok) if ok else None


def knee_owner(points, k):
    """Whose limit the knee is: "the client's" where oha used CLIENT_SAT of a
    core or more at the first offer past the knee (or at the highest offer,
    when every offer was met, or at the lowest, when none was), else "the server's"."""
    pts = sorted(points, key=lambda p: p["offered"])
    if not pts:
        return None
    past = [p for p in pts if k is None or p["offered"] > k]
    at = past[0] if past else pts[-1]
    c = at.get("client_cores")
    if c is None:
        return None
    return "the client's" if c >= CLIENT_SAT else "the server's"


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
                "p99_us": stats.median([r["p99_us"] for r in rs]),
                "client_cores": stats.median([r.get("client_cores") for r in rs])} for rs in by.values()]
        k = knee(pts)
        owner = knee_owner(pts, k)
        if owner:
            N[f"openloop_knee_owner:{srv}"] = {"value": owner, "text": owner, "text_ci": owner}
        cc = [p["client_cores"] for p in pts if p["client_cores"] is not None]
        if cc:
            put(f"openloop_client_cores_max:{srv}", max(cc), kind="{:.2f}")
        if k is None:
            N[f"openloop_knee:{srv}"] = {"value": None, "text": "none of the offered rates",
                                         "text_ci": "none of the offered rates"}
        put(f"openloop_knee:{srv}", k, kind="{:,.0f}")
        lo = min(by)
        put(f"openloop_p99_light:{srv}", stats.median([r["p99_us"] for r in by[lo]]), kind="{:.0f} µs")
    put("const:knee_achieved", KNEE_ACHIEVED, kind="pct")
    put("const:knee_p99_factor", KNEE_P99_FACTOR, kind="{:d}")
    put("const:client_sat", CLIENT_SAT, kind="pct")
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
        elif r.get("kind") == "compare":
            des_compare_numbers(r, put, N)
        elif r.get("kind") == "prediction":
            put(f"des_pred:{r['scenario']}", r["rps"], kind="{:,.0f}")
            if r.get("binding"):  # the stage whose own bound the prediction is
                N[f"des_binding:{r['scenario']}"] = {"value": r["binding"], "text": r["binding"],
                                                     "text_ci": r["binding"]}
                put(f"des_model:{r['scenario']}", r["model_rps"], kind="{:,.0f}")


def des_compare_numbers(r, put, N):
    """The DES beside the analytic model on the same runs (des.py's compare record)."""
    put("des_cmp_runs", r["n"], kind="{:d}")
    for who in ("des", "model"):
        put(f"des_cmp_{who}_err_median", r[f"{who}_abs_err_median"], kind="pct")
        put(f"des_cmp_{who}_err_p95", r[f"{who}_abs_err_p95"], kind="pct")
        put(f"des_cmp_{who}_closer", r[f"{who}_closer"], kind="{:d}")
    put("des_cmp_same", r["n"] - r["des_closer"] - r["model_closer"], kind="{:d}")
    labs = r.get("des_closer_labels") or []
    text = ", ".join(f"`{x}`" for x in labs) if labs else "none"
    N["des_cmp_closer_list"] = {"value": labs, "text": text, "text_ci": text}
