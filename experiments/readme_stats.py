"""The example stats table in docs/instruments.md, written from
its record, experiments/results/readme_stats/stats.txt (scripts/readme_stats.sh
makes the record: five `key: value` lines, then the SIGUSR1 table as cserve
printed it).

    python3 -m experiments.readme_stats --readme experiments/results/readme_stats/stats.txt
"""
import argparse

from experiments.lib import generated

KEYS = ("date", "commit", "machine", "cserve", "wrk")


def readme_body(record, doc=None):
    """The "stats" block (experiments/lib/generated.py): the table recorded in record."""
    with open(record) as f:
        lines = f.read().splitlines()
    meta = dict(line.split(": ", 1) for line in lines[:len(KEYS)] if ": " in line)
    missing = [k for k in KEYS if not meta.get(k)]
    if missing:
        raise SystemExit(f"{record}: no {', '.join(missing)} (re-run scripts/readme_stats.sh)")
    return (f"\n`scripts/readme_stats.sh` at commit {meta['commit']}, {meta['date']}: {meta['machine']}; "
            f"{meta['cserve']}; wrk on the same vCPUs, {meta['wrk']}\n\n"
            + "\n".join("    " + line for line in lines[len(KEYS):]) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--readme", metavar="RECORD", required=True)
    a = ap.parse_args()
    generated.write("stats", a.readme)


if __name__ == "__main__":
    main()
