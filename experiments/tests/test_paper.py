"""The paper's length limits (experiments/paper.py): the abstract that the
records fill has at most ABSTRACT_MAX words, and the checks that make
`make paper` fail on a longer abstract or a PDF over PAGES_MAX pages count
what they say. Pure Python; well under a second."""
import os

import pytest

from experiments import paper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_abstract_filled_from_the_records_is_short_enough():
    if not os.path.exists(os.path.join(paper.FULL, "numbers.json")):
        pytest.skip("no full run recorded")
    out = paper.fill(open(os.path.join(ROOT, "paper", "paper.md")).read(), paper.FULL,
                     os.path.join(ROOT, "paper"), [])
    n = paper.abstract_words(out)
    assert 50 < n <= paper.ABSTRACT_MAX, n


def test_abstract_words_counts_the_abstract_only():
    md = "# T\n\n## Abstract\n\none two three\nfour\n\n## 1. Next\n\nfive six\n"
    assert paper.abstract_words(md) == 4
    assert paper.abstract_words("# no abstract\n") == 0


def test_pdf_pages_counts_page_objects(tmp_path):
    p = tmp_path / "x.pdf"
    p.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Pages /Count 2 >> endobj\n"
                  b"2 0 obj << /Type /Page /Parent 1 0 R >> endobj\n3 0 obj <</Type/Page/Parent 1 0 R>> endobj\n")
    assert paper.pdf_pages(str(p)) == 2
