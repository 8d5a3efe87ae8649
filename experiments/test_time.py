"""The "test-time" block in tests/README.md: how long `make test` took, from
the newest line scripts/time-make-test.sh appended to its record
(experiments/results/test-time.txt).

    python3 -m experiments.test_time --readme     # rewrite the block"""
import argparse
import re

from experiments.lib import generated


def readme_body(record, doc=None):
    """The block's text from the record's newest line."""
    with open(record) as f:
        lines = [ln for ln in f if ln.strip()]
    if not lines:
        raise SystemExit(f"{record}: no run recorded (scripts/time-make-test.sh)")
    date, _commit, machine, load, took = lines[-1].rstrip("\n").split("\t")
    m = re.search(r"\((\d+) min (\d+) s\)", took)
    cpus = machine.split(" vCPUs")[0]
    return (f"`make test` took {int(m.group(1))} min {int(m.group(2))} s on a {cpus}-vCPU machine "
            f"({date[:10]}, {load.replace('load ', 'load average ')}), as `scripts/time-make-test.sh` "
            f"recorded it in `experiments/results/test-time.txt`.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", action="store_true", help="rewrite the block in tests/README.md")
    a = ap.parse_args()
    if a.readme:
        generated.write("test-time")
    else:
        print(readme_body(generated.record("test-time")))


if __name__ == "__main__":
    main()
