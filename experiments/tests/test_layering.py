"""scripts/layering.py (`make layering`) fails on what the graph in
docs/architecture.md forbids, and reads that graph from the document.

Each test copies the folders it checks and docs/architecture.md into a
scratch tree, breaks one rule there (or changes a row of the graph), and
runs the script on that tree: it must exit non-zero with one line naming
the file, what it includes or imports, and the rule.
"""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "layering.py")


def run(root):
    r = subprocess.run([sys.executable, SCRIPT, str(root)], capture_output=True, text=True)
    return r.returncode, r.stdout


@pytest.fixture
def tree(tmp_path):
    for d in ("core", "handoffs", "lib"):
        shutil.copytree(os.path.join(ROOT, d), tmp_path / d,
                        ignore=shutil.ignore_patterns("*.md", "*.o", "*.d"))
    (tmp_path / "docs").mkdir()
    shutil.copy(os.path.join(ROOT, "docs", "architecture.md"), tmp_path / "docs")
    return tmp_path


def edit_graph(tree, old, new):
    doc = tree / "docs" / "architecture.md"
    text = doc.read_text()
    assert text.count(old) == 1, old
    doc.write_text(text.replace(old, new))


def add_line(path, line):
    text = path.read_text()
    path.write_text(text + "\n" + line + "\n")


def test_the_checkout_passes():
    rc, out = run(ROOT)
    assert rc == 0, out
    assert out.startswith("layering: OK"), out


def test_the_copy_passes(tree):
    rc, out = run(tree)
    assert rc == 0, out


def test_http_including_conn_fails(tree):
    add_line(tree / "core/http/http_chars.c", '#include "../conn/conn.h"')
    rc, out = run(tree)
    assert rc == 1, out
    lines = [l for l in out.splitlines() if "http_chars.c" in l]
    assert len(lines) == 1, out
    assert 'core/http/http_chars.c: includes "../conn/conn.h"' in lines[0]
    assert "core/http may include lib" in lines[0]


def test_handoffs_including_core_fails(tree):
    add_line(tree / "handoffs/handoff.c", '#include "../core/python/job.h"')
    rc, out = run(tree)
    assert rc == 1, out
    assert "handoffs/handoff.c: includes" in out and "handoffs may include lib" in out


def test_conn_including_more_of_python_than_job_h_fails(tree):
    add_line(tree / "core/conn/conn.c", '#include "../python/pool.h"')
    rc, out = run(tree)
    assert rc == 1, out
    assert "core/conn/conn.c: includes \"../python/pool.h\"" in out


def test_the_graph_is_read_from_the_document(tree):
    # Take lib/ from core/http/'s row: the tree, unchanged, now breaks it.
    edit_graph(tree, "| `core/http/` | `lib/` |", "| `core/http/` | nothing |")
    rc, out = run(tree)
    assert rc == 1, out
    assert 'core/http/buffer.c: includes "../../lib/aligned.h"' in out
    assert "core/http may include nothing outside itself" in out


def test_a_row_added_to_the_document_is_allowed(tree):
    # The include the first test forbids passes once the document allows it.
    add_line(tree / "core/http/http_chars.c", '#include "../conn/conn.h"')
    edit_graph(tree, "| `core/http/` | `lib/` |", "| `core/http/` | `lib/`, `core/conn/conn.h` |")
    rc, out = run(tree)
    assert "http_chars.c: includes" not in out, out


def test_a_document_without_the_graph_fails(tree):
    (tree / "docs" / "architecture.md").write_text("# Architecture\n\nNo tables.\n")
    rc, out = run(tree)
    assert rc == 1, out
    assert out.strip() == "layering: docs/architecture.md: no '| folder | may include | why |' table", out
    (tree / "docs" / "architecture.md").unlink()
    rc, out = run(tree)
    assert rc == 1 and "docs/architecture.md" in out, out


def test_an_unreadable_row_fails(tree):
    edit_graph(tree, "| `core/base/` | `lib/`, `handoffs/` |", "| `core/base/` | lib and handoffs |")
    rc, out = run(tree)
    assert rc == 1, out
    assert "docs/architecture.md:" in out and "cannot read the row" in out and "core/base/" in out, out


def test_a_rule_naming_a_folder_without_a_row_fails(tree):
    edit_graph(tree, "| `core/base/` | `lib/`, `handoffs/` |", "| `core/base/` | `lib/`, `core/servces/` |")
    rc, out = run(tree)
    assert rc == 1, out
    assert "core/base/ may include core/servces/, which has no row" in out, out


