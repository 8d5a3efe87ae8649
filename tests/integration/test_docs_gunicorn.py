"""docs/gunicorn.md maps gunicorn's options to cserve's: every cserve option
its table names is one `cserve --help` lists, and every default it states
beside one is the default --check-config prints."""
import re
import subprocess

from conftest import BIN, ROOT

DOC = ROOT / "docs" / "gunicorn.md"


def rows():
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("gunicorn", "---"):
            yield cells


def test_every_cserve_option_named_exists():
    helptext = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30).stdout
    named = set()
    for _, cserve, _ in rows():
        named |= set(re.findall(r"`(--[a-z][a-z-]*)", cserve))
    assert len(named) > 20, named
    missing = sorted(o for o in named if not re.search(rf"(^|\s){re.escape(o)}\b", helptext, re.M))
    assert not missing, f"docs/gunicorn.md names options --help does not list: {missing}"


def test_the_timeout_default_stated_is_the_servers():
    row = next(r for r in rows() if r[1].startswith("`--app-timeout"))
    stated = re.search(r"\((\d+)\)", row[1]).group(1)
    out = subprocess.run([BIN, "--check-config", "--chdir", str(ROOT / "tests/integration/apps"),
                          "wsgi_apps:application"], capture_output=True, text=True, timeout=30)
    line = next(ln for ln in (out.stdout + out.stderr).splitlines() if re.match(r"\s*app-timeout\b", ln))
    assert re.search(rf"\b{stated}(\.0+)? ?s?\b", line), (stated, line)
