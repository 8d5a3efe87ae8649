"""Every number in the prose comes from the results.

- paper/paper.md and paper/readme_results.md hold no typed number: outside
  code, comments, headings and {{placeholders}}, no digit stands alone.
- Every generated block (docs/results.md's headline results, the rest of
  docs/, handoffs/README.md, README's test time) is exactly what its
  writer makes from its record, in
  each document the registry (experiments/lib/generated.py) names for it (a
  hand edit, or a stale record, fails); every GENERATED marker in the docs
  belongs to a registered block.
- numbers.json is what experiments/report.py computes from the recorded
  .jsonl (a hand-edited number fails).
- With a full run recorded, every placeholder resolves (build --strict).
Pure Python over the recorded results; a few seconds."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiments import paper
from experiments.lib import generated

# A number standing alone: not part of an identifier (cpu20, c64, p99.9,
# HTTP/1.1, wrk-p16) and not a list marker at the start of a line.
NUM = re.compile(r"(?<![\w./\-])\d+(?:[.,]\d+)*(?![\w])")


def typed_numbers(md):
    text = re.sub(r"```.*?```", "", md, flags=re.S)           # fenced code
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)        # comments and TABLE/FIG markers
    text = paper.PLACEHOLDER.sub("", text)                    # {{key}} / {{key|ci}}
    hits = []
    for line in text.splitlines():
        if line.startswith("    ") or line.lstrip().startswith("#"):
            continue  # indented code, headings (section numbers)
        line = re.sub(r"`[^`]*`", "", line)                  # inline code: commands, identifiers
        line = re.sub(r"\]\([^)]*\)", "]", line)             # link targets
        line = re.sub(r"^\s*\d+\.\s", "", line)              # numbered-list markers
        hits += [(m.group(0), line.strip()) for m in NUM.finditer(line)]
    return hits


def test_lint_finds_a_typed_number():
    # The lint itself, against the kind of sentence it must catch.
    assert typed_numbers("cserve serves 1.29× Granian's rate at c64.")
    assert typed_numbers("the loop runs at 71–86 % of a core")
    assert not typed_numbers("cserve serves {{ratio_ring_granian_c64|ci}} at c64 with `wrk -c64`.")
    assert not typed_numbers("1. Which stage bounds cpu20 over HTTP/1.1 at p99.9?")


@pytest.mark.parametrize("name", ["paper.md", "readme_results.md"])
def test_prose_has_no_typed_numbers(name):
    hits = typed_numbers(open(os.path.join(ROOT, "paper", name)).read())
    assert not hits, f"typed numbers in paper/{name} (use a {{{{placeholder}}}}): {hits[:10]}"



def test_numbers_json_is_computed_from_the_records(tmp_path):
    from experiments import report
    src = paper.default_results()
    if not os.path.exists(os.path.join(src, "numbers.json")):
        pytest.fail(f"no numbers.json in {src}: run experiments/report.py --dir {src}")
    for f in os.listdir(src):
        if f.endswith(".jsonl") or f == "plan.json":
            shutil.copy(os.path.join(src, f), tmp_path / f)
    have = json.load(open(os.path.join(src, "numbers.json")))
    other = have.get("compare_dir", {}).get("value")  # a second run compared: recompute with it
    report.build(str(tmp_path), os.path.join(ROOT, other) if other else None, figs=False)
    want = json.load(open(tmp_path / "numbers.json"))
    diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
    assert not diff, f"numbers.json differs from its records at: {diff[:10]}"


def test_full_run_resolves_every_placeholder():
    if not os.path.exists(os.path.join(paper.FULL, "numbers.json")):
        pytest.skip("no full run recorded yet (experiments/results/full): make experiments")
    p = subprocess.run([sys.executable, "-m", "experiments.paper", "--strict",
                        "--results", paper.FULL, "--out", os.devnull], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr


def test_placeholders_name_configurations_of_the_full_plan():
    # A `metric:label` placeholder must name a configuration the full run
    # makes, or the paper would print MISSING after an hour's run.
    from experiments.lib import configs
    labels = {configs.label(r) for rows in configs.full().values() for r in rows}
    bad = []
    for name in ("paper.md", "readme_results.md"):
        for m in paper.PLACEHOLDER.finditer(open(os.path.join(ROOT, "paper", name)).read()):
            key = m.group(1).strip()
            metric, _, label = key.partition(":")
            if label and metric in ("rps", "rps_wrk", "p50_us", "p99_us", "loop_util", "pool_util",
                                    "client_util", "cores", "c_loop", "c_pool", "c_client", "regime", "n", "pred") \
                    and label not in labels:
                bad.append(key)
    assert not bad, f"placeholders naming configurations the full plan lacks: {bad}"


# How to remake each block's record, for the message when it is missing.
REMAKE = {"paper": "make experiments", "bench": "make bench", "bench-replica": "make bench on another host",
          "micro": "make micro-record", "stats": "scripts/readme_stats.sh",
          "placement": "python3 -m experiments.placement", "loop-floor": "make loop-floor",
          "freethreaded": "python3 -m experiments.freethreaded", "test-time": "scripts/time-make-test.sh",
          "metrics-overhead": "python3 -m experiments.metrics_overhead",
          "production": "python3 -m experiments.production",
          "auto-threads": "python3 -m experiments.auto_threads", "pylink": "python3 -m experiments.pylink",
          "dispatch": "python3 -m experiments.dispatch --baseline REV"}
# Blocks whose first record is still to be made: their writer says so in
# the block (and test_generated_blocks_are_written_from_their_records
# checks that text). A block leaves this set with its first record.
AWAITED = set()


def test_every_generated_block_has_a_writer_a_record_and_a_home():
    import importlib
    assert set(generated.BLOCKS) == set(REMAKE)
    for block, b in generated.BLOCKS.items():
        assert callable(getattr(importlib.import_module(b.module), "readme_body", None)), \
            f"{block}: {b.module} has no readme_body(record, doc)"
        if block in AWAITED:
            assert not os.path.exists(generated.record(block)), \
                f"{block}'s record {b.record} exists: take {block} out of AWAITED"
        else:
            assert os.path.exists(generated.record(block)), f"{block}'s record {b.record} missing: {REMAKE[block]}"
        for p in b.docs:
            assert os.path.exists(os.path.join(ROOT, p)), f"{block}'s document {p} is missing"


def test_every_generated_marker_in_the_docs_is_registered():
    known = {generated.begin(b) for b in generated.BLOCKS} | {generated.end(b) for b in generated.BLOCKS}
    bad = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("results", "build")]
        for f in files:
            if f.endswith(".md") and f != "paper.out.md":
                path = os.path.join(d, f)
                for line in open(path, encoding="utf-8", errors="replace"):
                    if re.match(r"<!-- (BEGIN|END) GENERATED\b", line) and line.strip() not in known:
                        bad.append(f"{os.path.relpath(path, ROOT)}: {line.strip()}")
    assert not bad, f"GENERATED markers no block of experiments/lib/generated.py owns: {bad}"


@pytest.mark.parametrize("block,doc", [
    pytest.param(block, doc, id=f"{block}-{doc}")
    for block, b in generated.BLOCKS.items() for doc in b.docs])
def test_generated_blocks_are_written_from_their_records(block, doc):
    # The headline results and the bench, micro-record, readme_stats,
    # placement and loop-floor tables are their writers' output from the
    # recorded runs: a hand-typed or hand-edited cell fails.
    path = os.path.join(ROOT, doc)
    text = open(path).read()
    b, e = generated.begin(block), generated.end(block)
    assert b in text and e in text, f"{doc} lost the {block} block's GENERATED markers"
    have = text.split(b, 1)[1].split(e, 1)[0]
    want = generated.body(block, path)
    assert have.strip() == want.strip(), \
        f"{doc}'s {block} block is not what `{generated.BLOCKS[block].command}` writes from {generated.BLOCKS[block].record}"
    copy = generated.splice(text, b, e, want)
    assert copy == text, f"{doc}'s {block} block differs from a rewrite in its blank lines"


def test_micro_readme_writer_fills_the_block(tmp_path):
    # The writer itself, on a synthetic record: the block is replaced, not appended.
    from experiments import micro
    summ = {name: {f: {"median": 1500.0, "min": 1000.0, "max": 2000.0} for f in micro.FIELDS}
            for name, _ in micro.ROWS[:2]}
    rec = {"meta": {"command": "make micro-record", "time": "t", "commit": "abc", "cpu_model": "cpu",
                    "nproc": 2, "kernel": "k", "rounds": 3}, "summary": summ}
    (tmp_path / "m.json").write_text(json.dumps(rec))
    readme = tmp_path / "R.md"
    readme.write_text(f"a\n{generated.begin('micro')}\nold row\n{generated.end('micro')}\nb\n")
    for _ in range(2):
        generated.write("micro", str(tmp_path / "m.json"), [str(readme)])
    text = readme.read_text()
    assert "old row" not in text and text.count(generated.begin("micro")) == 1
    assert "| ring, worker spins, loop polls | 1.5k (1.0k–2.0k) |" in text
    assert text.startswith("a\n") and text.endswith("b\n")


def test_a_file_without_the_markers_is_refused_and_left_whole(tmp_path):
    # A generator pointed at a document that lacks its block must say so and
    # leave the document as it was, not emptied.
    from experiments.lib import generated
    doc = tmp_path / "R.md"
    doc.write_text("hand-written text\n")
    with pytest.raises(SystemExit):
        generated.rewrite(str(doc), "<!-- BEGIN x -->", "<!-- END x -->", "body")
    assert doc.read_text() == "hand-written text\n"


def test_a_record_include_brings_the_record_without_its_title(tmp_path):
    # <!-- RECORD:D/NAME --> is a file under experiments/results/ outside the
    # run's folder (make loop-floor's): its body, less its "# " title; a
    # missing one is a visible MISSING, which --strict turns into an error.
    missing = []
    text = paper.fill("a\n<!-- RECORD:loop-floor/loop_floor.md -->\nb", paper.default_results(), str(tmp_path),
                      missing)
    body = open(os.path.join(ROOT, "experiments", "results", "loop-floor", "loop_floor.md")).read()
    assert body.startswith("# ") and body.splitlines()[0] not in text
    assert body.split("\n", 2)[2].strip().splitlines()[0] in text and "RECORD:" not in text
    missing = []
    text = paper.fill("<!-- RECORD:loop-floor/nope.md -->", paper.default_results(), str(tmp_path), missing)
    assert "MISSING" in text and "loop-floor/nope.md" in missing


def test_every_generated_file_is_what_the_records_make(tmp_path):
    # The chain from the records to the paper, closed: every .md and .jsonl
    # that report.py, des.py and instrument_cost.py write into the results
    # folder is regenerated from its .jsonl records and compared byte for
    # byte, and so is paper/paper.out.md from those files. A hand edit to a
    # number in paper.out.md, model.md or des.md (or stale outputs) fails.
    src = paper.default_results()
    if not os.path.exists(os.path.join(src, "numbers.json")):
        pytest.skip(f"no results in {src}")
    meta = [json.loads(x) for x in open(os.path.join(src, "meta.jsonl"))] if \
        os.path.exists(os.path.join(src, "meta.jsonl")) else []
    outputs = {"des.jsonl"}  # written by des.py, read by report.py: regenerated, not copied
    for f in os.listdir(src):
        if (f.endswith(".jsonl") and f not in outputs) or f == "plan.json":
            shutil.copy(os.path.join(src, f), tmp_path / f)
    quick = ["--quick"] if meta and meta[-1].get("quick") else []
    subprocess.run([sys.executable, "-m", "experiments.des", "--dir", str(tmp_path), *quick],
                   check=True, capture_output=True, cwd=ROOT)
    if (tmp_path / "instruments.jsonl").exists() and os.path.exists(os.path.join(src, "instrument_cost.md")):
        out = subprocess.run([sys.executable, "-m", "experiments.instrument_cost",
                              str(tmp_path / "instruments.jsonl")], check=True, capture_output=True, text=True,
                             cwd=ROOT)
        (tmp_path / "instrument_cost.md").write_text(out.stdout)
    from experiments import report
    other = json.load(open(os.path.join(src, "numbers.json"))).get("compare_dir", {}).get("value")
    report.build(str(tmp_path), os.path.join(ROOT, other) if other else None, figs=False)
    made = sorted(f for f in os.listdir(tmp_path) if f.endswith(".md") or f in outputs)
    assert {"model.md", "des.md", "calib.md"} <= set(made)
    stale = [f for f in made if not os.path.exists(os.path.join(src, f))
             or open(os.path.join(src, f)).read() != (tmp_path / f).read_text()]
    assert not stale, f"{os.path.relpath(src, ROOT)}: not what the records make: {stale}"
    have = open(os.path.join(ROOT, "paper", "paper.out.md")).read()
    want = paper.fill(open(os.path.join(ROOT, "paper", "paper.md")).read(), src, os.path.join(ROOT, "paper"), [])
    assert have == want, "paper/paper.out.md is not what experiments/paper.py makes from the results (make paper)"
