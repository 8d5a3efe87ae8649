"""Build the paper (and the headline results block of docs/results.md) from a
results folder.
No number in the prose is typed: each is a placeholder filled from the
results' numbers.json (experiments/report.py, experiments/lib/numbers.py).
paper/ holds the sources (paper.md, readme_results.md, paper.css) and what
this writes; the code that fills them is here, so paper/ imports nothing.

    python3 -m experiments.paper [--results DIR] [--pdf] [--readme [FILE]] [--strict]

In paper/paper.md (and paper/readme_results.md):
  {{key}}          the number's text, e.g. {{rps:cserve ring bt1 hello c64 wrk}}
  {{key|ci}}       the number with its 95 % interval, "median [lo, hi]"
  {{@D:key}}       a number of experiments/results/D/numbers.json, a record of its
                   own outside the run's folder (e.g. {{@regime:loop_bound}})
  <!-- TABLE:NAME -->   DIR/NAME.md (report.py's table with its provenance)
  <!-- FIG:NAME -->     DIR/fig/NAME.png, with the SVG named beside it (figures.py)
  <!-- FILE:NAME -->    DIR/NAME verbatim (a markdown file a script wrote)
  <!-- RECORD:D/NAME --> experiments/results/D/NAME, a record of its own outside
                        the run's folder (e.g. make loop-floor), less its title line
A missing input becomes a visible **[MISSING: ...]**; --strict makes it an
error. --readme rewrites the "paper" block of experiments/lib/generated.py
in FILE (default: the documents the registry names, docs/results.md) with
paper/readme_results.md filled the same way. --pdf renders paper/paper.pdf
with pandoc and weasyprint (scripts/setup-experiments.sh).

DIR defaults to experiments/results/full, the canonical full run; without
one every number and table is a visible MISSING.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

from experiments.lib import generated

ROOT = generated.ROOT
RECORDS = os.path.join(ROOT, "experiments", "results")
FULL = os.path.join(RECORDS, "full")
PLACEHOLDER = re.compile(r"\{\{([^{}|]+?)(\|ci)?\}\}")


ABSTRACT_MAX = 200     # words: a reader gets the answer in five minutes
PAGES_MAX = 12


def default_results():
    return FULL


def abstract_words(md):
    """Words of the filled paper's abstract (between its heading and the next)."""
    m = re.search(r"^## Abstract\s*$(.*?)^## ", md, re.M | re.S)
    return len(m.group(1).split()) if m else 0


