#!/usr/bin/env python3
"""check_steps.py RING_C MODEL_PML — the model checks the code's protocol.

For each ring.c function the model has an inline of the same name for, list
the protocol operations the function's code performs, in textual order, and
the tags (/*@TAG*/) in the model's inline, in order; they must be equal. So
moving a fence, dropping a re-check or adding a store to a flag in ring.c
without changing ring_protocol.pml (or the other way round) fails the test.
spin_for_job is not modelled: its pops only find work sooner than a park.
"""
import re
import sys

# Operation -> how it reads in ring.c. Order of the alternatives matters
# only within one position; each match is one step.
OPS = [
    ("PUSH", r"spsc_push\("),
    ("POP", r"spsc_pop\("),
    ("NONEMPTY", r"spsc_nonempty\("),
    ("F1", r"RING_FENCE\(F1\)"), ("F2", r"RING_FENCE\(F2\)"), ("F3", r"RING_FENCE\(F3\)"),
    ("F4", r"RING_FENCE\(F4\)"), ("F5", r"RING_FENCE\(F5\)"),
    ("PARK", r"atomic_store_explicit\(&w->parked, 1"),
    ("UNPARK", r"atomic_store_explicit\(&(?:w->parked|h->w\[i\]\.parked), 0"),
    ("LPARK", r"atomic_store_explicit\(&h->loop_parked, 1"),
    ("LUNPARK", r"atomic_store_explicit\(&h->loop_parked, 0"),
    ("STOP", r"atomic_store_explicit\(&h->stopping, true"),
    ("LOAD_PARKED", r"atomic_load_explicit\(&w->parked"),
    ("LOAD_LPARKED", r"atomic_load_explicit\(&h->loop_parked"),
    ("LOAD_STOP", r"atomic_load_explicit\(&h->stopping"),
    ("XCHG", r"atomic_exchange_explicit\("),
    ("WAIT", r"futex_wait\("),
    ("WAKE", r"futex_wake\("),
    ("EFD_W", r"write\(h->efd"),
    ("EFD_R", r"read\(h->efd"),  # none: the doorbell is never read (ring_watch)
    # calls of modelled helpers are steps too (where the owed wake-up is paid)
    ("FLUSH", r"\bring_flush\("),
    ("PAY", r"\bpay_wake\("),
]
OP_RE = re.compile("|".join(f"(?P<{n}>{p})" for n, p in OPS))


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def c_functions(text):
    """name -> body of each top-level function definition in ring.c."""
    text = strip_comments(text)
    out = {}
    for m in re.finditer(r"^(?:static\s+)?[\w\s\*]+?\b(\w+)\s*\([^;{]*\)\s*\{", text, re.M):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[m.group(1)] = text[m.end():i]
    return out


def model_inlines(text):
    out = {}
    for m in re.finditer(r"^inline\s+(\w+)\s*\([^)]*\)\s*\{", text, re.M):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[m.group(1)] = re.findall(r"/\*@(\w+)\*/", text[m.end():i])
    return out


def main():
    code = c_functions(open(sys.argv[1]).read())
    model = model_inlines(open(sys.argv[2]).read())
    checked = [n for n in model if n in code]
    if len(checked) < 6:
        print(f"check_steps: FAIL: only {checked} are modelled", file=sys.stderr)
        return 1
    bad = 0
    for name in checked:
        ops = [m.lastgroup for m in OP_RE.finditer(code[name])]
        if ops != model[name]:
            print(f"check_steps: FAIL: {name}\n  ring.c: {' '.join(ops)}\n  model:  {' '.join(model[name])}",
                  file=sys.stderr)
            bad = 1
        else:
            print(f"check_steps: {name}: {' '.join(ops)}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
