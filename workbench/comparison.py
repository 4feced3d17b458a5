"""Decide with fewer rollouts: paired comparisons of policies that stop when the answer is in.

``workbench compare CONFIG --policies A B [C ...]`` (or :func:`compare`) runs every policy
on the same episodes (task, initial state, seed: the config's plan) in rounds through the
one runner, and after each round updates an anytime-valid test per pair of policies
(:mod:`workbench.ranking.sequential`; ``alpha`` split over the pairs). A pair stops when
decided; a policy stops running when all its pairs are decided; the comparison stops when
every pair is decided or the budget (``max_episodes`` per task) is spent.

Rounds are the plan's shards: round ``r`` of ``R = max_episodes / round_episodes`` is
shard ``r`` of ``R`` (``round_episodes`` episodes of every task), recorded as its own run
of the policy in ``<output_dir>/<label>/records.sqlite``, so no episode is ever run twice
and a killed comparison resumes like any run. Each decision (round, paired episodes,
e-value, threshold, winner) is recorded in ``<output_dir>/comparison.sqlite``, with the
settings it was made under; resuming with other settings is refused.

The threshold on success: the budget is known when the comparison starts (the frozen
plan's paired episodes), so by default it is the exact threshold for that horizon
(:func:`~workbench.ranking.sequential.budget_threshold`: 13.4 instead of 20 at 5% for 200
to 900 paired episodes, the same type-I error, decisions sooner). ``open_ended=True``
(``--open-ended``) keeps ``1 / alpha``, valid however far the budget is later extended; a
budget-calibrated comparison must not be extended past its budget. The success test's
name (:data:`~workbench.ranking.sequential.SUCCESS_TEST`) is one of the settings, so a
comparison begun under another test is not resumed under this one. An episode the
harness failed (an infrastructure error) is left out of its pairs; a policy failure is a
failed episode.

>>> parse_policies(["zero", "b=zero"])
[('zero', 'zero', {}), ('b', 'zero', {})]
"""

from __future__ import annotations

import html
import json
import math
import sqlite3
import time
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from workbench.config import EvalConfig, load_config
from workbench.contracts.plan import plan_episodes, shard_episodes
from workbench.errors import ConfigError
from workbench.ranking.sequential import METRICS, SUCCESS_TEST, Decision, decide
from workbench.records import load_results
from workbench.runner import run

SCHEMA = """
CREATE TABLE IF NOT EXISTS comparison (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (round INTEGER PRIMARY KEY, finished_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
    a TEXT NOT NULL, b TEXT NOT NULL, round INTEGER NOT NULL, episodes INTEGER NOT NULL,
    statistic REAL NOT NULL, threshold REAL NOT NULL, winner TEXT NOT NULL,
    decided_at REAL NOT NULL, PRIMARY KEY (a, b));
"""
PAIR_COLUMNS = ["a", "b", "decided", "winner", "episodes", "budget", "round", "statistic",
                "threshold", "success_a", "success_b", "a_only", "b_only", "a_share_low",
                "a_share_high"]


def parse_policies(specs: Sequence[str] | Mapping[str, Any]
                   ) -> list[tuple[str, str, dict[str, Any]]]:
    """``(label, reference, options)`` of each ``label=reference`` or ``reference`` (its
    own label), or of a mapping ``{label: reference or {"policy": reference,
    "policy_options": {...}}}``; two policies of one label are refused (label a copy:
    ``b=zero``)."""
    if isinstance(specs, Mapping):
        items = [(str(k), v if isinstance(v, str) else (v or {}).get("policy", ""),
                  {} if isinstance(v, str) else dict((v or {}).get("policy_options") or {}))
                 for k, v in specs.items()]
    else:
        items = [(*((spec.partition("=")[0], spec.partition("=")[2]) if "=" in spec
                    else (spec, spec)), {}) for spec in specs]
    for label, ref, _ in items:
        if not label or not isinstance(ref, str) or not ref or "/" in label:
            raise ConfigError(f"policy {label or ref!r}: expected REFERENCE or "
                              "LABEL=REFERENCE (a label without '/')")
    labels = [label for label, _, _ in items]
    if len(items) < 2 or len(set(labels)) != len(labels):
        raise ConfigError(f"policies: expected two or more of distinct labels; got {labels} "
                          "(label a copy: b=zero)")
    return items


@dataclass
class Comparison:
    """What a comparison decided: one row per pair (``pairs``), the rounds run, and where
    its records are."""

    pairs: pd.DataFrame
    rounds: int
    output_dir: Path
    policies: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    metric: str = "success"

    def to_json_lines(self) -> list[str]:
        return [json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                            for k, v in row.items()}) for row in self.pairs.to_dict("records")]

    def _repr_html_(self) -> str:
        return self.pairs.to_html(index=False)


