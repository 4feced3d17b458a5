"""What a report page carries with it: figures as inline SVG, video posters and files as
``data:`` URIs, and videos copied beside the page so that its folder can travel whole.

>>> data_uri(b"hi", "text/plain")
'data:text/plain;base64,aGk='
"""

from __future__ import annotations

import base64
import filecmp
import io
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

MIME = {".mp4": "video/mp4", ".webm": "video/webm", ".gif": "image/gif", ".png": "image/png"}
POSTER_WIDTH = 160
"""Pixels across a video's poster (larger frames are subsampled to about this width)."""


def data_uri(data: bytes, mime: str) -> str:
    """``data`` as a ``data:`` URI of type ``mime``."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def file_uri(path: str | Path) -> str:
    """A file's bytes as a ``data:`` URI, its type from its suffix."""
    path = Path(path)
    return data_uri(path.read_bytes(), MIME.get(path.suffix.lower(), "application/octet-stream"))


def figure_svg(fig: Any) -> str:
    """A matplotlib figure as an ``<svg>`` element to place in an HTML page (the figure is
    closed): its text as text (readable and searchable in the page), without the XML
    prologue, the metadata block and the namespace declarations, which an HTML page does
    not need."""
    import matplotlib.pyplot as plt

    out = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none"}):
        fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = out.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text, count=3)


def video_poster(path: str | Path, width: int = POSTER_WIDTH) -> bytes | None:
    """A PNG of the middle frame of the video at ``path``, about ``width`` pixels across;
    None when the file is missing or cannot be decoded."""
    import imageio.v3 as iio

    try:
        frames = [np.asarray(f) for f in iio.imiter(str(path))]
    except (OSError, ValueError, RuntimeError):
        return None
    if not frames:
        return None
    frame = frames[len(frames) // 2]
    step = max(1, int(np.ceil(frame.shape[1] / width)))
    return iio.imwrite("<bytes>", frame[::step, ::step], extension=".png")


def carry(path: str | Path, folder: Path, name: str) -> Path:
    """``path`` as a file inside ``folder``: itself when it is there already, else a copy
    named ``name`` in ``folder`` (written again when its bytes differ)."""
    source, folder = Path(path).resolve(), folder.resolve()
    if folder in source.parents:
        return source
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or not filecmp.cmp(source, target, shallow=False):
        shutil.copyfile(source, target)
    return target
