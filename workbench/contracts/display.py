"""How the workbench's objects show themselves in a notebook: small HTML tables for
their ``_repr_html_`` (escaped, no scripts, no styles beyond a class).

>>> key_value_table([("episodes", 3), ("policy", "<expert>")])
"<table class='wb-kv'><tr><th>episodes</th><td>3</td></tr><tr><th>policy</th><td>&lt;expert&gt;</td></tr></table>"
"""

from __future__ import annotations

import html
from typing import Any, Iterable

import pandas as pd


def text(value: Any) -> str:
    """A value as escaped text (floats to 4 significant digits, None as a dash)."""
    if value is None:
        return "&mdash;"
    if isinstance(value, float):
        return html.escape(f"{value:.4g}")
    return html.escape(str(value))


def key_value_table(rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of (name, value) rows, both escaped."""
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{text(v)}</td></tr>" for k, v in rows)
    return f"<table class='wb-kv'>{body}</table>"


def frame_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as an HTML table without its index, floats rounded to ``digits``."""
    return frame.to_html(index=False, float_format=lambda x: f"{x:.{digits}g}", na_rep="",
                         border=0, classes="wb-table")


def heading(title: str, detail: str = "") -> str:
    """A one-line bold title and an escaped detail after it."""
    return f"<p><b>{html.escape(title)}</b> {html.escape(detail)}</p>"
