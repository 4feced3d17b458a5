"""One episode's interaction history, per policy call, as allowlisted JSON and one HTML page.

The runtime writes each recorded episode's interactions to a JSON file
(``workbench.interactions/v1``). :func:`write_interaction_history` turns one such file
into a public view: for every policy call, the observation handed to the policy (its
feature names, shapes and dtypes: pixels are not included), any feedback handed with it
(a previous rejection), the chunk it proposed or its stop, the controls executed from
that chunk, the unattempted rest of the chunk, and the rejection if any; then the
episode's termination and counters.

Only documented keys are copied (:func:`interaction_history`): unknown keys, feedback
in an unknown format and unknown output kinds are not forwarded. The counters are
checked against the calls (``checks`` in the JSON). The unattempted suffix of a chunk
was never executed; it is not uncertain. Which vector a rejection refused is not
recorded, so none is singled out.

>>> import tempfile
>>> path = Path(tempfile.mkdtemp()) / "e.json"
>>> _ = path.write_text(json.dumps({"schema": SCHEMA, "episode_id": "e", "calls": [
...     {"call": 0, "step": 0, "output": {"kind": "chunk", "chunk": [[0.0], [1.0]]},
...      "controls": [{"step": 0, "action": [0.0]}], "secret": "x"}],
...     "counters": {"policy_calls": 1, "decisions": 1, "controls": 1, "rejections": 0}}))
>>> data = interaction_history(path)
>>> data["calls"][0]["unattempted"], "secret" in data["calls"][0], data["checks"]
([[1.0]], False, [])
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from workbench.runtime.episode import CAMERA_PREFIX

SCHEMA = "workbench.interactions/v1"
PIXELS_NOTE = ("Pixels are not included: each observation is listed by its feature names, "
               "shapes and dtypes only.")
COUNTERS = ("policy_calls", "decisions", "controls", "rejections")

CSS = """body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.4em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.num{text-align:right}.warn{color:#a60}.note{color:#555}
section.call{border:1px solid #bbb;border-radius:4px;padding:.2em 1em;margin:.6em 0}
h3{font-size:100%;margin:.4em 0}
code{font-size:90%}
figure.video{display:inline-block;margin:.4em}figure.video video{width:320px;background:#000}
img.poster{width:96px;image-rendering:pixelated}figure.chart{margin:.4em 0}"""


def interaction_history(source: str | os.PathLike) -> dict[str, Any]:
    """The allowlisted content of one interaction file, plus ``checks``: the ways its
    counters disagree with its calls (empty when they agree). Raises ``ValueError`` for
    a file that is not JSON or not ``workbench.interactions/v1``."""
    raw = json.loads(Path(source).read_text())
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        found = raw.get("schema") if isinstance(raw, dict) else type(raw).__name__
        raise ValueError(f"{source} is not an interaction file ({SCHEMA}); schema {found!r}")
    data = {"schema": SCHEMA, **{key: _text(raw.get(key)) for key in
                                 ("episode_id", "run_id", "task", "instruction")},
            "action": _action(_dict(raw.get("action"))),
            "calls": [_call(c) for c in _list(raw.get("calls")) if isinstance(c, dict)],
            "termination": _termination(_dict(raw.get("termination"))),
            "counters": {key: _int(_dict(raw.get("counters")).get(key)) for key in COUNTERS}}
    data["checks"] = history_checks(data)
    return data


def history_checks(data: dict[str, Any]) -> list[str]:
    """Where the counters (and the termination's steps) disagree with the calls."""
    calls, counters = data["calls"], data["counters"]
    measured = {"policy_calls": len(calls),
                "decisions": sum(bool(c["controls"]) for c in calls),
                "controls": sum(len(c["controls"]) for c in calls),
                "rejections": sum(c["rejection"] is not None for c in calls)}
    problems = [f"counters say {counters[k]} {k}, the calls show {v}"
                for k, v in measured.items() if counters[k] != v]
    steps = data["termination"]["steps"]
    if steps is not None and steps != measured["controls"]:
        problems.append(f"termination says {steps} steps, the calls show "
                        f"{measured['controls']} controls")
    return problems


def write_interaction_history(source: str | os.PathLike,
                              out_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """Write ``<name>.json`` (allowlisted) and ``<name>.html`` for the interaction file
    ``source`` into ``out_dir`` (default: a ``history`` folder beside ``source``; never
    ``source``'s own folder, whose file it would overwrite); returns both paths."""
    source = Path(source)
    out = Path(out_dir) if out_dir is not None else source.parent / "history"
    json_path, html_path = out / f"{source.stem}.json", out / f"{source.stem}.html"
    if json_path.resolve() == source.resolve():
        raise ValueError(f"writing the history into {out} would overwrite the interaction "
                         f"file {source}; choose another out_dir")
    data = interaction_history(source)
    out.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=1))
    html_path.write_text(history_html(data))
    return json_path, html_path


def write_histories(results: pd.DataFrame, out_dir: str | os.PathLike) -> dict[str, Path]:
    """One history page per episode of ``results`` with a readable ``interactions_path``.

    Returns {interactions_path as recorded: HTML page}. An episode without the column,
    with a NULL path, or whose file is missing or unreadable gets no page.
    """
    if "interactions_path" not in results:
        return {}
    pages = {}
    for recorded in results["interactions_path"].dropna().unique():
        try:
            pages[str(recorded)] = write_interaction_history(recorded, out_dir)[1]
        except (OSError, ValueError):
            continue
    return pages


# -- allowlisting ---------------------------------------------------------------


def _call(raw: dict[str, Any]) -> dict[str, Any]:
    output = _output(_dict(raw.get("output")))
    controls = [{"step": _int(c.get("step")), "action": _floats(c.get("action"))}
                for c in _list(raw.get("controls")) if isinstance(c, dict)]
    return {"call": _int(raw.get("call")), "step": _int(raw.get("step")),
            "observation": _observation(_dict(raw.get("observation"))),
            "feedback": _feedback(raw.get("feedback")), "output": output,
            "controls": controls, "unattempted": output.get("chunk", [])[len(controls):],
            "rejection": _text(raw.get("rejection"))}


def _observation(raw: dict[str, Any]) -> dict[str, Any]:
    features = {str(name): {"dtype": _text(spec.get("dtype")),
                            "shape": [_int(n) for n in _list(spec.get("shape"))]}
                for name, spec in _dict(raw.get("features")).items() if isinstance(spec, dict)}
    return {"features": features, "pixels_included": raw.get("pixels_included") is True,
            "cameras": [n[len(CAMERA_PREFIX):] for n in features if n.startswith(CAMERA_PREFIX)]}


def _output(raw: dict[str, Any]) -> dict[str, Any]:
    kind = raw.get("kind")
    if kind == "chunk":
        return {"kind": "chunk", "chunk": [_floats(a) for a in _list(raw.get("chunk"))]}
    if kind == "stop":
        return {"kind": "stop", "reason": _text(raw.get("reason"))}
    if kind == "error":
        return {"kind": "error", "message": _text(raw.get("message"))}
    return {"kind": "unknown"}


def _feedback(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return "(feedback in an unknown format, not shown)"


def _action(raw: dict[str, Any]) -> dict[str, Any]:
    bounds = {k: None if raw.get(k) is None else _floats(raw.get(k)) for k in ("low", "high")}
    return {"dim": _int(raw.get("dim")), "dtype": _text(raw.get("dtype")), **bounds,
            "meaning": _text(raw.get("meaning"))}


def _termination(raw: dict[str, Any]) -> dict[str, Any]:
    error = raw.get("error")
    return {"reason": _text(raw.get("reason")),
            "success": None if raw.get("success") is None else raw.get("success") is True,
            "terminal_step": _int(raw.get("terminal_step")), "steps": _int(raw.get("steps")),
            "error": None if not isinstance(error, dict) else
            {"kind": _text(error.get("kind")), "message": _text(error.get("message"))}}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


NON_FINITE = ("nan", "inf", "-inf")
"""How the runtime writes non-finite numbers (JSON has none)."""


def _floats(value: Any) -> list[float | str | None]:
    """A vector's numbers; a non-finite one as its string, anything else as None (so
    positions are kept)."""
    return [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
            else v if v in NON_FINITE else None for v in _list(value)]


# -- HTML -----------------------------------------------------------------------


def esc(value: Any) -> str:
    """Text for an HTML page: ``None`` as an em dash, everything else escaped."""
    return "&mdash;" if value is None else html.escape(str(value))


def html_page(title: str, body: str) -> str:
    """A standalone page: inline CSS, no scripts, no external resources."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>")


def html_table(table_id: str, header: Iterable[str],
               rows: Iterable[tuple[dict[str, str], Iterable[tuple[str, str]]]]) -> str:
    """A table: ``header`` is escaped (no header row when empty); each row is
    (attributes, [(css class, cell HTML)]) whose cells the caller has escaped."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    head = f"<tr>{head}</tr>" if head else ""
    body = "".join(
        "<tr" + "".join(f" {k}='{esc(v)}'" for k, v in attrs.items()) + ">"
        + "".join(f"<td class='{cls}'>{cell}</td>" for cls, cell in cells) + "</tr>"
        for attrs, cells in rows)
    return f"<table id='{esc(table_id)}'>{head}{body}</table>"


def history_html(data: dict[str, Any]) -> str:
    """The page of :func:`interaction_history`'s data."""
    return html_page(f"interaction history {data['episode_id']}", history_body(data))


def history_body(data: dict[str, Any], prefix: str = "", heading: str = "h1") -> str:
    """The page's content without the page around it, to place in another page: its
    tables' ids start with ``prefix``, its title is a ``heading`` (its sections one
    level below)."""
    cameras = sorted({c for call in data["calls"] for c in call["observation"]["cameras"]})
    sub = f"h{int(heading[1]) + 1}"
    body = (f"<{heading}>Interaction history</{heading}><p>episode "
            f"<code>{esc(data['episode_id'])}</code> "
            f"&middot; run <code>{esc(data['run_id'])}</code> &middot; task "
            f"{esc(data['task'])}</p><p>instruction: {esc(data['instruction'])}</p>"
            f"<p class='pixels'>{PIXELS_NOTE} Cameras: "
            f"{esc(', '.join(cameras) or 'none')}.</p>"
            f"<{sub}>Action</{sub}>{_action_table(data['action'], prefix)}"
            f"<{sub}>Termination</{sub}>{_termination_table(data['termination'], prefix)}"
            f"<{sub}>Counters</{sub}>{_counter_table(data, prefix)}"
            f"<{sub}>Policy calls</{sub}><p class='note'>Unattempted actions were proposed but "
            f"never executed (not uncertain). A rejection refused an action before execution; "
            f"which vector it refused is not recorded.</p>"
            + "".join(_call_html(c, prefix) for c in data["calls"]))
    return body


def _action_table(action: dict[str, Any], prefix: str = "") -> str:
    return html_table(f"{prefix}action", ["dim", "dtype", "low", "high", "meaning"], [({}, [
        ("num", esc(action["dim"])), ("", esc(action["dtype"])),
        ("", esc(_vector(action["low"]))), ("", esc(_vector(action["high"]))),
        ("", esc(action["meaning"]))])])


def _termination_table(term: dict[str, Any], prefix: str = "") -> str:
    error = term["error"]
    return html_table(f"{prefix}termination",
                      ["reason", "success", "terminal step", "steps", "error"],
                      [({}, [("reason", esc(term["reason"])), ("success", esc(term["success"])),
                             ("num terminal_step", esc(term["terminal_step"])),
                             ("num steps", esc(term["steps"])),
                             ("error", esc(None if error is None else
                                           f"{error['kind']}: {error['message']}"))])])


def _counter_table(data: dict[str, Any], prefix: str = "") -> str:
    counters = data["counters"]
    table = html_table(f"{prefix}counters", [k.replace("_", " ") for k in COUNTERS],
                       [({}, [(f"num {k}", esc(counters[k])) for k in COUNTERS])])
    if not data["checks"]:
        return table + "<p class='note checks'>The counters agree with the calls below.</p>"
    return table + "".join(f"<p class='warn checks'>{esc(p)}</p>" for p in data["checks"])


def _call_html(call: dict[str, Any], prefix: str = "") -> str:
    obs = call["observation"]
    features = "; ".join(f"<code>{esc(name)}</code> {esc(spec['dtype'])} {esc(spec['shape'])}"
                         for name, spec in obs["features"].items()) or "no features"
    feedback = ("" if call["feedback"] is None else
                f"<p class='feedback'>feedback handed with this call: {esc(call['feedback'])}</p>")
    rejection = ("" if call["rejection"] is None else
                 f"<p class='rejection warn'>rejected: {esc(call['rejection'])}</p>")
    return (f"<section class='call' data-call='{esc(call['call'])}'><h3>call "
            f"{esc(call['call'])} at step {esc(call['step'])}</h3><p class='observation'>"
            f"observation handed to the policy (pixels not included): {features}</p>"
            f"{feedback}{_output_html(call, prefix)}{rejection}</section>")


def _output_html(call: dict[str, Any], prefix: str = "") -> str:
    output, controls = call["output"], call["controls"]
    if output["kind"] == "stop":
        return f"<p class='output'>stopped: {esc(output['reason'])}</p>"
    if output["kind"] == "error":
        return f"<p class='output warn'>error: {esc(output['message'])}</p>"
    if output["kind"] != "chunk":
        return "<p class='output'>output of an unknown kind (not shown)</p>"
    chunk = output["chunk"]
    rows = [({"class": "executed" if i < len(controls) else "unattempted"},
             [("num", str(i)), ("", esc(_vector(action))), ("", _fate(controls, i))])
            for i, action in enumerate(chunk)]
    summary = (f"<p class='output'>proposed a chunk of {len(chunk)}: {len(controls)} executed, "
               f"{len(call['unattempted'])} unattempted</p>")
    return summary + html_table(f"{prefix}chunk-{call['call']}", ["#", "proposed", "executed"],
                                rows)


def _fate(controls: list[dict[str, Any]], index: int) -> str:
    if index >= len(controls):
        return "unattempted"
    control = controls[index]
    return f"at step {esc(control['step'])}: {esc(_vector(control['action']))}"


def _vector(values: list[float | str | None] | None) -> str | None:
    if values is None:
        return None
    return "[" + ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in values) + "]"