def test_the_loop_including_a_service_fails(tree):
    # The services ride on the loop's hooks; the loop never names one.
    add_line(tree / "core/conn/loop.c", '#include "../services/watchdog.h"')
    rc, out = run(tree)
    assert rc == 1, out
    assert 'core/conn/loop.c: includes "../services/watchdog.h"' in out


def test_an_extern_of_another_layers_variable_fails(tree):
    # The bridge reaching the server's variable by an extern of its own:
    # no include shows the edge, the check must.
    add_line(tree / "core/server/options.c", "int server_knob;")
    add_line(tree / "core/python/job.c", "extern int server_knob;")
    rc, out = run(tree)
    assert rc == 1, out
    lines = [l for l in out.splitlines() if "job.c" in l and "extern" in l]
    assert lines and "core/python/job.c: declares extern server_knob, defined in core/server/options.c" in lines[0], out


def test_an_extern_of_the_same_layers_variable_passes(tree):
    add_line(tree / "core/http/http_chars.c", "int http_knob;")
    add_line(tree / "core/http/buffer.c", "extern int http_knob;")
    rc, out = run(tree)
    assert rc == 0, out


def test_a_cycle_fails(tree):
    # Two files of one folder that call each other: allowed includes, but
    # each depends on the other.
    (tree / "core/http/ping.h").write_text("int ping(int n);\n")
    (tree / "core/http/pong.h").write_text("int pong(int n);\n")
    (tree / "core/http/ping.c").write_text(
        '#include "ping.h"\n#include "pong.h"\nint ping(int n)\n{\n    return n ? pong(n - 1) : 0;\n}\n')
    (tree / "core/http/pong.c").write_text(
        '#include "ping.h"\n#include "pong.h"\nint pong(int n)\n{\n    return n ? ping(n - 1) : 1;\n}\n')
    rc, out = run(tree)
    assert rc == 1, out
    cyc = [l for l in out.splitlines() if "include cycle" in l]
    assert len(cyc) == 1, out
    assert "core/http/ping.c" in cyc[0] and "core/http/pong.c" in cyc[0]


def test_a_python_import_against_the_table_fails(tree):
    (tree / "scripts").mkdir()
    (tree / "tests").mkdir()
    (tree / "tests/helper_mod.py").write_text("X = 1\n")
    (tree / "scripts/tool.py").write_text("import helper_mod\n")
    rc, out = run(tree)
    assert rc == 1, out
    assert "scripts/tool.py: imports helper_mod (tests): scripts may import nothing outside itself" in out


@pytest.fixture
def pytree(tree):
    # The Python areas as they are: experiments/ a package, scripts/ commands.
    for d in ("experiments", "scripts", "paper"):
        shutil.copytree(os.path.join(ROOT, d), tree / d,
                        ignore=shutil.ignore_patterns("results", "__pycache__", "*.md", "*.pdf", "micro", "wrk"))
    return tree


def test_the_python_copy_passes(pytree):
    rc, out = run(pytree)
    assert rc == 0, out


def test_the_library_importing_an_entry_point_fails(pytree):
    add_line(pytree / "experiments/lib/stats.py", "from experiments import bench")
    rc, out = run(pytree)
    assert rc == 1, out
    assert ("experiments/lib/stats.py: imports experiments.bench (experiments): "
            "experiments/lib may import nothing outside itself") in out


def test_a_relative_import_upwards_fails(pytree):
    add_line(pytree / "experiments/lib/stats.py", "from .. import report")
    rc, out = run(pytree)
    assert rc == 1, out
    assert "experiments/lib/stats.py: imports experiments.report (experiments)" in out


def test_a_bare_import_of_a_package_module_fails(pytree):
    add_line(pytree / "experiments/run.py", "import threadcpu")
    rc, out = run(pytree)
    assert rc == 1, out
    assert "experiments/run.py: imports threadcpu by its bare name: it is experiments.lib.threadcpu" in out


def test_a_sys_path_edit_fails(pytree):
    add_line(pytree / "scripts/layering.py", "sys.path.insert(0, 'experiments')")
    rc, out = run(pytree)
    assert rc == 1, out
    assert "scripts/layering.py:" in out and "edits sys.path" in out


def test_paper_importing_the_harness_fails(pytree):
    (pytree / "paper/tool.py").write_text("from experiments.lib import generated\n")
    rc, out = run(pytree)
    assert rc == 1, out
    assert "paper/tool.py: imports experiments.lib.generated (experiments/lib): paper may import nothing" in out
