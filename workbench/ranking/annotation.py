"""Pairs for human annotation: R2S-Eval's 200 task-stratified pairs.

The paper's human study asks annotators about 200 rollout pairs of one task and initial
state: 66 where both rollouts succeeded, 67 where both failed and 67 where one did.
:func:`sample_annotation_pairs` draws such a set from a rollout table (columns
``policy``, ``task``, ``init_id``, ``rollout_id``, ``success``; ``video`` or
``video_path`` for the annotator): within each outcome class, tasks are dealt round
robin (shuffled), so every task gives as many pairs as the data allows, and each pair's
A/B order is a coin flip. A class with too few candidate pairs gives all it has; the
shortfall is reported, never filled from another class.

Each annotator then answers the pairs in an :class:`AnnotationLog`: a JSONL file of
their own, one answer a line (``annotator``, ``pair_id``, ``shown_a``, ``shown_b``,
``choice`` "A", "B" or "invalid", ``timestamp``), appended and fsynced per answer, so
a crash loses at most the answer being written (a line it cut short is reported by line
number, to be deleted by hand) and reopening the file resumes at the first unanswered
pair. Which rollout is shown as A is a coin per pair seeded by the
annotator's name and ``seed`` (:func:`presentation_order`), and is recorded in
``shown_a``/``shown_b``, so every answer maps back to its rollouts. What an annotator
sees never names a policy. :func:`read_answers` reads such a file (or a CSV with the
same columns) and names the file and line of a malformed row. The videos they watch
are rendered by :func:`workbench.studies.annotation_videos.render_pair_videos` (the
part that needs a simulator).

>>> from workbench.ranking.sampling import demo_rollout_table
>>> table = demo_rollout_table(["p", "q", "r"], tasks=["t1", "t2"], inits=4, repeats=1)
>>> table["success"] = table["policy"] != "r"  # only r fails: no pair fails twice
>>> sample = sample_annotation_pairs(table, n_pairs=12, seed=0)
>>> sample.wanted, sample.shortfall
({'success-success': 4, 'failure-failure': 4, 'success-failure': 4}, {'success-success': 0, 'failure-failure': 4, 'success-failure': 0})
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from workbench.ranking.sampling import candidate_pairs, present

PAPER_SPLIT = (("success-success", 66), ("failure-failure", 67), ("success-failure", 67))
"""The paper's outcome classes and their counts among 200 pairs."""


@dataclass(frozen=True)
class AnnotationSample:
    """The sampled pairs and how they meet the split.

    pairs: one row per pair: pair_id, task, init_id, outcome, policy_a, policy_b,
    rollout_a, rollout_b, video_a, video_b (policies are for the analysis, never shown);
    wanted: pairs asked per class; shortfall: pairs missing per class (0: met).
    """

    pairs: pd.DataFrame
    wanted: dict[str, int]
    shortfall: dict[str, int]


def split_counts(n_pairs: int, split: Sequence[tuple[str, int]] = PAPER_SPLIT
                 ) -> dict[str, int]:
    """The split scaled to ``n_pairs`` (largest remainders; 66/67/67 at 200).

    >>> split_counts(200), split_counts(12)
    ({'success-success': 66, 'failure-failure': 67, 'success-failure': 67}, {'success-success': 4, 'failure-failure': 4, 'success-failure': 4})
    """
    total = sum(n for _, n in split)
    exact = [n * n_pairs / total for _, n in split]
    counts = [int(x) for x in exact]
    for k in sorted(range(len(split)), key=lambda k: (counts[k] - exact[k], -k))[
            :n_pairs - sum(counts)]:
        counts[k] += 1
    return {name: c for (name, _), c in zip(split, counts)}


def outcome_class(success_a: bool, success_b: bool) -> str:
    """``success-success``, ``failure-failure`` or ``success-failure`` (either order)."""
    if success_a and success_b:
        return "success-success"
    return "success-failure" if success_a or success_b else "failure-failure"


