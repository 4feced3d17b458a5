"""The ``workbench`` command line: ``eval``, ``results``, ``report``, ``campaign``,
``serve``, ``serve-policy``, ``benchmarks`` and ``reproduce``.

Errors in what the user gave (a bad config, a missing file, a policy that does not fit
the benchmark) print one clear line to stderr and exit with status 2; they never print
a traceback. Headless rendering (``MUJOCO_GL=egl`` unless set) is chosen at start-up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from workbench.contracts.results import PolicyLoadFailed
from workbench.contracts.wire import MAX_FRAME_BYTES
from workbench.errors import ConfigError


def _parse_set(items: Sequence[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE (KEY may be pool.workers); got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            problem = " ".join(str(exc).split())[:160]
            raise ConfigError(f"--set {key[:80]}: not a YAML value: {value[:80]!r} "
                              f"({problem})") from None
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.config import load_config
    from workbench.contracts.results import summarize
    from workbench.reports.run_report import report_from_records
    from workbench.runner import run
    from workbench.runtime.search import format_search

    overrides = _parse_set(args.set)
    if args.backend is not None:
        overrides["backend"] = args.backend
    if args.address is not None:
        overrides["ray.address"] = args.address
    result = run(load_config(args.config, overrides, "--set"))
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        for found in result.searches:
            print(format_search(found))
        print(summarize(result.results).to_string(index=False))
    _, page = report_from_records(result.records_path, result.run_id, result.output_dir)
    print(f"records: {result.records_path} (run {result.run_id}); report: {page}")
    if not result.report.complete:
        left = int((result.results["status"] == "planned").sum())
        print(f"workbench eval: stopped before the plan was done: "
              f"{result.report.failures[0] if result.report.failures else 'incomplete'}; "
              f"{left} planned cases not attempted (run the same command to resume)",
              file=sys.stderr)
        return 1
    return 0


def _say_problems(command: str, db: str, problems: Sequence[str]) -> int:
    """Each problem of a records file on its own stderr line; 1 when there were any."""
    for problem in problems:
        print(f"workbench {command}: records file {db}: {problem}", file=sys.stderr)
    return 1 if problems else 0


def cmd_results(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.contracts.results import summarize
    from workbench.records.store import RecordStore, read_records

    results, problems = read_records(args.db, args.run)
    if args.json:
        store = RecordStore(args.db, readonly=True)
        try:
            for row in store.iter_json(args.run):
                print(json.dumps(row))
        finally:
            store.close()
    elif len(results):
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(summarize(results).to_string(index=False))
        open_cases = int((~results["status"].eq("finished")).sum())
        if open_cases:
            print(f"{open_cases} of {len(results)} planned episodes not finished yet "
                  "(planned or in flight): the episodes column counts the plan")
    else:
        print(f"no episodes recorded in {args.db}"
              + (f" for run {args.run!r}" if args.run else ""))
    return _say_problems("results", args.db, problems)


def cmd_report(args: argparse.Namespace) -> int:
    from workbench.reports.run_report import report_from_records

    json_path, html_path = report_from_records(args.db, args.run, args.out,
                                               self_contained=args.self_contained)
    print(f"{json_path}\n{html_path}")
    problems = json.loads(Path(json_path).read_text()).get("problems") or []
    return _say_problems("report", args.db, problems)


def _campaign_status_text(campaign) -> str:
    return (f"campaign {campaign.campaign_id} ({campaign.folder})\n"
            + campaign.status().to_string(index=False))


def cmd_campaign(args: argparse.Namespace) -> int:
    from workbench.campaigns import create_campaign, open_campaign

    if args.action == "create":
        from workbench.config import load_config

        campaign = create_campaign(load_config(args.target, _parse_set(args.set), "--set"),
                                   args.id)
        print(f"created campaign {campaign.campaign_id}: {len(campaign.manifest['cases'])} "
              f"cases frozen in {campaign.records_path}")
        return 0
    campaign = open_campaign(args.target)
    if args.action == "run":
        overrides = {k: v for k, v in _parse_set(args.set).items()}
        nested: dict = {}
        for key, value in overrides.items():
            head, _, rest = key.partition(".")
            if rest:
                nested.setdefault(head, {})[rest] = value
            else:
                nested[key] = value
        result = campaign.run(retry=args.retry, reason=args.reason, **nested)
        print(_campaign_status_text(campaign))
        for problem in result.report.failures:
            print(f"stopped: {problem}", file=sys.stderr)
        return 0 if result.report.complete else 1
    if args.action == "status":
        if args.json:
            print(campaign.status().to_json(orient="records"))
        else:
            print(_campaign_status_text(campaign))
        return 0
    json_path, html_path = campaign.report(args.out, self_contained=args.self_contained)
    print(f"{json_path}\n{html_path}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import os
    import signal
    import threading

    from workbench.service.sim_server import build_service

    token = os.environ.get("WORKBENCH_SIM_TOKEN") or None
    state_dir = Path(args.state_dir)
    if state_dir.exists() and not state_dir.is_dir():
        raise ConfigError(f"--state-dir {state_dir} is a file, not a folder")
    service = build_service(args.benchmark, args.suite, args.tasks, args.episodes, args.seed,
                            args.image_size, args.max_steps, token=token, host=args.host,
                            port=args.port, slots=args.slots, video=args.video_dir is not None,
                            artifacts_dir=args.video_dir, idle_timeout_s=args.idle_timeout,
                            state_path=str(state_dir / "service.sqlite"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        service.start()
    except OSError as exc:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: "
                          f"{exc.strerror or exc}") from None
    token_file = Path(args.token_file) if args.token_file else state_dir / "token"
    if not token:  # a secret of its own: readable by this user only, never printed
        token_file.parent.mkdir(parents=True, exist_ok=True)
        token_file.unlink(missing_ok=True)
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(service.token)
    shown = service.token if args.show_token else (
        "from $WORKBENCH_SIM_TOKEN" if token else f"in {token_file} (mode 0600)")
    print(f"serving {service.benchmark} {service.suite} ({len(service.schedule)} cases) at "
          f"{service.url}; admin token {shown}; case states in {service.state_path}",
          flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        service.close()
    return 0


def cmd_serve_policy(args: argparse.Namespace) -> int:
    from workbench.service.policy_server import run_policy_server

    args.options = _parse_set(args.set)
    if args.keys is not None:
        try:
            args.keys = yaml.safe_load(args.keys)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--keys: not a YAML map: {exc}") from None
    return run_policy_server(args)


def cmd_benchmarks(args: argparse.Namespace) -> int:
    from workbench.service.routes import routes, routes_markdown

    table = routes()
    if args.markdown:
        print(routes_markdown(table))
    else:
        with __import__("pandas").option_context("display.width", 200,
                                                 "display.max_colwidth", 60):
            print(table.drop(columns=["adapter", "detail"]).to_string(index=False))
            for row in table.itertuples():
                if row.status not in ("runnable", "no adapter"):
                    print(f"{row.family}: {row.detail}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from workbench.reproduce import reproduce

    if args.quick and args.full:
        raise ConfigError("--quick and --full exclude each other")
    table = reproduce(quick=args.quick, notebooks=args.notebooks or None,
                      figures=args.figures, out=args.out, tier="full" if args.full else None)
    shown = table[["notebook", "status", "seconds", "figures"]]
    print(shown.to_string(index=False, formatters={"seconds": "{:.1f}".format}))
    print(f"figures and the numbers behind them: {Path(args.figures).resolve()}\n"
          f"executed notebooks and their logs: {Path(args.out).resolve()}")
    return 0 if table["status"].eq("ok").all() else 1


def cmd_compare(args: argparse.Namespace) -> int:
    from workbench.comparison import compare, describe
    from workbench.config import load_config

    config = load_config(args.config, _parse_set(args.set), "--set")
    result = compare(config, args.policies, alpha=args.alpha, max_episodes=args.max_episodes,
                     metric=args.metric, round_episodes=args.round_episodes,
                     on_round=None if args.json else _print_round,
                     open_ended=args.open_ended)
    print("\n".join(result.to_json_lines()) if args.json else describe(result))
    return 0


def _print_round(round_: int, pairs: Any) -> None:
    decided = int(pairs["decided"].sum())
    print(f"round {round_ + 1}: {decided} of {len(pairs)} pairs decided", file=sys.stderr)


def cmd_check_adapter(args: argparse.Namespace) -> int:
    from workbench.checks import check_adapter

    report = check_adapter(args.benchmark, suite=args.suite, steps=args.steps,
                           **_parse_set(args.set))
    print(report.text())
    return 0 if report.passed else 1


def cmd_check_policy(args: argparse.Namespace) -> int:
    from workbench.checks import check_policy
    from workbench.contracts import get_protocol, import_target, register_protocol
    from workbench.policies import make_policy

    if ":" in args.protocol:  # an import path: the protocol object, registered here
        protocol = register_protocol(import_target(args.protocol))
    else:
        protocol = get_protocol(args.protocol)
    policy = make_policy(args.policy, protocol=protocol.name, **_parse_set(args.set))
    report = check_policy(policy, protocol, episodes=args.episodes, steps=args.steps,
                          task=args.task)
    print(report.text())
    return 0 if report.passed else 1


DESCRIPTION = """Evaluate robot policies in simulation: fast, reproducible, quality-aware.

