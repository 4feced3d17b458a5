"""Hypothesis fuzzing of the config: every key, including each section's, with values of
the wrong type, NaN, infinities, huge, negative, empty, unicode and nested, through the
real ``workbench eval`` command line (``workbench.cli.main``, in this process).

Whether a value is valid is decided here, from the documented rules (README, the config
classes' docstrings: types, ranges, choices), never by asking the config. A value the
rules allow must load (it is not run); any other must be refused with exit 2 and one
stderr line naming the key, no traceback, and no records file written.
"""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tally import note

from workbench.benchmarks.metaworld import MetaWorldAdapter
from workbench.cli import main
from workbench.config import load_config

BASE = {"benchmark": "metaworld", "suite": "MT1:reach-v3", "policy": "zero", "episodes": 1,
        "max_steps": 1, "image_size": 16, "progress": False}
EXAMPLES = 1000
SET_EXAMPLES = 300
SUITES = MetaWorldAdapter.list_suites()
TASKS = MetaWorldAdapter.suite_tasks("MT1:reach-v3")


def is_int(v: Any, low: int, high: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def is_num(v: Any, low: float, high: float) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and low <= v <= high


def optional(rule: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or rule(v)


def is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


DAY = 86_400
RULES: dict[str, Callable[[Any], bool]] = {
    # what runs
    "benchmark": lambda v: v == "metaworld",
    "suite": lambda v: v in SUITES and v == "MT1:reach-v3",  # tasks are reach-v3's below
    "policy": lambda v: v == "zero",
    "tasks": lambda v: v is None or (isinstance(v, list) and 0 < len(v) == len(set(
        map(str, v))) and all(isinstance(t, str) and t in TASKS for t in v)),
    "episodes": lambda v: is_int(v, 1, 50),  # MetaWorld's 50 initial states per task
    "max_steps": optional(lambda v: is_int(v, 1, 10_000_000)),
    "max_policy_calls": optional(lambda v: is_int(v, 1, 10_000_000)),
    "policy_call_timeout_s": optional(lambda v: is_num(v, 0.001, DAY)),
    "invalid_actions": lambda v: v in ("fail", "feedback") and isinstance(v, str),
    "policy_options": lambda v: v == {},  # ZeroPolicy takes no options
    "benchmark_options": lambda v: v == {},  # MetaWorld's take none beyond the top level's
    "seed": lambda v: is_int(v, 0, 2**32 - 1),
    "image_size": lambda v: is_int(v, 16, 2048),
    # how and where it runs
    "output_dir": lambda v: is_str(v) and "\x00" not in v and len(v) <= 4096
    and not Path(v).is_file(),
    "run_id": lambda v: v is None or (isinstance(v, str) and 0 < len(v) <= 128
                                      and v[0].isascii() and v[0].isalnum()
                                      and all(c.isascii() and (c.isalnum() or c in "._:@+=-")
                                              for c in v)),
    "video": lambda v: isinstance(v, bool) or v in ("off", "all") or is_int(v, 0, 10**400),
    "interactions": lambda v: isinstance(v, bool),
    "device": lambda v: isinstance(v, str) and (v in ("cpu", "cuda") or (
        v.startswith("cuda:") and v[5:].isdigit())),
    "progress": lambda v: isinstance(v, bool),
    "backend": lambda v: v in ("sequential", "pool", "ray") and isinstance(v, str),
    "observe": lambda v: v is None or (isinstance(v, str) and v in ("every_step",
                                                                     "chunk_boundary")),
    "warm_up": lambda v: isinstance(v, bool),
    "shards": lambda v: is_int(v, 1, 100_000),
    "shard": lambda v: v == 0 and not isinstance(v, bool),  # of shards 1
    "pool.workers": lambda v: is_int(v, 1, 1024),
    "pool.replicas": lambda v: is_int(v, 1, 256),
    "pool.max_batch": optional(lambda v: is_int(v, 1, 4096)),
    "pool.max_wait_ms": lambda v: is_num(v, 0, 60_000),
    # 1 to 64, more than 1 with the pool backend only (the base runs sequential)
    "pool.envs_per_worker": lambda v: v == 1 and not isinstance(v, bool),
    "search.enabled": lambda v: isinstance(v, bool),
    "search.probe_episodes": lambda v: is_int(v, 1, 100_000),
    "search.probe_max_steps": optional(lambda v: is_int(v, 1, 10_000_000)),
    "search.probe_time_limit_s": lambda v: is_num(v, 0, DAY),
    "search.success_fraction": lambda v: is_num(v, 0, 1),
    "search.min_gain": lambda v: is_num(v, 0, 100),
    "search.memory_reserve_gib": lambda v: is_num(v, 0, 1e6),
    "search.max_workers": optional(lambda v: is_int(v, 1, 1024)),
    "search.max_replicas": optional(lambda v: is_int(v, 1, 256)),
    "search.worker_candidates": lambda v: isinstance(v, list) and len(v) > 0 and all(
        is_int(w, 1, 1024) for w in v),
    "ray.address": optional(is_str),
    "ray.shards": lambda v: is_int(v, 1, 4096),
    "ray.cpus_per_shard": optional(lambda v: is_num(v, 0, 4096)),
    "ray.gpus_per_replica": optional(lambda v: is_num(v, 0, 64)),
    "ray.start_timeout_s": lambda v: is_num(v, 0, DAY),
    "service.url": optional(lambda v: isinstance(v, str) and v.startswith(("ws://",
                                                                          "wss://"))),
    "service.token_env": is_str,
    "service.timeout_s": lambda v: is_num(v, 0.1, DAY),
}

scalars = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 10**30, 2**64, 2**63, 2**32, -1, -10**9,
                     0, 1, 0.5, -0.0, 1e308, 1e-300, "", " ", "é☃\u202e", "\x00", "0", "true",
                     "null", "off", "all", "cpu", "cuda:0", "ws://", "x" * 5000, True, False,
                     None, [], {}, [1], {"a": 1}, [[1]], ["reach-v3", "reach-v3"],
                     ["reach-v3"], "MT1:reach-v3", "MT10"]),
    st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=2)),
    max_leaves=4)