def sample_annotation_pairs(rollouts: pd.DataFrame, n_pairs: int = 200,
                            split: Sequence[tuple[str, int]] = PAPER_SPLIT,
                            seed: int = 0) -> AnnotationSample:
    """Draw ``n_pairs`` distinct rollout pairs (two policies, one task and initial
    state), task-stratified within each outcome class of ``split`` (scaled to
    ``n_pairs``), A/B order randomised; see the module docstring."""
    if "success" not in rollouts.columns:
        raise ValueError("the rollout table needs a success column to split pairs by outcome")
    rng = np.random.default_rng(seed)
    candidates = candidate_pairs(rollouts)
    success = rollouts.set_index("rollout_id")["success"].astype(bool)
    candidates["outcome"] = [outcome_class(success[i], success[j]) for i, j in
                             zip(candidates["rollout_i"], candidates["rollout_j"])]
    wanted = split_counts(n_pairs, split)
    chosen: list[int] = []
    shortfall = {}
    for name, want in wanted.items():
        picked = _round_robin(candidates[candidates["outcome"] == name], want, rng)
        chosen += picked
        shortfall[name] = want - len(picked)
    pairs = candidates.loc[chosen].reset_index(drop=True)
    pairs = present(pairs.assign(a_is_i=rng.random(len(pairs)) < 0.5))
    video = _videos(rollouts)
    out = pairs.assign(pair_id=range(len(pairs)))[
        ["pair_id", "task", "init_id", "outcome", "policy_a", "policy_b", "rollout_a",
         "rollout_b"]]
    out["video_a"] = out["rollout_a"].map(video)
    out["video_b"] = out["rollout_b"].map(video)
    return AnnotationSample(out, wanted, shortfall)


def _round_robin(pool: pd.DataFrame, want: int, rng: np.random.Generator) -> list[int]:
    """Up to ``want`` rows of ``pool``, one task at a time in a shuffled order, each
    task's rows in a shuffled order."""
    queues = [list(rng.permutation(np.asarray(rows)))
              for _, rows in sorted(pool.groupby("task").groups.items())]
    queues = [queues[k] for k in rng.permutation(len(queues))]
    picked: list[int] = []
    while len(picked) < want and any(queues):
        for queue in queues:
            if queue and len(picked) < want:
                picked.append(int(queue.pop()))
    return picked


def _videos(rollouts: pd.DataFrame) -> pd.Series:
    column = "video" if "video" in rollouts.columns else (
        "video_path" if "video_path" in rollouts.columns else None)
    if column is None:
        return pd.Series(dtype=object)
    return rollouts.set_index("rollout_id")[column]


ANSWER_COLUMNS = ("annotator", "pair_id", "shown_a", "shown_b", "choice", "timestamp")
"""The fields of one recorded answer (one JSONL line, or one CSV row)."""
CHOICES = ("A", "B", "invalid")
"""An annotator's possible answers: video A, video B, or neither is judgeable."""
SHOWN_COLUMNS = ("pair_id", "task", "instruction", "shown_a", "shown_b", "video_shown_a",
                 "video_shown_b")


def annotator_seed(annotator: str, seed: int = 0) -> int:
    """A stable integer seed from an annotator's name and ``seed``.

    >>> annotator_seed("ana", 0) == annotator_seed("ana", 0) != annotator_seed("ben", 0)
    True
    """
    return int.from_bytes(hashlib.sha256(f"{seed}|{annotator}".encode()).digest()[:8], "big")


