"""The evaluation config: one dataclass, validated on construction, loadable from YAML.

YAML format (every key but ``benchmark``, ``suite`` and ``policy`` is optional)::

    benchmark: metaworld          # registry name
    suite: MT1:pick-place-v3      # MT10, MT50 or MT1:<task>
    tasks: [pick-place-v3]        # subset of the suite's tasks (default: all)
    episodes: 3                   # episodes per task (initial states 0..episodes-1)
    policy: expert                # registry name
    policy_options: {}            # keyword arguments for the policy
    seed: 0                       # seed of the benchmark's task set
    image_size: 224               # camera resolution
    output_dir: runs/example      # records.sqlite, videos/, rollouts/ go here
    run_id: null                  # default: derived from the config
    video: "off"                  # "off", "all", or N (first N episodes)
    device: cpu                   # where the policy runs
    runtime: sequential           # sequential (official-like) or pool (workers + replicas)
    workers: 2                    # pool: simulator worker processes
    replicas: 1                   # pool: policy replica processes
    max_batch: 8                  # pool: largest batch a replica serves
    max_wait_ms: 5.0              # pool: longest a replica waits to fill a batch
    search: false                 # pool: size workers and replicas by the concurrency search
    shards: 1                     # split the plan deterministically into this many shards
    shard: 0                      # and run this one

>>> cfg = EvalConfig(benchmark="metaworld", suite="MT10", policy="expert", episodes=2)
>>> cfg.episodes
2
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml


@dataclass
class EvalConfig:
    benchmark: str
    suite: str
    policy: str
    tasks: list[str] | None = None
    episodes: int = 1
    policy_options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    image_size: int = 224
    output_dir: str = "runs/default"
    run_id: str | None = None
    video: str | int = "off"
    device: str = "cpu"
    progress: bool = True
    runtime: str = "sequential"
    workers: int = 2
    replicas: int = 1
    max_batch: int = 8
    max_wait_ms: float = 5.0
    search: bool = False
    shards: int = 1
    shard: int = 0

    def __post_init__(self) -> None:
        from workbench.benchmarks import BENCHMARKS, SUITE_LISTERS, TASK_LISTERS
        from workbench.policies import POLICIES

        if self.benchmark not in BENCHMARKS:
            raise ValueError(f"unknown benchmark {self.benchmark!r}; available: {sorted(BENCHMARKS)}")
        suites = SUITE_LISTERS[self.benchmark]()
        if self.suite not in suites:
            raise ValueError(f"unknown suite {self.suite!r} for {self.benchmark}; available: {suites}")
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; available: {sorted(POLICIES)}")
        if not isinstance(self.episodes, int) or self.episodes < 1:
            raise ValueError(f"episodes must be a positive integer, got {self.episodes!r}")
        if not (self.video in ("off", "all") or (isinstance(self.video, int) and self.video >= 0)):
            raise ValueError(f'video must be "off", "all" or a count, got {self.video!r}')
        if self.runtime not in ("sequential", "pool"):
            raise ValueError(f"unknown runtime {self.runtime!r}; available: ['pool', 'sequential']")
        if self.workers < 1 or self.replicas < 1 or self.max_batch < 1 or self.max_wait_ms < 0:
            raise ValueError("workers, replicas and max_batch must be >= 1, max_wait_ms >= 0")
        if not 0 <= self.shard < self.shards:
            raise ValueError(f"shard must be in [0, {self.shards}), got {self.shard}")
        if self.image_size < 16:
            raise ValueError(f"image_size must be >= 16, got {self.image_size}")
        if self.tasks is not None:
            available = TASK_LISTERS[self.benchmark](self.suite)
            unknown = [t for t in self.tasks if t not in available]
            if unknown or not self.tasks:
                raise ValueError(f"unknown tasks {unknown} for suite {self.suite!r}; "
                                 f"available: {available}")
            self.tasks = list(self.tasks)

    def key(self) -> str:
        """A short hash of everything that decides the episodes' outcomes."""
        speed_only = ("output_dir", "run_id", "video", "progress", "runtime", "workers",
                      "replicas", "max_batch", "max_wait_ms", "search")
        decisive = {k: v for k, v in asdict(self).items() if k not in speed_only}
        return hashlib.sha256(json.dumps(decisive, sort_keys=True, default=str).encode()
                              ).hexdigest()[:10]

    def resolved_run_id(self) -> str:
        suite = self.suite.replace(":", "_")
        return self.run_id or f"{self.policy}-{suite}-{self.runtime}-{self.key()}"


def load_eval_config(path: str | Path, **overrides: Any) -> EvalConfig:
    """Read a YAML eval config, refusing unknown keys with the list of known ones."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no config file at {path}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of keys to values, got {type(data).__name__}")
    data.update(overrides)
    known = {f.name for f in fields(EvalConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; known: {sorted(known)}")
    missing = sorted({"benchmark", "suite", "policy"} - set(data))
    if missing:
        raise ValueError(f"{path}: missing required keys {missing}")
    return EvalConfig(**data)
