"""A run's or campaign's basic result as JSON (machine-readable) and one HTML page.

Each episode has one outcome (:func:`episode_outcomes`). The success denominator
counts the episodes actually attempted and scored: successes, task failures and
policy errors (a policy error is the policy's failure). Infrastructure errors and
interrupted episodes are left out of it, and so are episodes never attempted (listed
as unattempted: planned in the records, or cases of the manifest without a record).
Totals are per benchmark and policy; nothing is summed across benchmarks or policies.

The page also shows what was evaluated (method and benchmark, from the campaign
manifest when given, else from the records), where and with what code each run was
made (its provenance: workbench version and commit, Python, platform, host, date) and
its full configuration, the budgets, a chart of success per task with Wilson
intervals, the measured usage, the videos (with posters) and every episode's
interaction history (:mod:`.interaction_history`). The page stands alone: no scripts,
no external resources, every link inside its folder (videos recorded elsewhere are
copied in), or, with ``self_contained``, everything embedded in the one HTML file.
It checks supplied records; it does not attest native execution or provider identity.

>>> df = pd.DataFrame({"episode_id": ["a", "b", "c", "d"], "task": "t", "benchmark": "m",
...                    "policy": "p", "status": ["finished"] * 3 + ["planned"],
...                    "success": [True, False, False, None],
...                    "error_kind": [None, "policy", "infrastructure", None]})
>>> episode_outcomes(df).tolist()
['success', 'policy_error', 'infrastructure_error', 'unattempted']
>>> total = report_data(df)["summary"][-1]
>>> total["scored"], total["successes"], total["unattempted"], round(total["success_low"], 3)
(2, 1, 1, 0.095)
"""

from __future__ import annotations

import json
import os
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.contracts.results import ErrorKind
from workbench.ranking.metrics import wilson_interval
from workbench.records.provenance import code_provenance
from workbench.reports.assets import carry, data_uri, figure_svg, file_uri, video_poster
from workbench.reports.interaction_history import (esc, history_body, html_page, html_table,
                                                   interaction_history, write_histories)

SCORED = ("success", "task_failure", "policy_error")
"""Outcomes in the success denominator."""
EXCLUDED = ("infrastructure_error", "interrupted")
"""Finished but left out of the denominator: the harness failed, not the policy."""
NOT_FINISHED = ("unattempted", "unfinished")
"""Planned but never attempted; claimed but not finished (running, or lost)."""
COLUMNS = ("run_id", "suite", "diagnostic", "success", "terminal_step", "steps", "wall_s",
           "error_kind", "error_message", "video_path", "policy_calls", "decisions",
           "rejections", "termination", "interactions_path", "interrupted", "attempt")
"""Columns a report reads besides episode_id, benchmark, policy, task and status; any
absent (older records, hand-made frames) reads as NULL."""
USAGE = {"controls": "steps", "policy_calls": "policy_calls", "decisions": "decisions",
         "rejections": "rejections", "wall_s": "wall_s"}
"""Usage totals and the records column each sums (``steps`` = controls executed)."""


def episode_outcomes(results: pd.DataFrame) -> pd.Series:
    """One outcome per row: ``success``, ``task_failure``, ``policy_error``,
    ``infrastructure_error``, ``interrupted``, ``unfinished`` (claimed, not finished) or
    ``unattempted`` (planned). Records without an ``interrupted`` column mark an
    interrupted episode by its message (``interrupted: ...``, as recovery writes it)."""
    results = _complete(results)
    status, kind = results["status"], results["error_kind"]
    interrupted = _interrupted(results)
    success = results["success"].astype("boolean").fillna(False).astype(bool)
    outcome = pd.Series("task_failure", index=results.index)
    outcome[success] = "success"
    outcome[kind.eq(ErrorKind.POLICY.value)] = "policy_error"
    outcome[kind.eq(ErrorKind.INFRASTRUCTURE.value)] = "infrastructure_error"
    outcome[interrupted] = "interrupted"
    outcome[status.eq("claimed")] = "unfinished"
    outcome[status.eq("planned")] = "unattempted"
    return outcome


def _complete(results: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in COLUMNS if c not in results]
    return results.assign(**{c: None for c in missing}) if missing else results


