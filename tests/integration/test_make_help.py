"""`make help` lists the targets, one line each, and is the list the
documents draw from: every target of the top Makefile's .PHONY line has
its line, and every `make TARGET` that README.md, docs/, the folders'
READMEs, the paper's source and .ci/run name is a target it lists. A
target renamed or dropped, or one added without its `## ` line, fails
here. Runs make only to print the list (no build)."""
import glob
import os
import re
import subprocess

from conftest import ROOT

LINE = re.compile(r"^  (\S+) +(\S.*)$")


def help_lines():
    r = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=str(ROOT), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def listed():
    return [LINE.match(line).group(1) for line in help_lines()]


def test_one_line_per_target_each_saying_what_it_does():
    lines = help_lines()
    assert lines
    bad = [line for line in lines if not LINE.match(line)]
    assert not bad, f"lines that are not 'target  what it does': {bad}"
    names = listed()
    assert len(names) == len(set(names)), f"a target listed twice: {sorted(n for n in names if names.count(n) > 1)}"


def phony_targets(makefile):
    text = open(makefile).read().replace("\\\n", " ")
    return {t for m in re.finditer(r"^\.PHONY:(.*)$", text, re.M) for t in m.group(1).split()}


def test_every_phony_target_of_the_makefile_is_listed():
    missing = phony_targets(os.path.join(ROOT, "Makefile")) - set(listed())
    assert not missing, f"targets without a `## ` line (make help leaves them out): {sorted(missing)}"


def documents():
    docs = [os.path.join(ROOT, p) for p in ("README.md", ".ci/run", "paper/paper.md")]
    docs += glob.glob(os.path.join(ROOT, "docs", "*.md"))
    docs += glob.glob(os.path.join(ROOT, "*", "README.md")) + glob.glob(os.path.join(ROOT, "*", "*", "README.md"))
    return sorted(p for p in docs if os.path.isfile(p))


# `make TARGET` in inline code or on a command line of a code block (four
# spaces in), after any VAR=value; a path (build-asan/cserve) is a file, not
# a target. In a shell script every line is a command line.
MAKE_MD = re.compile(r"(?:`|^ {4,}(?:\$ )?)make\s+((?:[A-Z_]+=[^\s`]+\s+)*)([a-z][\w.-]*)(?![\w./-])", re.M)
MAKE_SH = re.compile(r"^[ \t]*make\s+((?:[A-Z_]+=\S+\s+)*)([a-z][\w.-]*)(?![\w./-])", re.M)


def test_every_target_the_documents_name_is_listed():
    have = set(listed())
    named = {}
    for path in documents():
        pattern = MAKE_MD if path.endswith(".md") else MAKE_SH
        for m in pattern.finditer(open(path, encoding="utf-8").read()):
            named.setdefault(m.group(2), set()).add(os.path.relpath(path, ROOT))
    assert {"run", "test"} <= set(named), named
    unknown = {t: sorted(where) for t, where in named.items() if t not in have}
    assert not unknown, f"`make TARGET` in the documents that make help does not list: {unknown}"
