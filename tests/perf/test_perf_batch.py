"""The ring's doze and hold on a worker that keeps a pace on the live
scheduler: handoffs/tests/batch_test.c --paced (parts 6, 7 and 9: the loop
dozes and holds on a paced worker as the rule says, the eventfd is spared,
a stall makes it announce). A run passes or fails as a whole; the check
passes when most of the rounds do. The same rules on fixed paces and a
fixed clock are batch_test's other parts, in make test."""
import pathlib
import subprocess

import pytest

import perf

BIN = pathlib.Path(__file__).resolve().parents[2] / "build" / "handoffs-tests" / "batch_test"


@pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} is not built (make perf-check builds it)")
def test_the_loop_dozes_and_holds_on_a_paced_worker():
    def run():
        p = subprocess.run([str(BIN), "--paced"], capture_output=True, text=True, timeout=120)
        out = (p.stdout + p.stderr).strip()
        if p.returncode:
            print(f"    a failed round: {out.splitlines()[-1] if out else p.returncode}")
        return {"passed": int(p.returncode == 0),
                "holds": int(out.rsplit(" holds on a paced", 1)[0].rsplit(" ", 1)[-1]) if p.returncode == 0 else 0}

    m = perf.report("batch_test --paced", perf.interleaved({"--paced": run}))["--paced"]
    assert m["passed"] == 1, "most rounds of batch_test --paced failed"
    assert m["holds"] > 0