def pdf_pages(path):
    """Pages of a PDF, from its page objects (weasyprint writes them plainly)."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", open(path, "rb").read()))


def fill(text, results, out_dir, missing):
    try:
        nums = json.load(open(os.path.join(results, "numbers.json")))
    except OSError:
        nums = {}
        missing.append("numbers.json")
    rel = os.path.relpath(results, ROOT)
    nums["results_dir"] = {"text": rel, "text_ci": rel}

    records = {}

    def record_numbers(d):
        if d not in records:
            try:
                records[d] = json.load(open(os.path.join(RECORDS, d, "numbers.json")))
            except (OSError, ValueError):
                records[d] = {}
        return records[d]

    def num(m):
        key, ci = m.group(1).strip(), m.group(2)
        if key.startswith("@"):
            d, _, k = key[1:].partition(":")
            got = record_numbers(d).get(k)
            if got is None:
                missing.append(key)
                return f"**[MISSING: {key}]**"
            return got["text_ci" if ci else "text"]
        if key not in nums:
            missing.append(key)
            return f"**[MISSING: {key}]**"
        return nums[key]["text_ci" if ci else "text"]

    def block(m):
        kind, name = m.group(1), m.group(2)
        if kind == "FIG":
            # PNG in the page (weasyprint's SVG support is partial); the SVG
            # beside it is the vector original for slides.
            p = os.path.join(results, "fig", f"{name}.png")
            if not os.path.exists(p):
                missing.append(f"fig/{name}")
                return f"**[MISSING figure {name} — make experiments]**"
            svg = os.path.relpath(p[:-4] + ".svg", out_dir)
            return f"![{name.replace('_', ' ')}]({os.path.relpath(p, out_dir)})\n\n*Vector: `{svg}`*"
        if kind == "RECORD":  # a record of its own: its title goes (the paper has its own)
            p, how, drop = os.path.join(RECORDS, name), "its own make target records it", r"\A# .*\n+"
        else:
            p, how, drop = (os.path.join(results, f"{name}.md" if kind == "TABLE" else name), "make experiments",
                            r"^<!-- generated .*?-->\n*")
        if not os.path.exists(p):
            missing.append(name)
            return f"**[MISSING: {os.path.relpath(p, ROOT)} — {how}]**"
        body = re.sub(drop, "", open(p).read())
        return f"<!-- from {os.path.relpath(p, ROOT)} -->\n{body.strip()}"

    text = re.sub(r"<!--\s*(TABLE|FIG|FILE):([\w.-]+)\s*-->", block, text)
    text = re.sub(r"<!--\s*(RECORD):([\w-]+/[\w.-]+)\s*-->", block, text)
    return PLACEHOLDER.sub(num, text)


def readme_body(results, doc, missing=None):
    """The "paper" block (experiments/lib/generated.py) for the document doc:
    paper/readme_results.md filled from results, its paths relative to doc."""
    tpl = open(os.path.join(ROOT, "paper", "readme_results.md")).read()
    missing = [] if missing is None else missing
    return fill(tpl, results, os.path.dirname(os.path.abspath(doc)), missing).strip()


def pdf(md_path, pdf_path):
    if not (shutil.which("pandoc") and shutil.which("weasyprint")):
        raise SystemExit("experiments.paper: --pdf needs pandoc and weasyprint (scripts/setup-experiments.sh)")
    css = os.path.join(ROOT, "paper", "paper.css")
    cmd = ["pandoc", md_path, "--standalone", "--metadata", "title=cserve: which stage bounds a one-thread WSGI server",
           "--resource-path", os.path.dirname(md_path), "--css", css, "--pdf-engine=weasyprint",
           "-o", pdf_path]
    subprocess.run(cmd, check=True, cwd=os.path.dirname(md_path))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(ROOT, "paper", "paper.md"))
    ap.add_argument("--results", default=None)
    ap.add_argument("--out", default=os.path.join(ROOT, "paper", "paper.out.md"))
    ap.add_argument("--pdf", action="store_true")
    ap.add_argument("--readme", nargs="?", const="", metavar="FILE",
                    help="splice the generated results section into FILE (default: docs/results.md, from the registry)")
    ap.add_argument("--strict", action="store_true", help="fail on any missing number, table or figure")
    a = ap.parse_args()
    results = a.results or default_results()
    missing = []
    out = fill(open(a.src).read(), results, os.path.dirname(os.path.abspath(a.out)), missing)
    with open(a.out, "w") as f:
        f.write(out)
    print(f"wrote {a.out} from {os.path.relpath(results, ROOT)}", file=sys.stderr)
    words, too_long = abstract_words(out), []
    if words > ABSTRACT_MAX:
        too_long.append(f"the abstract has {words} words (at most {ABSTRACT_MAX})")
    if a.readme is not None:
        for doc in generated.docs("paper") if not a.readme else [a.readme]:
            doc = os.path.abspath(doc)
            generated.rewrite(doc, generated.begin("paper"), generated.end("paper"), readme_body(results, doc, missing))
            print(f"spliced the results section into {os.path.relpath(doc, ROOT)}", file=sys.stderr)
    if a.pdf:
        out_pdf = os.path.join(os.path.dirname(os.path.abspath(a.out)), "paper.pdf")
        pdf(os.path.abspath(a.out), out_pdf)
        pages = pdf_pages(out_pdf)
        print(f"wrote {os.path.relpath(out_pdf, ROOT)} ({pages} pages)", file=sys.stderr)
        if pages > PAGES_MAX:
            too_long.append(f"the PDF has {pages} pages (at most {PAGES_MAX})")
    if too_long:
        print("experiments.paper: " + "; ".join(too_long), file=sys.stderr)
        return 1
    if missing:
        print(f"missing ({len(missing)}): {', '.join(sorted(set(missing))[:20])}", file=sys.stderr)
        if a.strict:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