def _interrupted(results: pd.DataFrame) -> pd.Series:
    by_message = (results["error_kind"].eq(ErrorKind.INFRASTRUCTURE.value)
                  & results["error_message"].fillna("").astype(str).str.startswith("interrupted:"))
    flag = pd.to_numeric(results["interrupted"], errors="coerce")
    return flag.eq(1) | (flag.isna() & by_message)


def report_data(results: pd.DataFrame, manifest: dict[str, Any] | None = None,
                searches: list[dict[str, Any]] | None = None,
                runs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The report's content: what was evaluated, ``summary`` (counts, success rates and
    95% Wilson intervals per benchmark, policy and task, then a row ``task='ALL'`` per
    benchmark and policy), ``usage`` (the same rows), and ``records`` (every episode,
    with its ``outcome``). ``manifest``: a campaign's manifest (``campaign_id`` required,
    every other key optional); its ``cases`` without a record count as unattempted.
    ``searches``: concurrency searches of these runs (``RecordStore.searches``): their
    probe tables, decisions and choices. ``runs``: per run id, its frozen ``config`` and
    ``provenance`` as recorded (``RecordStore.configs``, ``RecordStore.provenance``);
    ``report`` says which workbench wrote the report, and when."""
    if manifest is not None and not manifest.get("campaign_id"):
        raise ValueError("a campaign manifest needs a campaign_id")
    frame = _with_cases(_complete(results), manifest)
    frame = frame.assign(outcome=episode_outcomes(frame))
    groups = list(frame.groupby(["benchmark", "policy", "task"], sort=True))
    totals = list(frame.groupby(["benchmark", "policy"], sort=True))
    ran = sorted(frame["run_id"].dropna().unique().tolist())
    runs = {r: (runs or {}).get(r) or {} for r in ran}
    return {
        "campaign": _campaign(manifest),
        "benchmark": _benchmark(frame, manifest, runs),
        "method": _method(frame, manifest, runs),
        "budgets": (manifest or {}).get("budgets"),
        "runs": ran,
        "configs": {r: run.get("config") for r, run in runs.items()},
        "provenance": {r: run.get("provenance") for r, run in runs.items()},
        "report": {"written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   **code_provenance()},
        "policies": sorted(frame["policy"].dropna().unique().tolist()),
        "diagnostic": bool(frame["diagnostic"].eq(True).any()),
        "episodes": int(len(frame)),
        "finished": int(frame["status"].eq("finished").sum()),
        "summary": _rows(groups, totals, _counts),
        "usage": _rows(groups, totals, _usage),
        "records": _records(frame),
        "searches": list(searches or []),
    }


def write_report(results: pd.DataFrame, out_dir: str | os.PathLike,
                 manifest: dict[str, Any] | None = None,
                 searches: list[dict[str, Any]] | None = None,
                 runs: dict[str, dict[str, Any]] | None = None,
                 self_contained: bool = False,
                 problems: list[str] | None = None) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``out_dir``; returns their paths.

    The page links only inside ``out_dir``: each episode's interaction history page goes
    to ``out_dir/history``, and a video recorded outside ``out_dir`` is copied into
    ``out_dir/videos``, so the folder can be copied or shared whole. With
    ``self_contained`` the page embeds everything instead (videos, posters, histories),
    and is the one file to share. ``problems``: what could not be read from the records
    (shown first on the page, kept in ``report.json``). See :func:`report_data` for the
    other arguments."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = {**report_data(results, manifest, searches, runs), "problems": list(problems or [])}
    pages = {} if self_contained else write_histories(results, out / "history")
    for k, record in enumerate(data["records"]):
        _attach_assets(record, k, out, pages, self_contained)
    json_path, html_path = out / "report.json", out / "report.html"
    json_path.write_text(json.dumps(
        {**data, "records": [_without_inline(r) for r in data["records"]]}, indent=1))
    html_path.write_text(report_html(data))
    return json_path, html_path


def report_from_records(db: str | os.PathLike, run_id: str | None = None,
                        out_dir: str | os.PathLike | None = None,
                        self_contained: bool = False) -> tuple[Path, Path]:
    """:func:`write_report` of a records file (every run in it, or ``run_id``), with the
    runs' searches, configs and provenance; ``out_dir`` defaults to the file's folder."""
    from workbench.records.store import RecordStore, read_records

    results, problems = read_records(db, run_id)
    store = RecordStore(db, readonly=True)
    try:
        ran = set(results["run_id"].dropna())
        searches = [s for s in store.searches() if s["run_id"] in ran]
        runs = {r: run for r, run in store.run_details().items() if r in ran}
        problems += [p for p in store.problems if p not in problems]
    finally:
        store.close()
    return write_report(results, out_dir or Path(db).parent, searches=searches, runs=runs,
                        self_contained=self_contained, problems=problems)


def _attach_assets(record: dict[str, Any], k: int, out: Path, pages: dict[str, Path],
                   self_contained: bool) -> None:
    """The record's video (href, poster, source for a player) and history (href, and its
    page's content when embedded)."""
    video = record.get("video_path")
    if video and Path(video).is_file():
        poster = video_poster(video)
        record["poster"] = None if poster is None else data_uri(poster, "image/png")
        if self_contained:
            record["video_src"], record["video_href"] = file_uri(video), f"#video-{k}"
        else:
            copied = carry(video, out, f"videos/{k:04d}-{Path(video).name}")
            record["video_href"] = record["video_src"] = _href(copied, out)
    interactions = record.get("interactions_path")
    if not self_contained:
        record["history_href"] = _href(pages.get(str(interactions)), out)
        return
    try:
        record["history_inline"] = history_body(interaction_history(interactions),
                                                prefix=f"h{k}-", heading="h3")
        record["history_href"] = f"#history-{k}"
    except (OSError, TypeError, ValueError):  # no file, or not an interaction file
        record["history_href"] = None