class _Ledger:
    """comparison.sqlite: the settings, the rounds finished and the decisions made."""

    def __init__(self, path: Path, settings: Mapping[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(path, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
            known = dict(self.db.execute("SELECT key, value FROM comparison"))
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{path}: expected a comparison's records; got a file SQLite "
                              f"cannot use ({exc}); nothing was run") from None
        wanted = {k: json.dumps(v, sort_keys=True) for k, v in settings.items()}
        if known and known != wanted:
            changed = sorted(k for k in wanted if known.get(k) != wanted[k])
            raise ConfigError(f"{path}: expected the settings this comparison began with; got "
                              f"other {changed} (compare elsewhere, or with the same "
                              "settings to resume)")
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO comparison VALUES (?, ?)",
                                wanted.items())

    def rounds(self) -> set[int]:
        return {r for (r,) in self.db.execute("SELECT round FROM rounds")}

    def finish_round(self, round_: int) -> None:
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO rounds VALUES (?, ?)", (round_, time.time()))

    def decisions(self) -> dict[tuple[str, str], tuple]:
        rows = self.db.execute("SELECT a, b, round, episodes, statistic, threshold, winner "
                               "FROM decisions")
        return {(r[0], r[1]): r[2:] for r in rows}

    def decide(self, a: str, b: str, round_: int, state: Decision, winner: str) -> None:
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (a, b, round_, state.episodes, state.statistic, state.threshold,
                             winner, time.time()))

    def close(self) -> None:
        self.db.close()


def _outcomes(results: pd.DataFrame, metric: str = "success") -> dict[str, float]:
    """episode_id -> success (1.0 / 0.0) or progress (in [0, 1]; a policy failure's is
    what it reached) for the finished episodes that count (an infrastructure error is
    the harness's: left out)."""
    done = results[(results["status"] == "finished") & (results["error_kind"] != "infrastructure")]
    if metric == "progress":
        values = done["progress"] if "progress" in done else pd.Series(dtype=float)
        return {str(e): float(p) for e, p in zip(done["episode_id"], values) if pd.notna(p)}
    return {str(e): float(bool(s)) for e, s in zip(done["episode_id"], done["success"])}


def _recorded(folder: Path, metric: str) -> dict[str, float]:
    """What a policy's folder already recorded (a resumed comparison's earlier rounds)."""
    path = folder / "records.sqlite"
    return _outcomes(load_results(path), metric) if path.exists() else {}


def compare(config: EvalConfig | Mapping[str, Any] | str | Path,
            policies: Sequence[str] | Mapping[str, Any],
            alpha: float = 0.05, max_episodes: int | None = None, metric: str = "success",
            round_episodes: int = 1, output_dir: str | Path | None = None,
            on_round: Callable[[int, pd.DataFrame], None] | None = None,
            open_ended: bool = False) -> Comparison:
    """Compare ``policies`` (references, or ``label=reference``) on ``config``'s benchmark
    and episodes; see the module docstring. ``max_episodes`` per task (default: the
    config's ``episodes``), a multiple of ``round_episodes``; ``on_round(round, pairs)``
    is called after each round; ``open_ended``: the threshold ``1 / alpha`` instead of
    the budget's exact one (see the module docstring)."""
    base = config if isinstance(config, EvalConfig) else load_config(config)
    arms = parse_policies(policies)
    if metric not in METRICS:
        raise ConfigError(f"metric: expected one of {list(METRICS)}; got {metric!r}")
    if metric == "progress" and base.benchmark_class.progress_measure is None:
        raise ConfigError(f"metric progress: expected a benchmark that declares a progress "
                          f"measure; got {base.benchmark_class.name}, which declares none "
                          "(use --metric success)")
    if not (isinstance(alpha, float | int) and 0 < alpha < 1):
        raise ConfigError(f"alpha: expected a number in (0, 1); got {alpha!r}")
    cap = base.episodes if max_episodes is None else max_episodes
    if isinstance(round_episodes, bool) or not isinstance(round_episodes, int) or \
            round_episodes < 1:
        raise ConfigError(f"round_episodes: expected an integer >= 1; got {round_episodes!r}")
    if not (isinstance(cap, int) and cap >= round_episodes and cap % round_episodes == 0):
        raise ConfigError(f"max_episodes: expected a positive multiple of round_episodes "
                          f"({round_episodes}); got {cap!r}")
    base = base.replace(episodes=cap, progress=False)
    out = Path(output_dir or base.output_dir)
    rounds = cap // round_episodes
    pairs = list(combinations([label for label, _, _ in arms], 2))
    per_pair = alpha / len(pairs)
    if not isinstance(open_ended, bool):
        raise ConfigError(f"open_ended: expected true or false; got {open_ended!r}")
    settings = {"config": base.replace(output_dir=str(out), policy="zero").key(),
                "policies": arms, "alpha": alpha, "metric": metric, "max_episodes": cap,
                "round_episodes": round_episodes}
    if metric == "success":
        settings["success_test"] = SUCCESS_TEST
    plan = plan_episodes(base.benchmark_class.name, base.suite, base.task_names(), cap)
    horizon = None if open_ended else len(plan)
    if horizon is not None:
        settings["horizon"] = horizon
    order = [e.episode_id for r in range(rounds) for e in shard_episodes(plan, rounds, r)]
    ledger = _Ledger(out / "comparison.sqlite", settings)
    outcomes = {label: _recorded(out / label, metric) for label, _, _ in arms}
    try:
        for r in range(rounds):
            decided = ledger.decisions()
            live = {x for pair in pairs if pair not in decided for x in pair}
            if not live:
                break
            for label, ref, options in arms:
                if label in live:
                    shard = base.replace(policy=ref, policy_options=options or
                                         base.policy_options, shards=rounds, shard=r,
                                         output_dir=str(out / label))
                    outcomes[label].update(_outcomes(run(shard).results, metric))
            _update(ledger, pairs, decided, outcomes, order, per_pair, metric, r, horizon)
            ledger.finish_round(r)
            if on_round is not None:
                on_round(r, _table(ledger, pairs, outcomes, order, per_pair, metric, len(plan),
                                   horizon))
        table = _table(ledger, pairs, outcomes, order, per_pair, metric, len(plan), horizon)
        done_rounds = len(ledger.rounds())
    finally:
        ledger.close()
    result = Comparison(table, done_rounds, out, arms, metric)
    write_comparison_report(result, out / "comparison.html")
    return result