def presentation_order(pairs: pd.DataFrame, annotator: str, seed: int = 0) -> pd.DataFrame:
    """What ``annotator`` is shown, pair by pair, with A/B re-drawn by a coin of their own.

    pairs: as :attr:`AnnotationSample.pairs`. Returns one row per pair, in pair order:
    pair_id, task, instruction (the ``instruction`` column when present, else the task),
    shown_a, shown_b (rollout ids), video_shown_a, video_shown_b. No policy column.

    >>> pairs = pd.DataFrame({"pair_id": [0, 1], "task": "t", "rollout_a": ["x", "y"],
    ...                       "rollout_b": ["u", "v"], "policy_a": "p", "policy_b": "q"})
    >>> shown = presentation_order(pairs, "ana", seed=0)
    >>> sorted(shown.columns) == sorted(SHOWN_COLUMNS)
    True
    """
    swap = np.random.default_rng(annotator_seed(annotator, seed)).random(len(pairs)) < 0.5
    videos = {side: pairs[f"video_{side}"] if f"video_{side}" in pairs else
              pd.Series([None] * len(pairs), index=pairs.index) for side in "ab"}
    shown = pd.DataFrame({
        "pair_id": pairs["pair_id"].astype(int).to_numpy(), "task": pairs["task"].to_numpy(),
        "instruction": (pairs["instruction"] if "instruction" in pairs else pairs["task"]).to_numpy(),
        "shown_a": np.where(swap, pairs["rollout_b"], pairs["rollout_a"]),
        "shown_b": np.where(swap, pairs["rollout_a"], pairs["rollout_b"]),
        "video_shown_a": np.where(swap, videos["b"], videos["a"]),
        "video_shown_b": np.where(swap, videos["a"], videos["b"])})
    return shown


def _bad(path: str | os.PathLike, line: int, problem: str, raw: Any) -> ValueError:
    return ValueError(f"{path}: line {line}: {problem}; got {raw!r}")