def eval_line(path: Path, *extra: str) -> tuple[int, str, str]:
    """``workbench eval path *extra`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["eval", str(path), *extra])
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - a traceback is what this test finds
            import traceback

            traceback.print_exception(exc, file=err)
            rc = -1
    return rc, out.getvalue(), err.getvalue()


def with_key(key: str, value: Any) -> dict[str, Any]:
    config = dict(BASE)
    if "." in key:
        section, name = key.split(".")
        config[section] = {name: value}
    else:
        config[key] = value
    return config


def test_every_key_is_covered_by_a_rule():
    from workbench.config import SECTIONS, EvalConfig

    keys = {f for f in EvalConfig.__dataclass_fields__ if f not in SECTIONS}
    keys |= {f"{s}.{f}" for s, cls in SECTIONS.items() for f in cls.__dataclass_fields__}
    assert keys == set(RULES), (keys - set(RULES), set(RULES) - keys)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_no_value_of_any_key_crashes_eval_or_is_taken_against_the_rules(tmp_path_factory):
    tried: dict[str, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(key=st.sampled_from(sorted(RULES)), value=values)
    def fuzz(key: str, value: Any) -> None:
        folder = tmp_path_factory.mktemp("fuzz")
        config = with_key(key, value)
        if key != "output_dir":
            config["output_dir"] = str(folder / "out")
        path = folder / "config.yaml"
        path.write_text(yaml.safe_dump(config, allow_unicode=True))
        value = yaml.safe_load(path.read_text())[key.split(".")[0]]  # as YAML hands it over
        value = value[key.split(".")[1]] if "." in key else value
        what = f"config {key} = {value!r}"[:160]
        tried[key] = tried.get(key, 0) + 1
        if RULES[key](value):  # allowed: it must load (it is not run here)
            try:
                load_config(path)
            except ValueError as exc:
                note(what, "not one line")
                raise AssertionError(f"{what} is allowed by the rules, refused: {exc}")
            note(what, "accepted as documented")
            return
        rc, out, err = eval_line(path)
        lines = [line for line in err.splitlines() if line.strip()]
        records = any(Path(folder).rglob("records.sqlite")) or (
            isinstance(value, str) and key == "output_dir" and Path(value).exists())
        kind = ("traceback" if rc == -1 or "Traceback" in err else
                "silently accepted" if rc == 0 else
                "records lost" if records else
                "not one line" if rc != 2 or len(lines) != 1 else "clean refusal")
        note(what, kind)
        assert kind == "clean refusal", (what, rc, err[-2000:])
        leaf = key.split(".")[-1]
        assert leaf in lines[0] or key.split(".")[0] in lines[0], (what, lines[0])

    fuzz()
    assert set(tried) == set(RULES), set(RULES) - set(tried)  # every key was tried


def outcome_kind(rc: int, err: str, folder: Path) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    return ("traceback" if rc == -1 or "Traceback" in err else
            "silently accepted" if rc == 0 else
            "records lost" if any(folder.rglob("records.sqlite")) else
            "not one line" if rc != 2 or len(lines) != 1 else "clean refusal")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_any_text_after_set_is_one_clean_refusal_or_allowed(tmp_path_factory):
    """``--set KEY=TEXT`` with any text (YAML that does not parse, unicode, control
    characters): the value YAML reads from it obeys the same rules."""
    folder = tmp_path_factory.mktemp("set")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(BASE | {"output_dir": str(folder / "out")}))

    @settings(max_examples=SET_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(key=st.sampled_from(sorted(RULES)), text=st.one_of(
        st.text(max_size=16), st.sampled_from(["[", "{a: [", "!!python/object:os.system",
                                                "&a [*a]", "'", "- - -", ".nan", "-.inf",
                                                "1e999", "0x10", "~", "*undefined"])))
    def fuzz(key: str, text: str) -> None:
        what = f"--set {key}={text!r}"
        try:
            value = yaml.safe_load(text)
            allowed = RULES[key](value) and key != "output_dir"
        except yaml.YAMLError:
            allowed = False
        if allowed:
            note(what, "accepted as documented")
            return
        if key == "output_dir":  # never write a fuzzed folder into the checkout
            return
        rc, out, err = eval_line(path, "--set", f"{key}={text}")
        kind = outcome_kind(rc, err, folder)
        note(what, kind)
        assert kind == "clean refusal", (what, rc, err[-2000:])

    fuzz()
