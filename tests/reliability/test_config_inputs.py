"""The config findings of the single-attempt issue, each through ``workbench eval``
(in this process): one stderr line naming what was wrong, exit 2, no records created.
The values of every key are fuzzed in test_config_fuzz; these are the inputs that are
not a single key's value (the file itself, YAML aliases) or that need a file beside."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tally import note
from test_config_fuzz import BASE, eval_line, outcome_kind


def bomb(levels: int = 9) -> str:
    """A YAML file of a few hundred bytes whose aliases expand to 10**levels values."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


CASES = {
    "the config path is a folder": (lambda d: d, "is a folder"),
    "YAML aliases expanding to a billion values": (
        lambda d: _write(d, bomb()), "aliases"),
    "a config file over 1 MiB": (lambda d: _write(d, "# " + "x" * (1 << 20) + "\n"),
                                 "holds at most"),
    "a config that is not a mapping": (lambda d: _write(d, "- just\n- a list\n"), "mapping"),
    "output_dir is a file": (
        lambda d: _config(d, output_dir=str(_write(d, "x", "taken"))), "is a file"),
    "benchmark_options sets the seed": (
        lambda d: _config(d, benchmark_options={"seed": 3}), "benchmark_options.seed"),
    "a task named twice": (lambda d: _config(d, tasks=["reach-v3", "reach-v3"]),
                           "more than once"),
    "a run id that walks out of its folder": (lambda d: _config(d, run_id="../escape"),
                                              "run_id"),
    "episodes past MetaWorld's initial states": (lambda d: _config(d, episodes=51),
                                                 "at most 50"),
    "seed 2**32": (lambda d: _config(d, seed=2**32), "seed"),
    "max_wait_ms of a billion": (lambda d: _config(d, pool={"max_wait_ms": 1e9}),
                                 "pool.max_wait_ms"),
    "image_size 4096": (lambda d: _config(d, image_size=4096), "image_size"),
    "policy_call_timeout_s NaN": (lambda d: _config(d, policy_call_timeout_s=float("nan")),
                                  "policy_call_timeout_s"),
}


def _write(folder: Path, text: str, name: str = "config.yaml") -> Path:
    (folder / name).write_text(text)
    return folder / name


def _config(folder: Path, **changes) -> Path:
    config = BASE | {"output_dir": str(folder / "out")} | changes
    return _write(folder, yaml.safe_dump(config))


@pytest.mark.parametrize("what", list(CASES))
def test_each_input_is_one_line_exit_2_and_nothing_recorded(tmp_path, what):
    make, says = CASES[what]
    rc, out, err = eval_line(make(tmp_path))
    kind = outcome_kind(rc, err, tmp_path)
    note(f"config: {what}", kind)
    assert kind == "clean refusal", (what, rc, err[-2000:])
    assert says in err, (what, err)
    assert len(err) < 600, (what, len(err))  # the echo is bounded