Start with `workbench eval CONFIG`; every subcommand takes --help."""


def _add(sub: Any, name: str, summary: str, func: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=summary, description=summary)
    p.set_defaults(func=func)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = _add(sub, "eval", "Run an evaluation from a YAML config (resumes a run already "
                          "recorded) and write its report.", cmd_eval)
    p.add_argument("config", help="the YAML config file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (YAML value; pool.workers=4 sets one key of "
                        "a section); repeatable")
    p.add_argument("--backend", default=None, help="the backend (same as --set backend=...)")
    p.add_argument("--address", default=None,
                   help="the Ray cluster to join, 'auto' or HOST:PORT (same as --set "
                        "ray.address=...); without it Ray starts locally")
    p = _add(sub, "results", "Show the records of a run: a per-task table, or one JSON "
                             "object per episode.", cmd_results)
    p.add_argument("db", help="records.sqlite of a run")
    p.add_argument("--json", action="store_true", help="one JSON object per episode")
    p.add_argument("--run", default=None, help="only this run id")
    p = _add(sub, "report", "Write report.json and a report.html that stands alone for "
                            "the runs in a records file.", cmd_report)
    p.add_argument("db", help="records.sqlite of a run")
    p.add_argument("--run", default=None, help="only this run id")
    p.add_argument("--out", default=None, help="folder for the report (default: the db's)")
    p.add_argument("--self-contained", action="store_true",
                   help="embed videos, posters and interaction histories in report.html")
    p = _add(sub, "campaign", "Frozen campaigns, each case attempted once: create, run, "
                              "status, report.", cmd_campaign)
    p.add_argument("action", choices=["create", "run", "status", "report"],
                   help="what to do with the campaign")
    p.add_argument("target", help="create: a YAML config; otherwise the campaign's folder")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="create: override a config key; run: how it runs (backend, pool.*, "
                        "service.url, progress), never what it runs")
    p.add_argument("--id", default=None, help="create: the campaign id")
    p.add_argument("--retry", action="append", default=[], metavar="CASE",
                   help="run: attempt this interrupted case again (recorded)")
    p.add_argument("--reason", default=None, help="run: why the retry (recorded)")
    p.add_argument("--json", action="store_true", help="status: as JSON")
    p.add_argument("--out", default=None, help="report: folder (default: the campaign's)")
    p.add_argument("--self-contained", action="store_true",
                   help="report: embed videos, posters and histories in report.html")
    p = _add(sub, "serve", "Serve a benchmark as a SIM service (WebSocket, "
                           "workbench.sim-server/v2): a fixed schedule of cases, each "
                           "attempted once.", cmd_serve)
    p.add_argument("--benchmark", required=True,
                   help="a registered benchmark or package.module:Adapter")
    p.add_argument("--suite", required=True, help="the suite of the benchmark")
    p.add_argument("--tasks", nargs="*", default=None,
                   help="only these tasks of the suite (default: all)")
    p.add_argument("--episodes", type=int, default=1, help="cases per task in the schedule")
    p.add_argument("--seed", type=int, default=0, help="the benchmark's seed (task set)")
    p.add_argument("--image-size", type=int, default=224, help="camera resolution in pixels")
    p.add_argument("--max-steps", type=int, default=None,
                   help="cap on controls per case below the benchmark's own limit")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default loopback; 0.0.0.0 for every interface)")
    p.add_argument("--port", type=int, default=8765,
                   help="port to listen on, 1-65535 (0: any free one)")
    p.add_argument("--slots", type=int, default=1, help="sessions simulated at once")
    p.add_argument("--video-dir", default=None, help="record episode videos here")
    p.add_argument("--idle-timeout", type=float, default=300.0,
                   help="seconds a session may stay silent before it is abandoned")
    p.add_argument("--state-dir", default="runs/sim-service",
                   help="folder of the service's SQLite case states (what it already ran, "
                        "kept across restarts) and, by default, its token file")
    p.add_argument("--token-file", default=None,
                   help="where a generated admin token is written, mode 0600 (default "
                        "STATE_DIR/token; not written when $WORKBENCH_SIM_TOKEN is set)")
    p.add_argument("--show-token", action="store_true",
                   help="also print the admin token (it is never printed otherwise)")
    p = _add(sub, "serve-policy", "Serve a workbench policy on the workbench, openpi or "
                                  "vla-eval wire, batching across connections.",
             cmd_serve_policy)
    p.add_argument("policy", help="a registered policy, an entry point or "
                                  "package.module:Policy")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a policy option (YAML value); repeatable")
    p.add_argument("--protocol", default=None,
                   help="the benchmark protocol it serves (e.g. libero-v1), for a policy "
                        "that serves several")
    p.add_argument("--wire", default="workbench", choices=["workbench", "openpi", "vla-eval"],
                   help="what its clients speak (default workbench)")
    p.add_argument("--preset", default=None,
                   help="observation preset for the openpi or vla-eval wire (default: the "
                        "wire's own for the protocol, e.g. openpi/libero)")
    p.add_argument("--keys", default=None, metavar="YAML",
                   help="a key map instead of a preset: '{their_key: feature, ...}'")
    p.add_argument("--min-chunk", type=int, default=None, metavar="K",
                   help="openpi wire: repeat a chunk's last action until it holds K "
                        "(openpi's LIBERO client needs replan_steps)")
    p.add_argument("--max-batch", type=int, default=8,
                   help="most observations served in one act_batch call (default 8)")
    p.add_argument("--max-wait-ms", type=float, default=5.0,
                   help="longest a batch waits to fill (default 5)")
    p.add_argument("--call-timeout-s", type=float, default=60.0,
                   help="longest a policy call may take before it fails as the server's")
    p.add_argument("--max-connections", type=int, default=64,
                   help="connections served at once (default 64)")
    p.add_argument("--idle-timeout-s", type=float, default=300.0,
                   help="a connection silent this long is closed (default 300)")
    p.add_argument("--max-frame-bytes", type=int, default=MAX_FRAME_BYTES,
                   help=f"largest frame accepted (default {MAX_FRAME_BYTES})")
    p.add_argument("--device", default="cpu", help="where the policy runs (cpu, cuda:N)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default loopback; 0.0.0.0 for every interface)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (0: any free)")
    p = _add(sub, "benchmarks", "List each benchmark family, its protocol, suites and "
                                "whether it runs here.", cmd_benchmarks)
    p.add_argument("--markdown", action="store_true", help="as the support matrix of docs/evaluate.md")
    p = _add(sub, "compare", "Compare policies on the same episodes in rounds, each pair "
                             "with an anytime-valid test that stops when it is decided.",
             cmd_compare)
    p.add_argument("config", help="the YAML config: benchmark, suite, tasks, episodes (the "
                                  "budget per task), output_dir")
    p.add_argument("--policies", nargs="+", required=True, metavar="[LABEL=]POLICY",
                   help="two or more policies (a registered name, an entry point or "
                        "package.module:Policy), each optionally labelled")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="chance of any wrong decision, split over the pairs (default 0.05)")
    p.add_argument("--max-episodes", type=int, default=None,
                   help="paired episodes per task at most (default: the config's episodes)")
    p.add_argument("--metric", default="success", choices=["success", "progress"],
                   help="what is compared (default success)")
    p.add_argument("--round-episodes", type=int, default=1,
                   help="episodes per task in a round (default 1)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (as for eval); repeatable")
    p.add_argument("--json", action="store_true", help="one JSON object per pair")
    p.add_argument("--open-ended", action="store_true",
                   help="threshold 1/alpha, valid if the budget is extended later (default: "
                        "the exact threshold for this budget, deciding sooner)")
    p = _add(sub, "check-adapter", "Check that a benchmark adapter keeps the contracts the "
                                   "runtime relies on (exit 1 on a failed check).",
             cmd_check_adapter)
    p.add_argument("benchmark", help="a registered benchmark or package.module:Adapter")
    p.add_argument("--suite", default=None, help="the suite to build (default: its own)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an adapter option (YAML value); repeatable")
    p.add_argument("--steps", type=int, default=5, help="steps of the repeatability check")
    p = _add(sub, "check-policy", "Check that a policy keeps its lifecycle, its declared "
                                  "features and the action contract (exit 1 on a failure).",
             cmd_check_policy)
    p.add_argument("policy", help="a registered policy, an entry point or "
                                  "package.module:Policy")
    p.add_argument("--protocol", required=True,
                   help="the protocol it acts on: a name (metaworld-v1) or the import path "
                        "of a Protocol (package.module:NAME)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a policy option (YAML value); repeatable")
    p.add_argument("--task", default="check-task",
                   help="the task of its episodes (for a policy that knows its tasks)")
    p.add_argument("--episodes", type=int, default=2, help="episodes of the action check")
    p.add_argument("--steps", type=int, default=3, help="steps per episode")
    p = _add(sub, "reproduce", "Run the notebooks through papermill, writing figures and "
                               "the numbers behind them.", cmd_reproduce)
    p.add_argument("--quick", action="store_true", help="tiny parameters (experiments/tiny/)")
    p.add_argument("--full", action="store_true", help="full-scale parameters (experiments/)")
    p.add_argument("--notebooks", nargs="*", help="only these notebooks (file names)")
    p.add_argument("--figures", default="figures", help="where figures and numbers go")
    p.add_argument("--out", default="out/notebooks", help="where executed notebooks go")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from workbench.contracts.rendering import use_headless_rendering

    args = build_parser().parse_args(argv)
    use_headless_rendering()
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:  # ContractError is a ValueError
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except PolicyLoadFailed as exc:  # the run stopped before claiming an episode
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"workbench {args.command}: interrupted; finished episodes are recorded, an "
              "episode in flight will be recorded as interrupted on the next run",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
