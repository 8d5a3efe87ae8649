"""Generated blocks in hand-written Markdown (README.md, handoffs/README.md):
the text between a BEGIN and an END marker line belongs to a generator
(bench.py, micro.py, paper/build.py) and is rewritten whole each time."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The documents a handoff table goes into (micro.py, loop_floor.py) unless told otherwise.
HANDOFF_DOCS = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "handoffs", "README.md")]


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
