"""The support matrix of docs/evaluate.md is what `workbench benchmarks --markdown` prints
(tests/test_docs.py runs every code block of the README and docs/)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_support_matrix_is_what_workbench_benchmarks_prints():
    from workbench.service.routes import routes_markdown

    text = (ROOT / "docs" / "evaluate.md").read_text()
    begin, end = "<!-- support-matrix: begin -->\n", "\n<!-- support-matrix: end -->"
    shown = text[text.index(begin) + len(begin):text.index(end)]
    assert shown == routes_markdown(), "regenerate with: workbench benchmarks --markdown"
