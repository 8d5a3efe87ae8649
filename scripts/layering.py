#!/usr/bin/python3
"""The declared dependency graph, checked (`make layering`).

The graph is read from docs/architecture.md ("What may include what"), the
one place it is stated.

C: every `#include "..."` in core/, handoffs/ and lib/ must be allowed by
the C table there, no .c file may declare `extern` a variable that another
folder defines (the include graph would not show that edge), and no two C
files may depend on each other, directly or round a circle. A .c file
depends on another when it uses a function or
variable the other defines, through a header it includes; a header that
only declares types ties no file to another. So a header shared by several
files that call one another (one `*_internal.h` for a whole folder) does
not hide their circle.

Python: every import between experiments/, scripts/, paper/, tests/, apps/
and pip_backend/ must be allowed by the Python table. experiments/ is a package (run
as `python3 -m experiments.NAME` from the checkout): its modules are imported
by their dotted names (experiments.lib.threadcpu) or relatively, never by a
bare name found through a sys.path edit; and no file in experiments/,
scripts/ or paper/ edits sys.path.

Usage: layering.py [--print] [ROOT]    (ROOT: the checkout, default: this
script's; --print: the declared graph, then the check)
Prints one line per violation (file, what it includes or imports, the rule
it breaks) and exits 1; prints one OK line and exits 0 otherwise. A table
it cannot read is one line and exit 1 too.
"""
import ast
import os
import re
import sys

# The graph itself is stated once, in docs/architecture.md ("What may
# include what"): a table of C folders and what each may include, and one of
# Python areas and what each may import, each row with its reason. This
# script reads those tables from the checkout it checks (load_graph), so a
# rule changes in one place, beside its reason. In the C table a folder
# (`core/http/`) names every file in it; a path to a header
# (`core/python/job.h`) names that header only: an exception kept narrow on
# purpose.
GRAPH_DOC = os.path.join("docs", "architecture.md")
C_ROOTS = ("core", "handoffs", "lib")
C_RULES = {}
PY_RULES = {}
PY_AREAS = []
# Areas whose files may not edit sys.path (tests/ still puts its own folder there).
PY_NO_SYS_PATH = ("experiments", "scripts", "paper")
# Imports the table does not allow but the code does today, each with why it
# stays: empty now; an entry is (importing file, imported area, reason).
PY_EXCEPTIONS = []

TABLE_HEAD = re.compile(r"^\|\s*folder\s*\|\s*may (include|import)\s*\|")


class GraphError(Exception):
    pass


def parse_graph(text, where=GRAPH_DOC):
    """{"include": {folder: [allowed]}, "import": {area: [allowed]}} from
    the two tables of text (folders without their trailing slash). Raises
    GraphError naming what it could not read."""
    graph = {}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = TABLE_HEAD.match(line)
        if not m:
            continue
        kind = m.group(1)
        if kind in graph:
            raise GraphError("%s:%d: a second 'may %s' table (the graph is stated once)" % (where, i + 1, kind))
        rules = graph[kind] = {}
        for n, row in enumerate(lines[i + 2:], start=i + 3):
            if not row.startswith("|"):
                break
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            folder = re.fullmatch(r"`([\w./-]+)/`", cells[0])
            allowed = re.findall(r"`([^`]+)`", cells[1]) if len(cells) > 1 else None
            if not folder or (cells[1] != "nothing" and (not allowed or re.sub(r"`[^`]+`|[,\s]", "", cells[1]))):
                raise GraphError("%s:%d: cannot read the row %r (want: | `folder/` | `a/`, `b/x.h` or nothing | why |)"
                                 % (where, n, row))
            if folder.group(1) in rules:
                raise GraphError("%s:%d: %s/ has a second row" % (where, n, folder.group(1)))
            rules[folder.group(1)] = [a.rstrip("/") for a in allowed] if cells[1] != "nothing" else []
        if not rules:
            raise GraphError("%s:%d: the 'may %s' table has no rows" % (where, i + 1, kind))
    for kind in ("include", "import"):
        if kind not in graph:
            raise GraphError("%s: no '| folder | may %s | why |' table" % (where, kind))
    for kind, rules in graph.items():
        for k, v in rules.items():
            for a in v:
                if a not in rules and not (kind == "include" and a.endswith(".h")):
                    raise GraphError("%s: %s/ may %s %s/, which has no row" % (where, k, kind, a))
    return graph


