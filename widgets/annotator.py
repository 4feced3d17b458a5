"""A panel for human annotators: two rollout videos side by side, buttons A / B / invalid.

The annotator sees the task instruction and the two videos of a pair, never the
policies or rollout ids; which rollout is A is their own seeded coin. Every answer is
appended durably to their file by :class:`workbench.ranking.annotation.AnnotationLog`
(which creates the file's folder and decides what comes next), so reopening the panel
on the same file resumes at the first unanswered pair. Only pairs whose two rollouts
both have a video are offered, unless ``text_only`` asks for every pair (a rollout
without a video is then a line of text). An answer that cannot be written stops the
panel: it says where and why, and offers nothing to click until the cell is run again.
"""

from __future__ import annotations

import os
from html import escape
from typing import Any

import pandas as pd

from workbench.ranking.annotation import AnnotationLog, load_video, pairs_with_videos

NO_VIDEO = "(no video recorded for this rollout: answer 'invalid' if you cannot judge the pair)"


def annotator_panel(pairs: pd.DataFrame, path: str | os.PathLike, annotator: str,
                    seed: int = 0, video_width: int = 320, text_only: bool = False) -> Any:
    """The panel (an ``ipywidgets.VBox``) for ``annotator`` over ``pairs`` (as
    :attr:`AnnotationSample.pairs`), answers appended to ``path`` (JSONL); its
    ``annotation_log`` attribute is the :class:`AnnotationLog` (None when the file
    cannot be opened).

    Children: progress label, instruction, the two videos (HBox of A and B), the buttons
    (A, B, invalid), a status line, a note on the pairs not offered.
    """
    import ipywidgets as w

    progress, instruction, status, note = w.Label(), w.HTML(), w.HTML(), w.HTML()
    slots = {side: w.VBox() for side in "AB"}
    buttons = [w.Button(description=c, button_style=s) for c, s in
               (("A", "info"), ("B", "info"), ("invalid", "warning"))]
    panel = w.VBox([progress, instruction, w.HBox(list(slots.values())), w.HBox(buttons),
                    status, note])
    offered = None if text_only else pairs_with_videos(pairs)
    if offered is not None and len(offered) < len(pairs):
        note.value = (f"{len(pairs) - len(offered)} of {len(pairs)} pairs lack a video and are "
                      "not offered (<code>text_only=True</code> offers them as text).")
    try:
        log = AnnotationLog(path, annotator, pairs, seed, offered=offered)
    except OSError as exc:
        _stop(buttons, status, path, exc)
        panel.annotation_log = None
        return panel

    def media(video: Any) -> Any:
        loaded = load_video(video)
        if loaded is None:
            return w.HTML(value=escape(NO_VIDEO, quote=False))
        return w.Video(value=loaded[0], format=loaded[1], width=video_width, autoplay=True,
                       loop=True)

    def show() -> None:
        done, total = log.progress()
        progress.value = f"{done} / {total} answered"
        shown = log.next_pair()
        for button in buttons:
            button.disabled = shown is None
        if shown is None:
            instruction.value = ("<b>All pairs answered.</b> Thank you." if total else
                                 "<b>No pair to annotate</b>: none has a video of both rollouts.")
            for slot in slots.values():
                slot.children = ()
            return
        instruction.value = f"<b>Task:</b> {escape(str(shown['instruction']))}"
        for side in "AB":
            slots[side].children = (w.HTML(f"<b>{side}</b>"),
                                    media(shown[f"video_shown_{side.lower()}"]))

    def answer(button: Any) -> None:
        shown = log.next_pair()
        if shown is None:
            return
        try:
            log.record(int(shown["pair_id"]), button.description)
        except OSError as exc:  # the disk, not the answer: stop until it is fixed
            _stop(buttons, status, path, exc, saved=len(log.answers))
            return
        status.value = escape(f"saved: {button.description}")
        show()

    for button in buttons:
        button.on_click(answer)
    show()
    panel.annotation_log = log
    return panel


def _stop(buttons: list, status: Any, path: str | os.PathLike, exc: OSError,
          saved: int | None = None) -> None:
    """Disable every button and say why nothing can be saved."""
    for button in buttons:
        button.disabled = True
    kept = "" if saved is None else f" The answers saved before this one ({saved}) are kept."
    status.value = (f"<b style='color:#b00'>Not saved: cannot use {escape(str(path))}: "
                    f"{escape(exc.strerror or str(exc))}.</b> Nothing was recorded for this "
                    f"pair.{kept} Fix that and run this cell again.")