def check_answer(raw: Mapping[str, Any], path: str | os.PathLike = "<answers>",
                 line: int = 0) -> dict[str, Any]:
    """One answer, checked and normalised (pair_id int, choice "A"/"B"/"invalid").

    Raises ValueError naming ``path`` and ``line`` on a missing field, an empty
    annotator, a non-integer pair_id, equal or empty rollout ids or an unknown choice.

    >>> check_answer({"annotator": "ana", "pair_id": "3", "shown_a": "x", "shown_b": "y",
    ...               "choice": "b", "timestamp": "t"})["choice"]
    'B'
    """
    if not isinstance(raw, Mapping):
        raise _bad(path, line, "an answer is an object with fields " + ", ".join(ANSWER_COLUMNS), raw)
    missing = [c for c in ANSWER_COLUMNS if c not in raw]
    if missing:
        raise _bad(path, line, f"missing fields {missing}", dict(raw))
    row = {c: raw[c] for c in ANSWER_COLUMNS}
    for key in ("annotator", "shown_a", "shown_b"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise _bad(path, line, f"{key}: expected a non-empty string", row[key])
    if row["shown_a"] == row["shown_b"]:
        raise _bad(path, line, "shown_a and shown_b are the same rollout", row["shown_a"])
    try:
        row["pair_id"] = int(str(row["pair_id"]).strip())
    except ValueError:
        raise _bad(path, line, "pair_id: expected an integer", row["pair_id"]) from None
    choice = str(row["choice"]).strip()
    row["choice"] = choice.upper() if choice.upper() in ("A", "B") else choice.lower()
    if row["choice"] not in CHOICES:
        raise _bad(path, line, f"choice: expected one of {list(CHOICES)}", raw["choice"])
    row["timestamp"] = str(row["timestamp"])
    return row


def read_answers(path: str | os.PathLike) -> pd.DataFrame:
    """Answers from one file: JSONL (one object a line) or ``.csv``; columns
    :data:`ANSWER_COLUMNS` plus ``source`` (the path). Malformed rows raise ValueError
    with the file and line; so does an annotator answering a pair twice."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        with open(path, newline="") as f:
            rows = [check_answer(r, path, k) for k, r in enumerate(csv.DictReader(f), start=2)]
    else:
        rows = []
        for k, text in enumerate(path.read_text().splitlines(), start=1):
            if text.strip():
                try:
                    raw = json.loads(text)
                except json.JSONDecodeError as err:
                    raise _bad(path, k, f"not JSON ({err.msg})", text) from None
                rows.append(check_answer(raw, path, k))
    table = pd.DataFrame(rows, columns=list(ANSWER_COLUMNS)).assign(source=str(path))
    twice = table.duplicated(["annotator", "pair_id"], keep=False)
    if twice.any():
        first = table[twice].iloc[0]
        raise ValueError(f"{path}: annotator {first['annotator']!r} answered pair "
                         f"{first['pair_id']} more than once")
    return table.astype({"pair_id": int})


def append_answer(path: str | os.PathLike, row: Mapping[str, Any]) -> None:
    """Append one answer as a JSON line and flush it to disk (flush + fsync)."""
    line = json.dumps({c: row[c] for c in ANSWER_COLUMNS}) + "\n"
    with open(path, "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def save_answers(answers: pd.DataFrame, directory: str | os.PathLike,
                 overwrite: bool = False) -> list[Path]:
    """Write ``answers`` as one ``<annotator>.jsonl`` per annotator in ``directory``.

    Refuses to replace an existing file unless ``overwrite`` (annotations are precious).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for annotator, part in answers.groupby("annotator", sort=True):
        path = out / f"{annotator}.jsonl"
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
        rows = [check_answer(r, path, k) for k, r in
                enumerate(part[list(ANSWER_COLUMNS)].to_dict("records"), start=1)]
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
            f.flush()
            os.fsync(f.fileno())
        paths.append(path)
    return paths


class AnnotationLog:
    """One annotator's session over ``pairs``: what to show next, and their answers file.

    The file's folder is created when missing. Opening an existing file resumes: its
    answers are read back (they must be this annotator's and this sample's) and answered
    pairs are skipped. offered: the pair_ids to ask about (default: every pair); the
    A/B coins are drawn over all of ``pairs`` either way, so a pair is shown the same
    way whatever is offered.

    >>> import tempfile
    >>> pairs = pd.DataFrame({"pair_id": [0, 1], "task": "t", "rollout_a": ["x", "y"],
    ...                       "rollout_b": ["u", "v"]})
    >>> path = Path(tempfile.mkdtemp()) / "answers" / "ana.jsonl"
    >>> log = AnnotationLog(path, "ana", pairs)
    >>> _ = log.record(int(log.next_pair()["pair_id"]), "invalid")
    >>> AnnotationLog(path, "ana", pairs).progress()
    (1, 2)
    """

    def __init__(self, path: str | os.PathLike, annotator: str, pairs: pd.DataFrame,
                 seed: int = 0, offered: Sequence[int] | None = None) -> None:
        if not annotator.strip():
            raise ValueError("an annotator needs a non-empty name")
        self.path, self.annotator = Path(path), annotator
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sample = presentation_order(pairs, annotator, seed)
        self.shown = self._sample
        if offered is not None:
            offered = {int(k) for k in offered}
            unknown = sorted(offered - set(self._sample["pair_id"]))
            if unknown:
                raise ValueError(f"offered pairs {unknown[:5]} are not in this sample")
            self.shown = self._sample[self._sample["pair_id"].isin(offered)].reset_index(drop=True)
        self.answers = (read_answers(self.path) if self.path.exists()
                        else pd.DataFrame(columns=[*ANSWER_COLUMNS, "source"]))
        self._check_resumed()

    def _check_resumed(self) -> None:
        others = sorted(set(self.answers["annotator"]) - {self.annotator})
        if others:
            raise ValueError(f"{self.path} holds answers of {others}, not of {self.annotator!r}")
        rollouts = {int(r.pair_id): {r.shown_a, r.shown_b} for r in self._sample.itertuples()}
        for r in self.answers.itertuples():
            if rollouts.get(int(r.pair_id)) != {r.shown_a, r.shown_b}:
                raise ValueError(f"{self.path}: pair {r.pair_id} was answered for rollouts "
                                 f"{sorted({r.shown_a, r.shown_b})}, which are not this sample's "
                                 f"pair {r.pair_id}; was the file written for another sample?")

    def answered(self) -> set[int]:
        """pair_ids already answered (offered or not)."""
        return set(self.answers["pair_id"].astype(int))

    def progress(self) -> tuple[int, int]:
        """(offered pairs answered, pairs offered)."""
        return len(self.answered() & set(self.shown["pair_id"])), len(self.shown)

    def next_pair(self) -> pd.Series | None:
        """The first unanswered pair as shown (a :func:`presentation_order` row), or None."""
        pending = self.shown[~self.shown["pair_id"].isin(self.answered())]
        return None if pending.empty else pending.iloc[0]

    def record(self, pair_id: int, choice: str, timestamp: str | None = None) -> dict[str, Any]:
        """Append this annotator's ``choice`` ("A", "B" or "invalid") on ``pair_id`` to the
        file (durably) and return the row written."""
        if pair_id in self.answered():
            raise ValueError(f"{self.annotator!r} already answered pair {pair_id}")
        shown = self.shown[self.shown["pair_id"] == pair_id]
        if shown.empty:
            raise ValueError(f"pair {pair_id} is not offered in this session")
        row = check_answer({"annotator": self.annotator, "pair_id": pair_id,
                            "shown_a": str(shown["shown_a"].iloc[0]),
                            "shown_b": str(shown["shown_b"].iloc[0]), "choice": choice,
                            "timestamp": timestamp or datetime.now(timezone.utc).isoformat()},
                           self.path, len(self.answers) + 1)
        append_answer(self.path, row)
        self.answers = pd.concat([self.answers, pd.DataFrame([row | {"source": str(self.path)}])],
                                 ignore_index=True)
        return row


def simulated_annotations(pairs: pd.DataFrame, reference: Mapping[int, str | None],
                          flip_probs: Sequence[float], invalid_prob: float = 0.0,
                          seed: int = 0) -> pd.DataFrame:
    """Answers of SIMULATED annotators, not people: ``simulated-1``, ``simulated-2``, ...

    Annotator k sees each pair in their own :func:`presentation_order`, answers
    "invalid" with ``invalid_prob``, else prefers the rollout ``reference[pair_id]``
    names (a judge's answer; a fair coin where it is None) flipped with
    ``flip_probs[k]``. Returns rows in the answer-file format (timestamp "simulated").

    >>> pairs = pd.DataFrame({"pair_id": [0, 1], "task": "t", "rollout_a": ["x", "y"],
    ...                       "rollout_b": ["u", "v"]})
    >>> sim = simulated_annotations(pairs, {0: "x", 1: "v"}, flip_probs=[0.0])
    >>> [r.shown_a if r.choice == "A" else r.shown_b for r in sim.itertuples()]
    ['x', 'v']
    """
    rows = []
    for k, flip in enumerate(flip_probs, start=1):
        name = f"simulated-{k}"
        rng = np.random.default_rng(annotator_seed(name, seed))
        for shown in presentation_order(pairs, name, seed).itertuples():
            invalid, flipped, coin = rng.random(3) < [invalid_prob, flip, 0.5]
            preferred = reference.get(int(shown.pair_id))
            a_wins = coin if preferred is None else (preferred == shown.shown_a) != flipped
            choice = "invalid" if invalid else ("A" if a_wins else "B")
            rows.append({"annotator": name, "pair_id": int(shown.pair_id),
                         "shown_a": shown.shown_a, "shown_b": shown.shown_b,
                         "choice": choice, "timestamp": "simulated"})
    return pd.DataFrame(rows, columns=list(ANSWER_COLUMNS))


def has_video(path: Any) -> bool:
    """Whether ``path`` names a video file that is there."""
    return isinstance(path, (str, os.PathLike)) and bool(str(path)) and Path(path).is_file()


def pairs_with_videos(pairs: pd.DataFrame) -> list[int]:
    """pair_ids of ``pairs`` whose two rollouts both have a video file (``video_a`` and
    ``video_b``), in pair order.

    >>> pairs_with_videos(pd.DataFrame({"pair_id": [0], "video_a": [None], "video_b": ["x"]}))
    []
    """
    videos = [pairs.get(f"video_{side}", pd.Series([None] * len(pairs), index=pairs.index))
              for side in "ab"]
    return [int(k) for k, a, b in zip(pairs["pair_id"], *videos) if has_video(a) and has_video(b)]


def load_video(path: str | os.PathLike | None) -> tuple[bytes, str] | None:
    """(the file's bytes, its format such as "mp4") for a player, or None when there is
    no video (no path, or no file there)."""
    if not has_video(path):
        return None
    return Path(path).read_bytes(), Path(path).suffix.lstrip(".").lower() or "mp4"
