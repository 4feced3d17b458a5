"""The ``workbench`` command line: ``eval``, ``results``, ``report`` and ``reproduce``.

Errors in what the user gave (a bad config, a missing file, a policy that does not fit
the benchmark) print one clear line to stderr and exit with status 2; they never print
a traceback. Headless rendering (``MUJOCO_GL=egl`` unless set) is chosen at start-up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import yaml


def _parse_set(items: Sequence[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set expects KEY=VALUE (KEY may be pool.workers), got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ValueError(f"--set {key}: not a YAML value: {value!r} ({exc})") from None
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.config import load_config
    from workbench.contracts.results import summarize
    from workbench.reports.run_report import write_report
    from workbench.runner import run

    result = run(load_config(args.config, _parse_set(args.set)))
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summarize(result.results).to_string(index=False))
    _, page = write_report(result.results, result.output_dir)
    print(f"records: {result.records_path} (run {result.run_id}); report: {page}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.contracts.results import summarize
    from workbench.records.store import RecordStore, load_results

    if args.json:
        load_results(args.db)  # refuses a missing file clearly
        store = RecordStore(args.db)
        for row in store.iter_json(args.run):
            print(json.dumps(row))
        store.close()
        return 0
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summarize(load_results(args.db, args.run)).to_string(index=False))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from workbench.records.store import load_results
    from workbench.reports.run_report import write_report

    json_path, html_path = write_report(load_results(args.db, args.run),
                                        args.out or Path(args.db).parent)
    print(f"{json_path}\n{html_path}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from workbench.reproduce import reproduce

    table = reproduce(quick=args.quick, notebooks=args.notebooks or None,
                      figures=args.figures, out=args.out)
    shown = table[["notebook", "status", "seconds", "figures"]]
    print(shown.to_string(index=False, formatters={"seconds": "{:.1f}".format}))
    print(f"figures and the numbers behind them: {Path(args.figures).resolve()}\n"
          f"executed notebooks and their logs: {Path(args.out).resolve()}")
    return 0 if table["status"].eq("ok").all() else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("eval", help="run an evaluation from a YAML config")
    p.add_argument("config")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (YAML value)")
    p.set_defaults(func=cmd_eval)
    p = sub.add_parser("results", help="show the records of a run")
    p.add_argument("db", help="records.sqlite of a run")
    p.add_argument("--json", action="store_true", help="one JSON object per episode")
    p.add_argument("--run", default=None, help="only this run id")
    p.set_defaults(func=cmd_results)
    p = sub.add_parser("report", help="write report.json and report.html for a run")
    p.add_argument("db", help="records.sqlite of a run")
    p.add_argument("--run", default=None, help="only this run id")
    p.add_argument("--out", default=None, help="folder for the report (default: the db's)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("reproduce", help="run the notebooks through papermill")
    p.add_argument("--quick", action="store_true", help="tiny parameters (experiments/tiny/)")
    p.add_argument("--notebooks", nargs="*", help="only these notebooks (file names)")
    p.add_argument("--figures", default="figures", help="where figures and numbers go")
    p.add_argument("--out", default="out/notebooks", help="where executed notebooks go")
    p.set_defaults(func=cmd_reproduce)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from workbench.contracts.rendering import use_headless_rendering

    args = build_parser().parse_args(argv)
    use_headless_rendering()
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:  # ContractError is a ValueError
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"workbench {args.command}: interrupted; finished episodes are recorded, an "
              "episode in flight will be recorded as interrupted on the next run",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
