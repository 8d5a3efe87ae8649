"""README.md's folder table is the tree's: a row for every top-level folder
git tracks, and no row for one that is not there; and every file README.md
links to exists. No server runs."""
import os
import re
import subprocess

import pytest

from conftest import ROOT

README = os.path.join(ROOT, "README.md")


def tracked_folders():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True,
                             timeout=30).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (an unpacked sdist): no list of tracked folders")
    return {p.split("/")[0] for p in out.split("\0") if "/" in p}


def table_folders(text):
    """The folders the rows of the table under '## The repository' name."""
    section = text.split("\n## The repository\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([^`/]+)/` \|", section, re.M)]


def test_the_folder_table_has_a_row_for_each_folder_of_the_tree():
    rows = table_folders(open(README).read())
    assert len(rows) == len(set(rows)), f"a folder with two rows: {rows}"
    tree = tracked_folders()
    assert not tree - set(rows), f"folders of the tree without a row in README.md: {sorted(tree - set(rows))}"
    assert not set(rows) - tree, f"rows in README.md for folders the tree lacks: {sorted(set(rows) - tree)}"


def test_the_files_readme_links_exist():
    text = open(README).read()
    links = {m.group(1).split("#")[0] for m in re.finditer(r"\]\(([^)\s]+)\)", text)}
    local = sorted(l for l in links if l and not re.match(r"[a-z]+:", l))
    assert local
    missing = [l for l in local if not os.path.exists(os.path.join(ROOT, l))]
    assert not missing, f"README.md links to files that do not exist: {missing}"
