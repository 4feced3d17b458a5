"""The `workbench` command line, run as a real process: evaluations, reports, user errors."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

PLUGINS = Path(__file__).resolve().parent / "plugins"
BASE = {"benchmark": "metaworld", "suite": "MT1:pick-place-v3", "policy": "expert",
        "episodes": 3, "progress": False}


def cli(*args, check=True, env=None, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc


def write_config(path, **overrides):
    cfg = dict(BASE, output_dir=str(path.parent / path.stem))
    cfg.update(overrides)
    path.write_text(yaml.safe_dump(cfg))
    return path


def episodes_json(db, **kw):
    return [json.loads(line) for line in cli("results", db, "--json", **kw).stdout.splitlines()]


def test_expert_solves_pick_place_three_of_three_and_is_reproducible(tmp_path):
    outcomes = []
    for name in ("a", "b"):
        proc = cli("eval", write_config(tmp_path / f"{name}.yaml"))
        assert "ALL" in proc.stdout
        rows = episodes_json(tmp_path / name / "records.sqlite")
        assert [r["success"] for r in rows] == [True, True, True]
        assert all(r["error"] is None and r["diagnostic"] for r in rows)
        assert {"task", "episode", "success", "terminal_step", "steps", "error"} <= set(rows[0])
        assert all(r["policy_calls"] == r["steps"] for r in rows)  # chunks of 1
        outcomes.append([(r["episode"], r["success"], r["terminal_step"]) for r in rows])
        report = json.loads((tmp_path / name / "report.json").read_text())
        assert report["diagnostic"] and report["summary"][-1]["successes"] == 3
        assert "Diagnostic run" in (tmp_path / name / "report.html").read_text()
    assert outcomes[0] == outcomes[1]


# Each wrong type, range or name: a one-line error naming the key, the value and what is
# allowed, exit status 2, no traceback. The type errors are refused before any simulator
# is imported.
BAD_CONFIGS = [
    ({"episodes": "three"}, r"episodes: expected an integer >= 1 and <= 100000; got 'three' "
                            r"\(str\)"),
    ({"episodes": 1.5}, r"episodes: expected an integer >= 1 and <= 100000; got 1.5 \(float\)"),
    ({"episodes": 0}, r"episodes: expected an integer >= 1 and <= 100000; got 0"),
    ({"seed": "zero"}, r"seed: expected an integer >= 0 and <= 4294967295; got 'zero'"),
    ({"image_size": True}, r"image_size: expected an integer >= 16 and <= 2048; got True \(bool\)"),
    ({"image_size": 8}, r"image_size: expected an integer >= 16 and <= 2048; got 8"),
    ({"shards": 2.0}, r"shards: expected an integer >= 1 and <= 100000; got 2.0 \(float\)"),
    ({"shards": 2, "shard": 2}, r"shard: expected an integer >= 0 and <= 1; got 2"),
    ({"pool": {"workers": "two"}}, r"pool.workers: expected an integer >= 1 and <= 1024; got 'two' \(str\)"),
    ({"pool": {"replicas": 0}}, r"pool.replicas: expected an integer >= 1 and <= 256; got 0"),
    ({"pool": {"max_batch": [4]}}, r"pool.max_batch: expected an integer >= 1 and <= 4096 or null; got \[4\]"),
    ({"pool": {"max_wait_ms": "fast"}}, r"pool.max_wait_ms: expected a finite number >= 0 and <= 60000; got 'fast'"),
    ({"pool": {"max_wait_ms": -1}}, r"pool.max_wait_ms: expected a finite number >= 0 and <= 60000; got -1"),
    ({"search": {"probe_episodes": "4"}}, r"search.probe_episodes: expected an integer >= 1"),
    ({"search": {"probe_time_limit_s": None}}, r"search.probe_time_limit_s: expected a finite number"),
    ({"search": {"success_fraction": 1.5}}, r"search.success_fraction: expected a finite number >= 0 "
                                            r"and <= 1; got 1.5"),
    ({"search": {"min_gain": "x"}}, r"search.min_gain: expected a finite number"),
    ({"search": {"memory_reserve_gib": []}}, r"search.memory_reserve_gib: expected a finite number"),
    ({"search": {"max_workers": 0}}, r"search.max_workers: expected an integer >= 1 and <= 1024 or null"),
    ({"search": {"max_replicas": "2"}}, r"search.max_replicas: expected an integer >= 1"),
    ({"search": {"worker_candidates": [1, "2"]}}, r"search.worker_candidates\[1\]: expected"),
    ({"search": "yes"}, r"search: expected a mapping of search settings; got 'yes'"),
    ({"ray": {"shards": 0}}, r"ray.shards: expected an integer >= 1 and <= 4096; got 0"),
    ({"ray": {"cpus_per_shard": "1"}}, r"ray.cpus_per_shard: expected a finite number >= 0 and <= 4096 or null"),
    ({"pool": 3}, r"pool: expected a mapping of pool settings; got 3 \(int\)"),
    ({"video": "some"}, r'video: expected "off", "all" or a count of episodes >= 0; got \'some\''),
    ({"progress": "yes"}, r"progress: expected true or false; got 'yes'"),
    ({"backend": "gpu"}, r"backend: expected one of \['sequential', 'pool', 'ray', 'service'\]; got 'gpu'"),
    ({"observe": "sometimes"}, r"observe: expected one of \['every_step', 'chunk_boundary'\]"),
    ({"device": "tpu"}, r"device: expected cpu, cuda or cuda:N; got 'tpu'"),
    ({"policy_options": [1]}, r"policy_options: expected a mapping of names to values"),
    ({"workers": 2}, r"unknown key 'workers' \(did you mean pool.workers\?\)"),
    ({"colour": "red"}, r"unknown key 'colour'; known"),
    ({"pool": {"wokers": 2}}, r"unknown key pool.wokers; known"),
    ({"benchmark": "libero9"}, r"unknown benchmark 'libero9'; registered: \['aloha', 'calvin', 'isaaclab', "
                               r"'kitchen', 'libero', 'libero-plus', 'metaworld', 'robocasa', "
                               r"'robosuite', 'robotwin'\]; or "
                               r"pass an import path 'package.module:Name'"),
    ({"suite": "MT7"}, r"suite 'MT7' is not a suite of metaworld; available: \['MT10'"),
    ({"suite": "MT10", "tasks": []}, r"tasks is empty: name at least one task of MT10"),
    ({"suite": "MT10", "tasks": ["fly-v3"]}, r"tasks \['fly-v3'\] are not tasks of suite "
                                             r"'MT10'; available: \['reach-v3'"),
    ({"policy": "oracle"}, r"unknown policy 'oracle'; registered: \['aloha-scripted', 'expert', "),
    ({"policy": "no_such_module:Policy"}, r"cannot import module 'no_such_module'"),
    ({"policy_options": {"defect": "noise", "lvl": 0.3}}, r"policy_options .* do not fit "
                                                           r"ScriptedExpert: .*'lvl'"),
    ({"policy_options": {"defect": "wobble"}}, r"unknown defect 'wobble'"),
    ({"benchmark_options": {"colour": 1}}, r"benchmark_options .* do not fit MetaWorldAdapter"),
    ({"policy": "zero", "policy_options": {"protocol": "libero-v1"}},
     r"policy emits actions for protocol 'libero-v1', but the benchmark speaks 'metaworld-v1'"),
]


@pytest.mark.parametrize("override, message", BAD_CONFIGS,
                         ids=[re.sub(r"\W+", "-", str(o)).strip("-") for o, _ in BAD_CONFIGS])
def test_bad_configs_get_one_clear_line(tmp_path, override, message):
    path = write_config(tmp_path / "c.yaml", **override)
    proc = cli("eval", path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(message, proc.stderr), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "c" / "records.sqlite").exists()  # nothing was planned


def test_bad_overrides_and_files_get_clear_errors(tmp_path):
    path = write_config(tmp_path / "c.yaml")
    for args, message in [(("eval", path, "--set", "pool.workers=two"), "pool.workers: expected"),
                          (("eval", path, "--set", "episodes"), "--set expects KEY=VALUE"),
                          (("eval", tmp_path / "none.yaml"), "no config file at"),
                          (("results", tmp_path / "none.sqlite", "--json"), "no records file")]:
        proc = cli(*args, check=False)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "broken.yaml").write_text("benchmark: [unclosed\n")
    proc = cli("eval", tmp_path / "broken.yaml", check=False)
    assert proc.returncode == 2 and "not valid YAML" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_set_typo_is_reported_as_the_set_not_as_the_file(tmp_path):
    path = write_config(tmp_path / "c.yaml")
    proc = cli("eval", path, "--set", "episdes=3", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--set episdes: unknown key 'episdes' (did you mean 'episodes'?)" in proc.stderr
    assert str(path) not in proc.stderr, "the file holds no typo"
    proc = cli("eval", path, "--set", "wokers.x=3", check=False)
    assert "--set wokers.x: unknown key 'wokers'" in proc.stderr
    assert not (tmp_path / "c" / "records.sqlite").exists()


def _own_policy_env(path_entries):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path_entries)
    return env


def test_a_policy_from_a_module_on_pythonpath_runs_in_pool_mode(tmp_path):
    lab = tmp_path / "lab"
    lab.mkdir()
    shutil.copy(PLUGINS / "wb_plugin" / "policies.py", lab / "my_lab_policies.py")
    path = write_config(tmp_path / "own.yaml", suite="MT10", tasks=["reach-v3", "push-v3"],
                        episodes=2, policy="my_lab_policies:ResidualExpert", backend="pool",
                        pool={"workers": 2, "replicas": 1}, image_size=32)
    cli("eval", path, env=_own_policy_env([lab]), cwd=tmp_path)
    rows = episodes_json(tmp_path / "own" / "records.sqlite", env=_own_policy_env([lab]))
    assert len(rows) == 4 and all(r["error"] is None for r in rows)
    assert {r["policy"] for r in rows} == {"residual-expert"}
    assert {r["worker"] for r in rows} == {"worker-0", "worker-1"}  # two pool workers ran it


def install_plugin(tmp_path):
    """tests/plugins installed as a package (wb-plugin) into a folder of its own; the
    folder, for PYTHONPATH."""
    site, source = tmp_path / "site", tmp_path / "wb-plugin"
    shutil.copytree(PLUGINS, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info",
                                                                  "helper_policies.py"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "--target",
                    str(site), str(source)], check=True, capture_output=True, timeout=300,
                   cwd=tmp_path)
    return site


def test_a_policy_registered_by_an_installed_entry_point_runs_in_pool_mode(tmp_path):
    site = install_plugin(tmp_path)
    assert list(site.glob("wb_plugin-*.dist-info/entry_points.txt"))
    env = _own_policy_env([site])
    path = write_config(tmp_path / "ep.yaml", suite="MT10", tasks=["reach-v3", "push-v3"],
                        episodes=2, policy="residual-expert", backend="pool",
                        pool={"workers": 2, "replicas": 1}, image_size=32)
    cli("eval", path, env=env, cwd=tmp_path)
    rows = episodes_json(tmp_path / "ep" / "records.sqlite", env=env)
    assert len(rows) == 4 and all(r["error"] is None for r in rows)
    assert {r["policy"] for r in rows} == {"residual-expert"}
    assert {r["worker"] for r in rows} == {"worker-0", "worker-1"}
    proc = cli("eval", write_config(tmp_path / "typo.yaml", policy="residual-expert2"),
               check=False, env=env)
    assert proc.returncode == 2
    assert ("registered: ['aloha-scripted', 'expert', 'expert-mlp-cost', 'expert-vision-cost', "
            "'kitchen-light-slide', "
            "'libero-close-drawer', 'openpi', 'remote', "
            "'residual-expert', 'robosuite-lift', 'state-bc', 'state-nn', 'vision', 'vla-eval', "
            "'zero']") \
        in proc.stderr


def test_a_plugins_own_protocol_runs_the_readmes_drift_policy_in_pool_mode(tmp_path):
    """A protocol no table of the workbench lists, registered by an installed package's
    entry point (and carried by its adapter): the docs' Drift policy asks
    ``get_protocol`` for it in the driver, in two pool workers and in the replica."""
    site = install_plugin(tmp_path)
    readme = (Path(__file__).resolve().parents[1] / "docs" / "your-own-policy.md").read_text()
    drift = next(block for block in readme.split("```python")[1:] if "class Drift" in block)
    (tmp_path / "my_policies.py").write_text(drift.split("```")[0])
    env = _own_policy_env([site, tmp_path])
    path = write_config(tmp_path / "arm.yaml", benchmark="plugin-arm", suite="MT10",
                        tasks=["reach-v3"], episodes=4, policy="my_policies:Drift",
                        backend="pool", pool={"workers": 2, "replicas": 1}, image_size=32,
                        max_steps=20)
    cli("eval", path, env=env, cwd=tmp_path)
    rows = episodes_json(tmp_path / "arm" / "records.sqlite", env=env)
    assert len(rows) == 4 and all(r["error"] is None for r in rows), rows
    assert {r["episode_id"].split("/")[0] for r in rows} == {"plugin-arm"}
    assert {r["worker"] for r in rows} == {"worker-0", "worker-1"}
    listed = cli("benchmarks", env=env).stdout
    assert "plugin-arm" in listed


def test_reproduce_full_and_quick_are_exclusive(capsys):
    from workbench.cli import main

    assert main(["reproduce", "--quick", "--full"]) == 2
    assert "--quick and --full exclude each other" in capsys.readouterr().err


def test_every_subcommand_and_every_option_has_a_help_line():
    import argparse

    from workbench.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    listed = {c.dest: c.help for c in subparsers._choices_actions}
    assert set(listed) == set(subparsers.choices)
    assert all(h and h[0].isupper() and h.endswith(".") for h in listed.values()), listed
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, sub in subparsers.choices.items() for action in sub._actions
               if not isinstance(action, argparse._HelpAction) and not action.help]
    assert missing == []
    shown = cli("--help").stdout
    for name, summary in listed.items():
        assert name in shown
