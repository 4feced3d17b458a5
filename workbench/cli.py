"""The ``workbench`` command line: ``eval``, ``results``, ``report`` and ``reproduce``.

Errors in what the user gave (a bad config, a missing file) print one clear line to
stderr and exit with status 2; they never print a traceback.
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
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key] = yaml.safe_load(value)
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.config import load_eval_config
    from workbench.evaluate import evaluate, summarize

    from workbench.reports.run_report import write_report

    config = load_eval_config(args.config, **_parse_set(args.set))
    run = evaluate(config)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summarize(run.results).to_string(index=False))
    _, page = write_report(run.results, run.output_dir)
    print(f"records: {run.records_path} (run {run.run_id}); report: {page}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.evaluate import summarize
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
    print(table.to_string(index=False))
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
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
