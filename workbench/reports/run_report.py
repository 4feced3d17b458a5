"""A run's report as JSON (machine-readable) and HTML (one self-contained page).

The report keeps infrastructure errors apart from task failures, marks diagnostic
runs (privileged policies), and links each episode's video and rollout file.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.contracts.results import summarize
from workbench.contracts.stats import wilson_interval


def report_data(results: pd.DataFrame) -> dict[str, Any]:
    """Summary per task (with 95% Wilson intervals), totals, and every episode."""
    summary = summarize(results)
    scored = (summary["episodes"] - summary["infra_errors"]).to_numpy()
    lows, highs = np.full(len(summary), np.nan), np.full(len(summary), np.nan)
    ok = scored > 0
    lows[ok], highs[ok] = wilson_interval(summary["successes"].to_numpy()[ok], scored[ok])
    summary = summary.assign(success_low=lows, success_high=highs)
    episodes = results.drop(columns=[c for c in ("claimed_at", "finished_at") if c in results])
    return {
        "runs": sorted(results["run_id"].unique().tolist()),
        "policies": sorted(results["policy"].unique().tolist()),
        "diagnostic": bool(results["diagnostic"].any()),
        "episodes": int(len(results)),
        "finished": int(results["status"].eq("finished").sum()),
        "summary": json.loads(summary.to_json(orient="records")),
        "records": json.loads(episodes.to_json(orient="records")),
    }


def write_report(results: pd.DataFrame, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = report_data(results)
    json_path, html_path = out / "report.json", out / "report.html"
    json_path.write_text(json.dumps(data, indent=1))
    html_path.write_text(_html(data, out))
    return json_path, html_path


def _html(data: dict[str, Any], out: Path) -> str:
    note = ("<p class='warn'>Diagnostic run: the policy read privileged simulator state; "
            "these are not capability scores.</p>" if data["diagnostic"] else "")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>workbench report</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}.warn{{color:#a60}}
.bar{{background:#4a7;height:10px}}</style></head><body>
<h1>Run report</h1><p>runs: {html.escape(", ".join(data["runs"]))} &middot; policies:
{html.escape(", ".join(data["policies"]))} &middot; {data["finished"]}/{data["episodes"]}
episodes finished</p>{note}
<h2>Success per task</h2>{_summary_table(data["summary"])}
<p>Success rates leave out infrastructure errors (harness failures); policy errors count
as failures. Intervals are 95% Wilson intervals.</p>
<h2>Episodes</h2>{_episode_table(data["records"], out)}</body></html>"""


def _summary_table(rows: list[dict]) -> str:
    head = ("<tr><th>task</th><th>episodes</th><th>successes</th><th>rate</th>"
            "<th>95% interval</th><th></th><th>mean terminal step</th><th>policy errors</th>"
            "<th>infra errors</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(str(r['task']))}</td><td>{r['episodes']}</td>"
        f"<td>{r['successes']}</td><td>{_fmt(r['success_rate'])}</td>"
        f"<td>{_fmt(r['success_low'])} to {_fmt(r['success_high'])}</td>"
        f"<td><div class='bar' style='width:{100 * (r['success_rate'] or 0):.0f}px'></div></td>"
        f"<td>{_fmt(r['mean_terminal_step'], 1)}</td><td>{r['policy_errors']}</td>"
        f"<td>{r['infra_errors']}</td></tr>" for r in rows)
    return f"<table>{head}{body}</table>"


def _episode_table(rows: list[dict], out: Path) -> str:
    head = ("<tr><th>episode</th><th>policy</th><th>success</th><th>terminal step</th>"
            "<th>steps</th><th>wall (s)</th><th>error</th><th>video</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(r['episode_id'])}</td><td>{html.escape(str(r['policy']))}</td>"
        f"<td>{r['success']}</td><td>{_fmt(r['terminal_step'], 0)}</td><td>{r['steps']}</td>"
        f"<td>{_fmt(r['wall_s'], 2)}</td>"
        f"<td>{html.escape(_error(r))}</td><td>{_link(r.get('video_path'), out)}</td></tr>"
        for r in rows)
    return f"<table>{head}{body}</table>"


def _error(row: dict) -> str:
    return "" if not row.get("error_kind") else f"{row['error_kind']}: {row['error_message']}"


def _link(path: Any, out: Path) -> str:
    if not path:
        return ""
    target = Path(path)
    try:
        target = target.resolve().relative_to(out.resolve())
    except ValueError:
        pass
    return f"<a href='{html.escape(str(target))}'>mp4</a>"


def _fmt(value: Any, digits: int = 2) -> str:
    return "" if value is None or pd.isna(value) else f"{value:.{digits}f}"