def _without_inline(record: dict[str, Any]) -> dict[str, Any]:
    """A record for report.json: embedded bytes and page content left out."""
    return {k: v for k, v in record.items() if k not in ("history_inline", "video_src", "poster")
            and not (isinstance(v, str) and v.startswith("data:"))}


# -- content --------------------------------------------------------------------


def _with_cases(results: pd.DataFrame, manifest: dict[str, Any] | None) -> pd.DataFrame:
    """``results`` plus a planned row for each manifest case without a record."""
    recorded = set(results["episode_id"])
    cases = [c for c in (manifest or {}).get("cases") or [] if c not in recorded]
    if not cases:
        return results
    policy = (manifest.get("policy") or {}).get("name") or _only(results["policy"]) or "unknown"
    rows = [{"episode_id": c, "benchmark": c.split("/")[0], "task": c.split("/")[-2],
             "policy": policy, "status": "planned", "diagnostic": False} for c in cases]
    return pd.concat([results, pd.DataFrame(rows)], ignore_index=True)


def _only(values: pd.Series) -> Any:
    unique = values.dropna().unique()
    return unique[0] if len(unique) == 1 else None


def _rows(groups: list, totals: list, measure: Any) -> list[dict[str, Any]]:
    """``measure(part)`` per (benchmark, policy, task) and, after each benchmark and
    policy's tasks, its ``ALL`` row."""
    rows = []
    for (benchmark, policy), whole in totals:
        rows += [{"benchmark": b, "policy": p, "task": t} | measure(part)
                 for (b, p, t), part in groups if (b, p) == (benchmark, policy)]
        rows.append({"benchmark": benchmark, "policy": policy, "task": "ALL"} | measure(whole))
    return rows


def _counts(part: pd.DataFrame) -> dict[str, Any]:
    n = part["outcome"].value_counts().to_dict()
    scored, successes = sum(n.get(k, 0) for k in SCORED), n.get("success", 0)
    low, high = wilson_interval(successes, scored) if scored else (None, None)
    terminal = pd.to_numeric(part.loc[part["outcome"].eq("success"), "terminal_step"])
    terminations = part["termination"].dropna()
    return {"episodes": int(len(part)), "unattempted": n.get("unattempted", 0),
            "unfinished": n.get("unfinished", 0),
            "finished": int(part["status"].eq("finished").sum()),
            "scored": scored, "successes": successes,
            "success_rate": successes / scored if scored else None,
            "success_low": None if low is None else float(low),
            "success_high": None if high is None else float(high),
            "task_failures": n.get("task_failure", 0), "policy_errors": n.get("policy_error", 0),
            "infra_errors": n.get("infrastructure_error", 0),
            "interrupted": n.get("interrupted", 0),
            "retried": int(pd.to_numeric(part["attempt"], errors="coerce").gt(1).sum()),
            "mean_terminal_step": float(terminal.mean()) if len(terminal) else None,
            "terminations": {str(k): int(v) for k, v in terminations.value_counts().items()}}