def load_graph(root):
    """Fill C_RULES, PY_RULES and PY_AREAS from root's docs/architecture.md."""
    path = os.path.join(root, GRAPH_DOC)
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise GraphError("%s: %s (the declared graph is read from it)" % (GRAPH_DOC, e.strerror))
    graph = parse_graph(text)
    C_RULES.clear()
    C_RULES.update(graph["include"])
    PY_RULES.clear()
    PY_RULES.update(graph["import"])
    PY_AREAS[:] = list(PY_RULES)


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def strip_c(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def c_files(root):
    out = []
    for top in C_ROOTS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            out += [os.path.relpath(os.path.join(d, f), root) for f in sorted(files) if f.endswith((".c", ".h"))]
    return out


def folder_rule(path):
    """The C_RULES key that governs path: the longest folder that holds it."""
    best = None
    for k in C_RULES:
        if path.startswith(k + "/") and (best is None or len(k) > len(best)):
            best = k
    return best


def allowed(src, dst):
    rule = folder_rule(src)
    if rule is None:
        return False, "no rule for %s" % os.path.dirname(src)
    if folder_rule(dst) == rule:
        return True, rule
    for a in C_RULES[rule]:
        if dst == a or dst.startswith(a + "/"):
            # a folder allowed whole does not carry a narrower folder's
            # files when that narrower folder has its own rule
            if a.endswith(".h") or folder_rule(dst) == a or not any(
                    k != a and k.startswith(a + "/") and dst.startswith(k + "/") for k in C_RULES):
                return True, rule
    return False, "%s may include %s" % (rule, ", ".join(C_RULES[rule]) or "nothing outside itself")


DECL = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*;")
EXTERN = re.compile(r"^\s*extern\b[^;(]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*;", re.M)
DEF_FN = re.compile(r"^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*\([^;{}]*?\)\s*\{", re.M)
DEF_VAR = re.compile(r"^(?!static\b)(?!extern\b)(?!typedef\b)(?!struct\s+\w+\s*\{)(?!enum\b)(?!return\b)"
                     r"[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?:=[^;]*)?;", re.M)


def header_names(text):
    """Functions and variables a header declares (not macros, not types)."""
    names = set()
    body = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("#"))
    body = re.sub(r"\{[^{}]*\}", "{}", body)  # struct and enum bodies: their members are no declarations
    body = re.sub(r"\{[^{}]*\}", "{}", body)
    body = re.sub(r"\bstatic\s+inline\b[^{;]*\{\}", "", body)
    for m in DECL.finditer(body):
        if m.group(1) not in ("sizeof", "_Static_assert", "__attribute__", "alignas", "_Alignas"):
            names.add(m.group(1))
    names.update(m.group(1) for m in EXTERN.finditer(body))
    return names


def defined_names(text):
    top = []
    depth = 0
    for ch_line in text.split("\n"):  # keep only lines at file scope
        if depth == 0:
            top.append(ch_line)
        else:
            top.append("")
        depth += ch_line.count("{") - ch_line.count("}")
        if depth < 0:
            depth = 0
    flat = "\n".join(l for l in top if not l.lstrip().startswith("#"))
    names = {m.group(1) for m in DEF_FN.finditer(text)}
    names.update(m.group(1) for m in DEF_VAR.finditer(flat))
    return names


