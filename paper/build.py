#!/usr/bin/python3
"""Build paper/paper.out.md from paper/paper.md: each `<!-- TABLE:NAME -->`
becomes experiments/results/NAME.md (experiments/report.py's table for that
sweep, with its provenance line), each `<!-- PROFILE:NAME -->` becomes
experiments/results/profile-NAME.md (scripts/profile.sh's markdown report, if
saved there). Missing inputs become a visible **[MISSING: ...]** line with the
command that makes them, never silently nothing.

    paper/build.py [--results experiments/results] [--out paper/paper.out.md]
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAKERS = {"TABLE": "make experiments (experiments/run.py --sweep {n} && experiments/report.py)",
          "PROFILE": "make profile (scripts/profile.sh -o /tmp/p -- --handoff {n}; "
                     "cp /tmp/p/report.md experiments/results/profile-{n}.md)"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(ROOT, "paper", "paper.md"))
    ap.add_argument("--results", default=os.path.join(ROOT, "experiments", "results"))
    ap.add_argument("--out", default=os.path.join(ROOT, "paper", "paper.out.md"))
    a = ap.parse_args()
    text = open(a.src).read()
    missing = []

    def sub(m):
        kind, name = m.group(1), m.group(2)
        path = os.path.join(a.results, f"{name}.md" if kind == "TABLE" else f"profile-{name}.md")
        if not os.path.exists(path):
            missing.append(name)
            return f"**[MISSING: {os.path.relpath(path, ROOT)} — run {MAKERS[kind].format(n=name)}]**"
        body = open(path).read()
        body = re.sub(r"^<!-- generated .*?-->\n*", "", body)
        return f"<!-- from {os.path.relpath(path, ROOT)} -->\n{body.strip()}"

    out = re.sub(r"<!--\s*(TABLE|PROFILE):([\w-]+)\s*-->", sub, text)
    # Figures are referenced relative to paper/; keep them only if they exist.
    def fig(m):
        p = os.path.normpath(os.path.join(os.path.dirname(a.out), m.group(2)))
        return m.group(0) if os.path.exists(p) else f"**[MISSING figure {m.group(2)} — run make experiments]**"
    out = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", fig, out)
    with open(a.out, "w") as f:
        f.write(out)
    print(f"wrote {a.out}" + (f"; missing: {', '.join(missing)}" if missing else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