def _paired(outcomes: Mapping[str, Mapping[str, float]], a: str, b: str,
            order: Sequence[str]) -> tuple[list[float], list[float]]:
    both = [e for e in order if e in outcomes[a] and e in outcomes[b]]
    return [outcomes[a][e] for e in both], [outcomes[b][e] for e in both]


def _update(ledger: _Ledger, pairs: Sequence[tuple[str, str]], decided: Mapping,
            outcomes: Mapping[str, Mapping[str, float]], order: Sequence[str],
            alpha: float, metric: str, round_: int, horizon: int | None = None) -> None:
    for a, b in pairs:
        if (a, b) in decided:
            continue
        state = decide(*_paired(outcomes, a, b, order), alpha, metric, horizon)
        if state.decided:
            ledger.decide(a, b, round_, state, a if state.winner == "a" else b)


def _table(ledger: _Ledger, pairs: Sequence[tuple[str, str]],
           outcomes: Mapping[str, Mapping[str, float]], order: Sequence[str], alpha: float,
           metric: str, budget: int, horizon: int | None = None) -> pd.DataFrame:
    decided, rows = ledger.decisions(), []
    for a, b in pairs:
        x, y = _paired(outcomes, a, b, order)
        if (a, b) in decided:
            round_, episodes, statistic, threshold, winner = decided[(a, b)]
            state = decide(x[:episodes], y[:episodes], alpha, metric, horizon)
        else:
            state = decide(x, y, alpha, metric, horizon)
            round_, episodes, statistic, threshold, winner = (None, state.episodes,
                                                              state.statistic,
                                                              state.threshold, None)
        rows.append({"a": a, "b": b, "decided": winner is not None, "winner": winner,
                     "episodes": int(episodes), "budget": budget, "round": round_,
                     "statistic": float(statistic), "threshold": float(threshold),
                     "success_a": state.mean_a, "success_b": state.mean_b,
                     "a_only": state.a_only, "b_only": state.b_only,
                     "a_share_low": None if state.interval is None else state.interval[0],
                     "a_share_high": None if state.interval is None else state.interval[1]})
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def describe(result: Comparison) -> str:
    """One line per pair: decided which way after how many paired episodes, or not."""
    lines = []
    for row in result.pairs.itertuples():
        rates = f"mean {result.metric} {row.success_a:.0%} vs {row.success_b:.0%}"
        if pd.notna(row.a_share_low):
            rates += (f"; {row.a} won {row.a_only} of {row.a_only + row.b_only} discordant "
                      f"episodes, share [{row.a_share_low:.2f}, {row.a_share_high:.2f}]")
        if row.decided:
            loser = row.b if row.winner == row.a else row.a
            lines.append(f"{row.a} vs {row.b}: {row.winner} better than {loser} after "
                         f"{row.episodes} paired episodes (of {row.budget}; e-value "
                         f"{row.statistic:.1f} >= {row.threshold:.0f}; {rates})")
        else:
            lines.append(f"{row.a} vs {row.b}: undecided after {row.episodes} paired "
                         f"episodes (of {row.budget}; e-value {row.statistic:.2f} < "
                         f"{row.threshold:.0f}; {rates})")
    return "\n".join(lines)


def write_comparison_report(result: Comparison, path: Path) -> Path:
    """comparison.html: the decision per pair, standing alone."""
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in result.pairs.itertuples(index=False))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in result.pairs.columns)
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in describe(result).splitlines())
    path.write_text("<!doctype html><html><head><meta charset='utf-8'><title>comparison"
                    "</title></head><body><h1>Paired comparison</h1>"
                    f"<p>{result.rounds} rounds; policies: "
                    f"{html.escape(', '.join(f'{k}={v}' for k, v, _ in result.policies))}</p>"
                    f"<ul>{lines}</ul><table><tr>{head}</tr>{rows}</table></body></html>")
    return path