def check_c(root):
    errors = []
    files = c_files(root)
    texts = {f: strip_c(open(os.path.join(root, f), encoding="utf-8", errors="replace").read()) for f in files}
    raw = {f: open(os.path.join(root, f), encoding="utf-8", errors="replace").read() for f in files}
    includes = {}
    for f in files:
        incs = []
        for m in INCLUDE.finditer(raw[f]):
            target = os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))
            if not os.path.isfile(os.path.join(root, target)):
                errors.append("%s: includes \"%s\": no such file" % (f, m.group(1)))
                continue
            incs.append((m.group(1), target))
            ok, why = allowed(f, target)
            if not ok and folder_rule(target) is not None:
                errors.append("%s: includes \"%s\" (%s): %s" % (f, m.group(1), target, why))
            elif not ok:
                errors.append("%s: includes \"%s\" (%s), outside %s" % (f, m.group(1), target, ", ".join(C_ROOTS)))
        includes[f] = incs

    # A .c file depends on another when it uses a function or variable the
    # other defines, declared in a header it includes (directly or through
    # another header). Using is what counts, not including: a header shared
    # by several files that call one another (one *_internal.h for a whole
    # folder) hides their circle, and narrowing the header does not remove
    # it; a file that includes a wide header for one type depends on nothing.
    definers = {}
    defs = {}
    for f in files:
        if f.endswith(".c"):
            defs[f] = defined_names(texts[f])
            for n in defs[f]:
                definers.setdefault(n, set()).add(f)
    declares = {f: header_names(texts[f]) for f in files if f.endswith(".h")}

    def reach(f, seen):
        for _, t in includes.get(f, ()):
            if t not in seen:
                seen.add(t)
                reach(t, seen)
        return seen

    edges = {}
    for f in files:
        if not f.endswith(".c"):
            continue
        # A variable declared `extern` in a .c file is a dependency no include
        # shows: another layer's variable reached that way hides an edge the
        # table may forbid (and one the same layer's header would show).
        for m in EXTERN.finditer(texts[f]):
            for d in sorted(definers.get(m.group(1), ())):
                if d == f:
                    continue
                edges.setdefault(f, set()).add((d, "extern %s" % m.group(1)))
                if folder_rule(d) != folder_rule(f):
                    errors.append("%s: declares extern %s, defined in %s (another layer's variable: "
                                  "pass it, or declare it in a header of %s that the table allows)"
                                  % (f, m.group(1), d, folder_rule(d)))
        used = set(re.findall(r"\b[A-Za-z_]\w*\b", texts[f])) - defs[f]
        for h in sorted(reach(f, set())):
            if h.endswith(".c"):  # a test that includes the source it checks
                edges.setdefault(f, set()).add((h, h))
                continue
            for n in sorted(declares.get(h, set()) & used):
                for d in sorted(definers.get(n, ())):
                    if d != f:
                        edges.setdefault(f, set()).add((d, "%s: %s" % (os.path.basename(h), n)))
    errors += cycles(edges)
    return errors


def cycles(edges):
    """Each strongly connected component of more than one unit, reported
    once, with one circle through it."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w, _ in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    msgs = []
    for comp in sorted(out):
        members = set(comp)
        # the shortest circle from the first member back to itself (BFS)
        start = comp[0]
        prev = {start: None}
        queue = [start]
        found = None
        while queue and found is None:
            nxt = []
            for v in queue:
                for w, via in sorted(edges.get(v, ())):
                    if w not in members:
                        continue
                    if w == start:
                        found = (v, via)
                        break
                    if w not in prev:
                        prev[w] = (v, via)
                        nxt.append(w)
                if found:
                    break
            queue = nxt
        path = []
        v, via = found
        path.append("%s -(%s)-> %s" % (v, via, start))
        while prev[v] is not None:
            p, pvia = prev[v]
            path.append("%s -(%s)-> %s" % (p, pvia, v))
            v = p
        msgs.append("%s: include cycle: %s (rule: no file depends on itself through others; all of: %s)"
                    % (start, ", ".join(reversed(path)), " ".join(comp)))
    return msgs


def py_area(path):
    best = None
    for a in PY_AREAS:
        if (path == a or path.startswith(a + "/")) and (best is None or len(a) > len(best)):
            best = a
    return best


def py_packages(root):
    """The top-level folders that are packages (an __init__.py)."""
    return {a.split("/")[0] for a in PY_AREAS if os.path.isfile(os.path.join(root, a.split("/")[0], "__init__.py"))}


def resolve_module(root, dotted):
    """The file (from root) that the dotted module names, or None: a.b.c is
    a/b/c.py or a/b/c/__init__.py; for a name inside a module (from a.b
    import f), the module's file."""
    parts = dotted.split(".")
    while parts:
        base = os.path.join(*parts)
        for cand in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(os.path.join(root, cand)):
                return cand
        parts = parts[:-1]
    return None


def sys_path_edits(tree):
    """Line numbers of sys.path.insert/append/extend calls and sys.path
    assignments in the parsed file."""
    lines = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value if node.func.attr in ("insert", "append", "extend") else None
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                target = t.value if isinstance(t, ast.Subscript) else t
        if isinstance(target, ast.Attribute) and target.attr == "path" and \
                isinstance(target.value, ast.Name) and target.value.id == "sys":
            lines.append(node.lineno)
    return lines