def _usage(part: pd.DataFrame) -> dict[str, Any]:
    """Sums over the finished episodes that recorded each count (None: none did)."""
    done = part[part["status"].eq("finished")]
    usage: dict[str, Any] = {"episodes": int(len(done))}
    for key, column in USAGE.items():
        total = pd.to_numeric(done[column], errors="coerce").sum(min_count=1)
        usage[key] = None if pd.isna(total) else (float(total) if key == "wall_s" else int(total))
    return usage


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    claims = ("claimed_at", "heartbeat_at", "holder")  # claim bookkeeping, not results
    episodes = frame.drop(columns=[c for c in claims if c in frame])
    return json.loads(episodes.to_json(orient="records"))


def _campaign(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    if manifest is None:
        return None
    created = manifest.get("created")
    return {"campaign_id": manifest["campaign_id"],
            "created": None if created is None else
            datetime.fromtimestamp(created, timezone.utc).isoformat(timespec="seconds"),
            "cases": None if manifest.get("cases") is None else len(manifest["cases"]),
            "backend": manifest.get("backend"), "service_url": manifest.get("service_url"),
            "hashes": manifest.get("hashes")}


def _benchmark(frame: pd.DataFrame, manifest: dict[str, Any] | None,
               runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    given = (manifest or {}).get("benchmark")
    if given:
        return {"source": "manifest", **given}
    versions = _joined(runs, lambda run: (run.get("provenance") or {}).get("benchmark_versions"))
    return {"source": "records", "name": ", ".join(sorted(frame["benchmark"].dropna().unique())),
            "suite": ", ".join(sorted(frame["suite"].dropna().unique())) or None,
            **({"versions": versions} if versions else {})}


def _method(frame: pd.DataFrame, manifest: dict[str, Any] | None,
            runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    given = (manifest or {}).get("policy")
    if given:
        return {"source": "manifest", **given}
    method = {"source": "records", "name": ", ".join(sorted(frame["policy"].dropna().unique()))}
    found = {"reference": lambda run: (run.get("config") or {}).get("policy"),
             "options": lambda run: (run.get("config") or {}).get("policy_options"),
             "source_file": lambda run: (run.get("provenance") or {}).get("policy_source_file"),
             "source_hash": lambda run: (run.get("provenance") or {}).get("policy_source_hash")}
    for key, read in found.items():
        value = _joined(runs, read)
        if value is not None:
            method[key] = value
    return method


def _joined(runs: dict[str, dict[str, Any]], read: Any) -> Any:
    """What ``read`` finds in the runs: the one value when they agree, else a mapping of
    run id to value; None when no run has it."""
    values = {r: read(run) for r, run in runs.items() if read(run) is not None}
    distinct = {json.dumps(v, sort_keys=True, default=str) for v in values.values()}
    if not values:
        return None
    return next(iter(values.values())) if len(distinct) == 1 else values


def _href(path: Any, out: Path) -> str | None:
    """``path`` relative to the report folder, quoted for a link (None when absent)."""
    if path is None or (isinstance(path, float) and pd.isna(path)) or path == "":
        return None
    relative = os.path.relpath(Path(path).resolve(), out.resolve())
    return urllib.parse.quote(Path(relative).as_posix())


# -- HTML -----------------------------------------------------------------------


def report_html(data: dict[str, Any]) -> str:
    """The page of :func:`report_data`'s content (with the links write_report adds)."""
    campaign = data["campaign"]
    title = ("Campaign " + campaign["campaign_id"]) if campaign else "Run report"
    diagnostic = ("<p class='warn'>Diagnostic run: the policy read privileged simulator "
                  "state; these are not capability scores.</p>" if data["diagnostic"] else "")
    problems = "".join(f"<li>{esc(p)}</li>" for p in data.get("problems") or [])
    if problems:
        diagnostic += ("<div class='warn' id='records-problems'><p>The records file could not "
                       f"be read whole; this report shows what it holds:</p><ul>{problems}"
                       "</ul></div>")
    body = (f"<h1>{esc(title)}</h1>{_identity(data)}{diagnostic}"
            f"<h2>Method</h2>{_mapping_table('method', data['method'], METHOD_KEYS)}"
            f"<h2>Benchmark</h2>"
            f"{_mapping_table('benchmark', data['benchmark'], BENCHMARK_KEYS)}"
            f"<h2>Budgets</h2>{_budgets(data['budgets'])}"
            f"<h2>Success per task</h2>{_chart(data['summary'])}"
            f"{_summary_table(data['summary'])}{_denominator_note()}"
            f"<h2>Measured usage</h2>{_usage_table(data['usage'])}"
            f"{_searches(data.get('searches') or [])}"
            f"<h2>Episodes</h2>{_episode_table(data['records'])}{_videos(data['records'])}"
            f"<h2>Provenance</h2>{_provenance_table(data)}"
            f"<h2>Configuration</h2>{_config_table(data['configs'])}"
            f"{_histories(data['records'])}")
    return html_page(title, body)


METHOD_KEYS = ("reference", "options", "source_file", "source_hash")
BENCHMARK_KEYS = ("suite", "versions")
PROVENANCE_ROWS = [("recorded (UTC)", "recorded"), ("workbench version", "workbench_version"),
                   ("commit", "commit"), ("uncommitted changes", "dirty"),
                   ("Python", "python"), ("platform", "platform"), ("host", "host")]


def _provenance_table(data: dict[str, Any]) -> str:
    """Where and with what code each run was made, and who wrote this report."""
    columns = {run: prov or {} for run, prov in data["provenance"].items()}
    columns["this report"] = {**data["report"], "recorded": data["report"]["written"]}
    rows = [({"data-key": key}, [("", esc(label))]
             + [("", esc(_plain(c.get(key)))) for c in columns.values()])
            for label, key in PROVENANCE_ROWS]
    table = html_table("provenance", ["", *[f"run {r}" for r in data["provenance"]],
                                      "this report"], rows)
    notes = [f"<p class='warn'>run {esc(run)} was resumed on other code or another host: "
             + "; ".join(esc(", ".join(f"{k} {_plain(v)}" for k, v in later.items()))
                         for later in prov["resumed"]) + "</p>"
             for run, prov in data["provenance"].items() if prov and prov.get("resumed")]
    missing = [r for r, prov in data["provenance"].items() if not prov]
    if missing:
        notes.append(f"<p class='note'>No provenance was recorded for {esc(', '.join(missing))} "
                     "(records written before it was).</p>")
    return table + "".join(notes)


def _config_table(configs: dict[str, dict[str, Any] | None]) -> str:
    """Every key of each run's frozen config (a section's keys as ``section.key``)."""
    flat = {run: _flatten(config) for run, config in configs.items() if config}
    if not flat:
        return "<p class='note'>No configuration was given to this report.</p>"
    keys = list(dict.fromkeys(k for config in flat.values() for k in config))
    return html_table("config", ["key", *[f"run {r}" for r in flat]], [
        ({"data-key": key}, [("key", f"<code>{esc(key)}</code>")]
         + [("value", esc(_plain(config.get(key)))) for config in flat.values()])
        for key in keys])


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and key not in ("policy_options", "benchmark_options"):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _chart(summary: list[dict[str, Any]]) -> str:
    """Success per task with Wilson intervals, as an inline SVG (nothing when no task
    has a rate)."""
    from workbench.reports.plots import plot_success_intervals

    rows = pd.DataFrame(summary)
    if rows.empty or rows["success_rate"].isna().all():
        return ""
    fig, _ = plot_success_intervals(rows)
    return f"<figure class='chart' id='success-chart'>{figure_svg(fig)}</figure>"


def _listed(records: list[dict[str, Any]], key: str, title: str, item: Any) -> str:
    """A section titled ``title`` with ``item(k, record)`` for each record holding ``key``
    (nothing when none does)."""
    shown = [(k, r) for k, r in enumerate(records) if r.get(key)]
    return f"<h2>{title}</h2>" + "".join(item(k, r) for k, r in shown) if shown else ""


def _videos(records: list[dict[str, Any]]) -> str:
    """A player per episode video, with its poster."""
    return _listed(records, "video_src", "Videos", lambda k, r: (
        f"<figure class='video' id='video-{k}'><video controls preload='none' "
        f"src='{esc(r['video_src'])}'" + (f" poster='{esc(r['poster'])}'" if r.get("poster")
                                           else "")
        + f"></video><figcaption><code>{esc(r['episode_id'])}</code> ({esc(r['outcome'])})"
        "</figcaption></figure>"))


def _histories(records: list[dict[str, Any]]) -> str:
    """Embedded interaction histories (a self-contained report's), one section each."""
    return _listed(records, "history_inline", "Interaction histories", lambda k, r: (
        f"<section class='history' id='history-{k}'>{r['history_inline']}</section>"))


SEARCH_COLUMNS = [("probe", "probe"), ("workers", "workers"), ("replicas", "replicas"),
                  ("batch", "max_batch"), ("episodes", "episodes"),
                  ("successes", "successes"), ("steps/s", "steps_per_s"),
                  ("busy cores", "busy_cores"), ("peak memory GiB", "peak_mem_gib"),
                  ("GPU util %", "gpu_util_pct"), ("GPU peak GiB", "gpu_peak_gib"),
                  ("status", "status"), ("reason", "reason")]


def _searches(searches: list[dict[str, Any]]) -> str:
    """Each concurrency search: its choice, its decisions in order, its probe table."""
    out = []
    for search in searches:
        best = search["best"]
        rows = [({}, [("num" if isinstance(row.get(key), (int, float)) else "",
                       esc(_cell(row.get(key)))) for _, key in SEARCH_COLUMNS])
                for row in search["probes"]]
        out.append(
            f"<h2>Concurrency search (run {esc(search['run_id'])})</h2>"
            f"<p>Chosen: {best['workers']} workers, {best['replicas']} replicas, batch "
            f"{best['max_batch']}, after {search['search_s']:.1f} s of probes (CPU cost per "
            f"worker {search['cost_per_worker']:.2f} cores, worker cap {search['worker_cap']}, "
            f"replica cap {search['replica_cap']}).</p>"
            "<ol class='decisions'>" + "".join(f"<li>{esc(d)}</li>" for d in search["decisions"])
            + "</ol>" + html_table("search-probes", [h for h, _ in SEARCH_COLUMNS], rows))
    return "".join(out)


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return "" if value != value else f"{value:.2f}"
    return "" if value is None else value


def _identity(data: dict[str, Any]) -> str:
    campaign = data["campaign"] or {}
    parts = [f"runs: {esc(', '.join(data['runs']) or None)}",
             f"{data['finished']} of {data['episodes']} episodes finished"]
    parts += [f"{key.replace('_', ' ')}: {esc(campaign[key])}"
              for key in ("created", "cases", "backend", "service_url") if campaign.get(key)]
    hashes = campaign.get("hashes") or {}
    parts += [f"{esc(k)} hash: <code>{esc(v)}</code>" for k, v in hashes.items()]
    return "<p class='identity'>" + " &middot; ".join(parts) + "</p>"


def _mapping_table(table_id: str, values: dict[str, Any], expected: tuple[str, ...]) -> str:
    rows = [({"data-key": key}, [("", esc(key.replace("_", " "))), ("", esc(_plain(value)))])
            for key, value in values.items()]
    missing = [k.replace("_", " ") for k in expected if values.get(k) is None]
    if missing:
        rows.append(({}, [("", "note"), ("", esc(f"not recorded: {', '.join(missing)}"))]))
    return html_table(table_id, [], rows)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_plain(v)}" for k, v in value.items()) or "(none)"
    return value


def _budgets(budgets: dict[str, Any] | None) -> str:
    if not budgets:
        return ("<p class='note'>No budgets were given to this report (a plain run's own "
                "max_steps is in its config).</p>")
    return html_table("budgets", ["budget", "limit"], [
        ({}, [("", esc(k.replace("_", " "))), ("num", esc("none" if v is None else v))])
        for k, v in budgets.items()])


SUMMARY_COLUMNS = [("benchmark", "benchmark"), ("policy", "policy"), ("task", "task"),
                   ("planned", "episodes"), ("unattempted", "unattempted"),
                   ("unfinished", "unfinished"), ("attempted and scored", "scored"),
                   ("successes", "successes"), ("rate", "success_rate"),
                   ("95% Wilson interval", "interval"), ("task failures", "task_failures"),
                   ("policy errors", "policy_errors"),
                   ("infrastructure errors (left out)", "infra_errors"),
                   ("interrupted (left out)", "interrupted"), ("retried", "retried"),
                   ("terminations", "terminations")]
TEXT_CELLS = ("benchmark", "policy", "task", "terminations")


def _summary_table(rows: list[dict[str, Any]]) -> str:
    return html_table("summary", [h for h, _ in SUMMARY_COLUMNS], [
        ({"data-task": r["task"], "data-policy": r["policy"]},
         [(key if key in TEXT_CELLS else f"num {key}", _summary_cell(r, key))
          for _, key in SUMMARY_COLUMNS]) for r in rows])


def _summary_cell(row: dict[str, Any], key: str) -> str:
    if key == "interval":
        return "" if row["success_low"] is None else \
            f"{row['success_low']:.2f} to {row['success_high']:.2f}"
    if key == "success_rate":
        return "" if row[key] is None else f"{row[key]:.2f}"
    if key == "terminations":
        return esc(", ".join(f"{k} {v}" for k, v in sorted(row[key].items())) or None)
    return esc(row[key])


def _denominator_note() -> str:
    return ("<p class='note'>The rate's denominator is the episodes attempted and scored: "
            "successes, task failures and policy errors (a policy error counts as a failure). "
            "Infrastructure errors and interrupted episodes are left out of it, and so are "
            "unattempted and unfinished episodes, which are listed, not counted. Intervals are "
            "95% Wilson intervals. Planned counts cover this run's plan or the campaign's "
            "cases; they do not establish a full suite denominator. No total is taken across "
            "benchmarks or policies.</p>")


def _usage_table(rows: list[dict[str, Any]]) -> str:
    keys = ["episodes", *USAGE]
    header = ["benchmark", "policy", "task", "finished episodes", "controls (steps)",
              "policy calls", "decisions", "rejections", "wall (s)"]
    return html_table("usage", header, [
        ({"data-task": r["task"], "data-policy": r["policy"]},
         [("", esc(r["benchmark"])), ("", esc(r["policy"])), ("", esc(r["task"]))]
         + [(f"num {k}", esc(None if r[k] is None else
                              f"{r[k]:.2f}" if k == "wall_s" else r[k])) for k in keys])
        for r in rows])


def _episode_table(records: list[dict[str, Any]]) -> str:
    header = ["episode", "run", "policy", "attempt", "outcome", "termination", "terminal step",
              "controls", "policy calls", "decisions", "wall (s)", "error", "video", "history"]
    return html_table("episodes", header, [
        ({"data-episode": r["episode_id"]}, _episode_cells(r)) for r in records])


def _episode_cells(r: dict[str, Any]) -> list[tuple[str, str]]:
    error = None if not r.get("error_kind") else f"{r['error_kind']}: {r.get('error_message')}"
    wall = r.get("wall_s")
    return [("", f"<code>{esc(r['episode_id'])}</code>"), ("", esc(r.get("run_id"))),
            ("", esc(r.get("policy"))), ("num", esc(_whole(r.get("attempt")))),
            ("outcome", esc(r["outcome"])), ("", esc(r.get("termination"))),
            ("num", esc(_whole(r.get("terminal_step")))), ("num", esc(_whole(r.get("steps")))),
            ("num", esc(_whole(r.get("policy_calls")))), ("num", esc(_whole(r.get("decisions")))),
            ("num", esc(None if wall is None else f"{wall:.2f}")), ("error", esc(error)),
            ("", _video_link(r)),
            ("", _link(r.get("history_href"), "history", "calls")
             or ("unreadable" if r.get("interactions_path") else ""))]


def _whole(value: Any) -> Any:
    """A count read back from JSON (a float where its column held NULLs) as an int."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _link(href: str | None, cls: str, text: str) -> str:
    return "" if not href else f"<a class='{cls}' href='{esc(href)}'>{text}</a>"


def _video_link(record: dict[str, Any]) -> str:
    """The episode's video link: its poster when there is one, else "mp4"."""
    poster = record.get("poster")
    shown = f"<img class='poster' alt='video' src='{esc(poster)}'>" if poster else "mp4"
    return _link(record.get("video_href"), "video", shown)
