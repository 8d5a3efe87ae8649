"""Generated blocks in hand-written Markdown (README.md, docs/, handoffs/README.md):
the text between a BEGIN and an END marker line belongs to a generator
(bench.py, micro.py, paper/build.py, ...) and is rewritten whole each time."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Where each generated block lives: block -> the documents (from the
# repository root) that carry it. Every writer and the test that checks the
# blocks ask here, so moving a block to another page is one line.
BLOCKS = {
    "paper": ["README.md"],                       # paper/build.py --readme: the headline results
    "bench": ["docs/results.md"],                 # experiments/bench.py --readme
    "bench-replica": ["docs/results.md"],         # experiments/bench.py --readme-replica
    "placement": ["docs/results.md"],             # experiments/placement.py --readme
    "loop-floor": ["handoffs/README.md"],         # experiments/loop_floor.py --readme
    "micro": ["handoffs/README.md"],              # experiments/micro.py --readme
    "stats": ["docs/instruments.md"],
    "freethreaded": ["docs/python.md"],           # experiments/freethreaded.py --readme             # scripts/readme_stats.sh (experiments/readme_stats.py)
}


def docs(block):
    """The absolute paths of the documents that carry block."""
    return [os.path.join(ROOT, p) for p in BLOCKS[block]]


def rewrite_all(block, begin, end, body):
    """rewrite() in every document that carries block."""
    for path in docs(block):
        rewrite(path, begin, end, body)


def splice(text, begin, end, body, where="the file"):
    """text with what stands between the markers begin and end replaced by
    body (the markers stay, each on a line of its own around it)."""
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"{where}: no generated block (add the marker lines {begin!r} and {end!r} where it goes)")
    return text[:i] + begin + "\n" + body + "\n" + end + text[j + len(end):]


def rewrite(path, begin, end, body):
    """splice() applied to the file at path, in place. The new text is made
    before the file is opened for writing, so a file without the markers is
    left as it was, not emptied."""
    with open(path) as f:
        text = f.read()
    new = splice(text, begin, end, body, where=path)
    with open(path, "w") as f:
        f.write(new)