def check_py(root):
    errors = []
    files = []
    for a in {a.split("/")[0] for a in PY_AREAS}:
        for d, dirs, fs in os.walk(os.path.join(root, a)):
            dirs[:] = sorted(x for x in dirs if x not in ("results", "__pycache__", ".git"))
            files += [os.path.relpath(os.path.join(d, f), root) for f in sorted(fs) if f.endswith(".py")]
    packages = py_packages(root)
    # What each area outside a package offers as a top-level name: its
    # modules and folders, as its own files put their folder on sys.path.
    # A module inside a package is reached by its dotted name only; its bare
    # name is remembered, to name the mistake.
    offers, in_package = {}, {}
    for f in files:
        a = py_area(f)
        d, base = os.path.split(f)
        name = base[:-3]
        if name == "__init__":
            d, name = os.path.split(d)
        if f.split("/")[0] in packages:
            if d:  # experiments/x.py, not the package itself
                in_package.setdefault(name, f[:-3].replace("/", "."))
            continue
        offers.setdefault(name, set()).add(py_area(f if base != "__init__.py" else d + "/" + name))
        offers.setdefault(name, set()).add(a)
    exc = {(f, a) for f, a, _ in PY_EXCEPTIONS}
    for f in sorted(files):
        a = py_area(f)
        try:
            tree = ast.parse(open(os.path.join(root, f), encoding="utf-8").read(), f)
        except SyntaxError as e:
            errors.append("%s: does not parse: %s" % (f, e))
            continue
        if f.split("/")[0] in PY_NO_SYS_PATH:
            for line in sys_path_edits(tree):
                errors.append("%s:%d: edits sys.path (rule: %s import by dotted names, run as python3 -m)"
                              % (f, line, ", ".join(PY_NO_SYS_PATH)))
        bare, dotted = [], []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for al in node.names:
                    (dotted if al.name.split(".")[0] in packages else bare).append((al.name, al.name))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] in packages:
                    dotted += [(node.module + "." + al.name,) * 2 for al in node.names]
                else:
                    bare.append((node.module, node.module))
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                pkg = os.path.dirname(f).split("/")
                pkg = pkg[:len(pkg) - (node.level - 1)]
                mod = ".".join(pkg + ([node.module] if node.module else []))
                dotted += [(mod + "." + al.name,) * 2 for al in node.names]
        for shown, full in sorted(set(dotted)):
            target = resolve_module(root, full)
            t = py_area(target) if target else None
            if t is None or t == a or t in PY_RULES.get(a, []) or (f, t) in exc:
                continue
            errors.append("%s: imports %s (%s): %s may import %s" % (
                f, shown, t, a, ", ".join(PY_RULES.get(a, [])) or "nothing outside itself"))
        for n in sorted({m.split(".")[0] for m, _ in bare}):
            # a name offered by the file's own folder (outside a package) is its own
            own = os.path.isfile(os.path.join(root, os.path.dirname(f), n + ".py"))
            if n in in_package and n not in getattr(sys, "stdlib_module_names", ()) and \
                    not (own and f.split("/")[0] not in packages):
                errors.append("%s: imports %s by its bare name: it is %s (a package module: import it by "
                              "that name, with no sys.path edit)" % (f, n, in_package[n]))
                continue
            where = offers.get(n)
            if not where or a in where or os.path.dirname(f) in where or own:
                continue
            for t in sorted(where):
                if t in PY_RULES.get(a, []) or (f, t) in exc:
                    break
            else:
                errors.append("%s: imports %s (%s): %s may import %s" % (
                    f, n, " or ".join(sorted(where)), a, ", ".join(PY_RULES.get(a, [])) or "nothing outside itself"))
    return errors


def main(argv):
    args = argv[1:]
    show = args[:1] == ["--print"]
    if show:
        args = args[1:]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        load_graph(root)
    except GraphError as e:
        print("layering: " + str(e))
        print("layering: FAIL: the declared graph could not be read", file=sys.stderr)
        return 1
    if show:
        for k, v in C_RULES.items():
            print("%-12s -> %s" % (k, ", ".join(v) or "(nothing)"))
        for k, v in PY_RULES.items():
            print("%-17s imports %s" % (k, ", ".join(v) or "(nothing)"))
    errors = check_c(root) + check_py(root)
    for e in errors:
        print("layering: " + e)
    if errors:
        print("layering: FAIL: %d violation(s); the rules are in %s" % (len(errors), GRAPH_DOC), file=sys.stderr)
        return 1
    print("layering: OK (includes in %s as declared, no cycle; imports between %s as declared in %s)"
          % (", ".join(C_ROOTS), ", ".join(sorted({a.split("/")[0] for a in PY_AREAS})), GRAPH_DOC))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
