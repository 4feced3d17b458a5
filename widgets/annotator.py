"""A panel for human annotators: two rollout videos side by side, buttons A / B / invalid.

The annotator sees the task instruction and the two videos of a pair, never the
policies or rollout ids; which rollout is A is their own seeded coin. Every answer is
appended durably to their file by :class:`workbench.ranking.annotation.AnnotationLog`,
which also decides what comes next, so reopening the panel on the same file resumes at
the first unanswered pair. A rollout without a video is shown as a line of text.
"""

from __future__ import annotations

import os
from html import escape
from typing import Any

import pandas as pd

from workbench.ranking.annotation import AnnotationLog, load_video

NO_VIDEO = "(no video recorded for this rollout: answer 'invalid' if you cannot judge the pair)"


def annotator_panel(pairs: pd.DataFrame, path: str | os.PathLike, annotator: str,
                    seed: int = 0, video_width: int = 320) -> Any:
    """The panel (an ``ipywidgets.VBox``) for ``annotator`` over ``pairs`` (as
    :attr:`AnnotationSample.pairs`), answers appended to ``path`` (JSONL); its
    ``annotation_log`` attribute is the :class:`AnnotationLog`.

    Children: progress label, instruction, the two videos (HBox of A and B), the buttons
    (A, B, invalid), a status line.
    """
    import ipywidgets as w

    log = AnnotationLog(path, annotator, pairs, seed)
    progress, instruction, status = w.Label(), w.HTML(), w.Label()
    slots = {side: w.VBox() for side in "AB"}
    buttons = [w.Button(description=c, button_style=s) for c, s in
               (("A", "info"), ("B", "info"), ("invalid", "warning"))]

    def media(video: Any) -> Any:
        loaded = load_video(video)
        if loaded is None:
            return w.Label(value=NO_VIDEO)
        return w.Video(value=loaded[0], format=loaded[1], width=video_width, autoplay=True,
                       loop=True)

    def show() -> None:
        done, total = log.progress()
        progress.value = f"{done} / {total} answered"
        shown = log.next_pair()
        for button in buttons:
            button.disabled = shown is None
        if shown is None:
            instruction.value = "<b>All pairs answered.</b> Thank you."
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
            status.value = f"saved: {button.description}"
        except Exception as exc:  # shown in the panel; the file keeps what was saved
            status.value = f"not saved: {exc}"
        show()

    for button in buttons:
        button.on_click(answer)
    show()
    panel = w.VBox([progress, instruction, w.HBox(list(slots.values())), w.HBox(buttons), status])
    panel.annotation_log = log
    return panel
