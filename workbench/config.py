"""The one evaluation config: validated once, loadable from YAML, a dict or papermill.

YAML format (``benchmark``, ``suite`` and ``policy`` are required)::

    benchmark: metaworld          # registered name or "package.module:Adapter"
    benchmark_options: {}         # extra keyword arguments of the adapter
    suite: MT1:pick-place-v3      # a suite of the benchmark
    tasks: [pick-place-v3]        # subset of the suite's tasks (default: all)
    episodes: 3                   # episodes per task (initial states 0..episodes-1)
    max_steps: null               # cap on steps per episode below the benchmark's own limit
    max_policy_calls: null        # policy-call budget per episode (null: none; see invalid_actions)
    invalid_actions: fail         # fail: a policy error; feedback: refused, message to the next call
    policy: expert                # registered name, "package.module:Policy" or a class
    policy_options: {}            # keyword arguments of the policy
    seed: 0                       # seed of the benchmark's task set
    image_size: 224               # camera resolution
    output_dir: runs/example      # records.sqlite, videos/, rollouts/ go here
    run_id: null                  # default: derived from the config
    video: "off"                  # "off", "all", or N (the plan's first N episodes)
    interactions: true            # write each episode's interaction history (interactions/*.json)
    device: cpu                   # where the policy runs: cpu, cuda, cuda:N
    progress: true                # a progress bar with success so far
    backend: sequential           # sequential, pool (workers + replicas), ray, or service
    observe: null                 # every_step or chunk_boundary (null: the backend's own)
    warm_up: false                # build every task's environment before the clock starts
    shards: 1                     # split the plan deterministically into this many shards
    shard: 0                      # and run this one
    pool:                         # backend pool (and each Ray shard's pool)
      workers: 2                  #   simulator worker processes
      replicas: 1                 #   policy replica processes
      max_batch: null             #   largest batch a replica serves (null: ceil(workers/replicas))
      max_wait_ms: 5.0            #   longest a replica waits to fill a batch
      envs_per_worker: 1          #   environments each worker steps (their calls: one batch)
    search:                       # concurrency search (or `search: true`)
      enabled: false
      probe_episodes: 4           #   episodes per probe (at least two per worker)
      ...                         #   see SearchConfig
    ray:                          # backend ray
      address: null               #   null: start Ray locally; "auto" or HOST:PORT: join a cluster
      shards: 2                   #   Ray tasks the plan is split into
    service:                      # backend service: the benchmark runs in a SIM service
      url: null                   #   ws://HOST:PORT of `workbench serve`
      token_env: WORKBENCH_SIM_TOKEN  # environment variable holding the admin token
      timeout_s: 60.0             #   longest wait for one reply

Every wrong type, range or name raises ConfigError (a ValueError) naming the key, the value and what
is allowed. Derived values (the batch size, the backend's observation schedule, the
run id) are computed here and nowhere else.

>>> cfg = EvalConfig(benchmark="metaworld", suite="MT10", policy="expert", episodes=2)
>>> cfg.episodes, cfg.pool.batch, cfg.observe_every_step
(2, 2, True)
>>> EvalConfig.from_dict({"benchmark": "metaworld", "suite": "MT10", "policy": "expert",
...                       "pool": {"workers": "two"}})
Traceback (most recent call last):
...
workbench.errors.ConfigError: pool.workers: expected an integer >= 1 and <= 1024; got 'two' (str)
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from workbench.benchmarks import BenchmarkAdapter, benchmark_class, benchmark_factory
from workbench.contracts.registry import Factory
from workbench.errors import ConfigError
from workbench.policies import policy_factory

BACKENDS = ("sequential", "pool", "ray", "service")
INVALID_ACTIONS = ("fail", "feedback")
OBSERVE = ("every_step", "chunk_boundary")
MAX_EPISODES = 100_000
"""Most episodes per task (a benchmark with fixed initial states allows fewer)."""
MAX_SEED = 2**32 - 1
MAX_IMAGE_SIZE = 2048
MAX_STEPS = 10_000_000
MAX_WORKERS, MAX_REPLICAS, MAX_BATCH, MAX_ENVS_PER_WORKER = 1024, 256, 4096, 64
MAX_WAIT_MS = 60_000.0
MAX_SECONDS = 86_400.0
"""Longest of any time limit (a day)."""
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}")
"""What a run id may be: it names files and folders."""
ADAPTER_KEYS = ("suite", "seed", "image_size")
"""Keys the config hands every adapter itself (never in benchmark_options)."""


# -- checks: each names the key, the value and what is allowed -------------------------
GOT_CHARS = 120
"""Longest echo of a refused value in an error message."""


def _got(value: Any) -> str:
    try:
        shown = repr(value)
    except Exception:  # a value whose repr raises, or is too deep to write
        shown = "a value that cannot be shown"
    if len(shown) > GOT_CHARS:
        shown = f"{shown[:GOT_CHARS]}... ({len(shown)} characters)"
    return f"got {shown} ({type(value).__name__})"


def check_int(key: str, value: Any, minimum: int | None = None, maximum: int | None = None,
              optional: bool = False) -> int | None:
    """``value`` as an int in [minimum, maximum]; bools and floats are refused."""
    if value is None and optional:
        return None
    bounds = "" if minimum is None else f" >= {minimum}"
    bounds += "" if maximum is None else f" and <= {maximum}"
    allowed = f"an integer{bounds}" + (" or null" if optional else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}: expected {allowed}; {_got(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ConfigError(f"{key}: expected {allowed}; {_got(value)}")
    return value


def check_float(key: str, value: Any, minimum: float | None = None,
                maximum: float | None = None, optional: bool = False) -> float | None:
    """``value`` as a finite float in [minimum, maximum] (ints accepted; bools, NaN and
    infinities refused)."""
    if value is None and optional:
        return None
    bounds = "" if minimum is None else f" >= {minimum:g}"
    bounds += "" if maximum is None else f" and <= {maximum:g}"
    allowed = f"a finite number{bounds}" + (" or null" if optional else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(float(value)):
        raise ConfigError(f"{key}: expected {allowed}; {_got(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ConfigError(f"{key}: expected {allowed}; {_got(value)}")
    return float(value)


def check_bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false; {_got(value)}")
    return value


def check_choice(key: str, value: Any, choices: Sequence[Any]) -> Any:
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {list(choices)}; {_got(value)}")
    return value


def check_str(key: str, value: Any, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if isinstance(value, Path):
        return str(value)
    if not isinstance(value, str) or not value:
        allowed = "a non-empty string" + (" or null" if optional else "")
        raise ConfigError(f"{key}: expected {allowed}; {_got(value)}")
    return value


def check_mapping(key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"{key}: expected a mapping of names to values; {_got(value)}")
    return dict(value)


# -- sections ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolConfig:
    """Simulator workers and policy replicas, and how replicas batch.

    max_batch None derives the batch size: ``ceil(workers * envs_per_worker / replicas)``,
    the most requests a replica's own workers can have waiting at once (:attr:`batch`). A
    replica never serves more than its policy declares (``Capabilities.max_batch``).

    envs_per_worker > 1: each worker steps that many environments, a thread each, and
    sends their policy calls as one message once every one with an episode open has
    asked (:mod:`workbench.runtime.worker`); for a policy that costs more than the
    simulator, one worker per core keeps its core busy while its replica serves full
    batches (docs/performance.md). The pool backend only.
    """

    workers: int = 2
    replicas: int = 1
    max_batch: int | None = None
    max_wait_ms: float = 5.0
    envs_per_worker: int = 1

    def __post_init__(self) -> None:
        check_int("pool.workers", self.workers, 1, MAX_WORKERS)
        check_int("pool.replicas", self.replicas, 1, MAX_REPLICAS)
        check_int("pool.envs_per_worker", self.envs_per_worker, 1, MAX_ENVS_PER_WORKER)
        check_int("pool.max_batch", self.max_batch, 1, MAX_BATCH, optional=True)
        object.__setattr__(self, "max_wait_ms",
                           check_float("pool.max_wait_ms", self.max_wait_ms, 0.0, MAX_WAIT_MS))

    @property
    def batch(self) -> int:
        """The batch size replicas serve (``max_batch``, else derived; see the class).

        >>> PoolConfig(4, 2).batch, PoolConfig(3, 2).batch, PoolConfig(4, 1, max_batch=2).batch
        (2, 2, 2)
        >>> PoolConfig(2, 2, envs_per_worker=8).batch
        8
        """
        return self.max_batch or math.ceil(self.workers * self.envs_per_worker / self.replicas)

    @property
    def label(self) -> str:
        """``"2w/1r b2"``: workers, replicas, batch size (``"2w x8 env/2r b8"`` with
        environments per worker).

        >>> PoolConfig(2, 2, envs_per_worker=8).label
        '2w x8 env/2r b8'
        """
        envs = f" x{self.envs_per_worker} env" if self.envs_per_worker > 1 else ""
        return f"{self.workers}w{envs}/{self.replicas}r b{self.batch}"


@dataclass(frozen=True)
class SearchConfig:
    """The concurrency search (see :mod:`workbench.runtime.search` for the rules).

    max_workers / max_replicas: the largest pools the search may start (None:
    ``min(2 * cores, 64)`` workers and ``min(cores, 8)`` replicas).
    probe_max_steps: the most steps of each probe episode whose result is discarded (a
    policy that does not declare ``runtime_invariant``): such a probe only measures a
    rate, and the success rule then compares success within this cap in every probe.
    None: the run's own ``max_steps``. Probes that count as the run's are never cut.
    """

    enabled: bool = False
    probe_episodes: int = 4
    probe_max_steps: int | None = None
    probe_time_limit_s: float = 120.0
    success_fraction: float = 0.9
    min_gain: float = 0.03
    memory_reserve_gib: float = 1.0
    max_workers: int | None = None
    max_replicas: int | None = None
    worker_candidates: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)

    def __post_init__(self) -> None:
        check_bool("search.enabled", self.enabled)
        check_int("search.probe_episodes", self.probe_episodes, 1, MAX_EPISODES)
        check_int("search.probe_max_steps", self.probe_max_steps, 1, MAX_STEPS, optional=True)
        for name, low, high in (("probe_time_limit_s", 0.0, MAX_SECONDS),
                                ("success_fraction", 0.0, 1.0), ("min_gain", 0.0, 100.0),
                                ("memory_reserve_gib", 0.0, 1e6)):
            object.__setattr__(self, name, check_float(f"search.{name}", getattr(self, name),
                                                       low, high))
        check_int("search.max_workers", self.max_workers, 1, MAX_WORKERS, optional=True)
        check_int("search.max_replicas", self.max_replicas, 1, MAX_REPLICAS, optional=True)
        if isinstance(self.worker_candidates, (str, bytes)) or not isinstance(
                self.worker_candidates, Sequence) or not self.worker_candidates:
            raise ConfigError("search.worker_candidates: expected a non-empty list of integers; "
                              f"{_got(self.worker_candidates)}")
        for k, w in enumerate(self.worker_candidates):
            check_int(f"search.worker_candidates[{k}]", w, 1, MAX_WORKERS)
        object.__setattr__(self, "worker_candidates", tuple(self.worker_candidates))

    def pool_limits(self, cores: int) -> tuple[int, int]:
        """(max workers, max replicas) the search may start on ``cores`` cores."""
        return (self.max_workers or min(2 * cores, 64),
                self.max_replicas or max(1, min(cores, 8)))


@dataclass(frozen=True)
class RayConfig:
    """The Ray backend (:mod:`workbench.runtime.ray_backend`): where the cluster is, how
    many shards (each a placement group of ``pool.workers`` worker actors and
    ``pool.replicas`` replica actors), and what each shard's actors ask for.

    cpus_per_shard: CPUs a shard's group requests, split evenly over its actors (None:
    ``pool.workers``). gpus_per_replica: GPUs each replica actor requests (None: with
    ``device: cuda`` one GPU per shard shared by its replicas, else none).
    start_timeout_s: how long a shard's group and actors may take to start.
    """

    address: str | None = None
    shards: int = 2
    cpus_per_shard: float | None = None
    gpus_per_replica: float | None = None
    start_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        check_str("ray.address", self.address, optional=True)
        check_int("ray.shards", self.shards, 1, 4096)
        object.__setattr__(self, "cpus_per_shard", check_float(
            "ray.cpus_per_shard", self.cpus_per_shard, 0.0, 4096.0, optional=True))
        object.__setattr__(self, "gpus_per_replica", check_float(
            "ray.gpus_per_replica", self.gpus_per_replica, 0.0, 64.0, optional=True))
        object.__setattr__(self, "start_timeout_s", check_float(
            "ray.start_timeout_s", self.start_timeout_s, 0.0, MAX_SECONDS))


@dataclass(frozen=True)
class ServiceConfig:
    """The service backend: where the SIM service is and where its admin token comes
    from (an environment variable, so configs never hold secrets)."""

    url: str | None = None
    token_env: str = "WORKBENCH_SIM_TOKEN"
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        url = check_str("service.url", self.url, optional=True)
        if url is not None and not url.startswith(("ws://", "wss://")):
            raise ConfigError(f"service.url must start with ws:// or wss://; {_got(url)}")
        check_str("service.token_env", self.token_env)
        object.__setattr__(self, "timeout_s",
                           check_float("service.timeout_s", self.timeout_s, 0.1, MAX_SECONDS))


SECTIONS: dict[str, type] = {"pool": PoolConfig, "search": SearchConfig, "ray": RayConfig,
                             "service": ServiceConfig}


# -- the config --------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalConfig:
    """One evaluation: what runs (benchmark, suite, tasks, episodes, policy), where
    records go, and how it runs (backend and its sections). See the module docstring."""

    benchmark: str | type[BenchmarkAdapter]
    suite: str
    policy: str | Callable[..., Any]
    tasks: tuple[str, ...] | None = None
    episodes: int = 1
    max_steps: int | None = None
    max_policy_calls: int | None = None
    policy_call_timeout_s: float | None = 300.0
    invalid_actions: str = "fail"
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    benchmark_options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    image_size: int = 224
    output_dir: str = "runs/default"
    run_id: str | None = None
    video: str | int = "off"
    interactions: bool = True
    device: str = "cpu"
    progress: bool = True
    backend: str = "sequential"
    observe: str | None = None
    warm_up: bool = False
    shards: int = 1
    shard: int = 0
    pool: PoolConfig = field(default_factory=PoolConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)

    def __post_init__(self) -> None:
        self._check_types()
        self._check_names()

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _check_types(self) -> None:
        check_int("episodes", self.episodes, 1, MAX_EPISODES)
        check_int("max_steps", self.max_steps, 1, MAX_STEPS, optional=True)
        check_int("max_policy_calls", self.max_policy_calls, 1, MAX_STEPS, optional=True)
        self._set("policy_call_timeout_s", check_float(
            "policy_call_timeout_s", self.policy_call_timeout_s, 0.001, MAX_SECONDS,
            optional=True))
        check_choice("invalid_actions", self.invalid_actions, INVALID_ACTIONS)
        check_bool("interactions", self.interactions)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_int("image_size", self.image_size, 16, MAX_IMAGE_SIZE)
        check_int("shards", self.shards, 1, MAX_EPISODES)
        check_int("shard", self.shard, 0, self.shards - 1)
        self._set("output_dir", _check_output_dir(self.output_dir))
        check_str("run_id", self.run_id, optional=True)
        if self.run_id is not None and not RUN_ID.fullmatch(self.run_id):
            raise ConfigError("run_id: expected 1 to 128 letters, digits or ._:@+=- (it names "
                              f"files), starting with a letter or digit; {_got(self.run_id)}")
        check_str("suite", self.suite)
        check_bool("progress", self.progress)
        check_bool("warm_up", self.warm_up)
        check_choice("backend", self.backend, BACKENDS)
        if self.observe is not None:
            check_choice("observe", self.observe, OBSERVE)
        self._set("video", _check_video(self.video))
        self._set("device", _check_device(self.device))
        self._set("policy_options", check_mapping("policy_options", self.policy_options))
        self._set("benchmark_options", check_mapping("benchmark_options",
                                                     self.benchmark_options))
        for name, section in SECTIONS.items():
            value = getattr(self, name)
            if name == "search" and isinstance(value, bool):
                value = SearchConfig(enabled=value)
            if isinstance(value, Mapping):
                value = _section(section, name, value)
            if not isinstance(value, section):
                raise ConfigError(f"{name}: expected a mapping of {name} settings; {_got(value)}")
            self._set(name, value)
        if self.pool.envs_per_worker > 1 and self.backend != "pool":
            raise ConfigError(f"pool.envs_per_worker: more than one environment per worker "
                              f"is the pool backend's; backend {self.backend} steps one "
                              f"(got {self.pool.envs_per_worker})")
        if self.pool.envs_per_worker > 1 and self.search.enabled:
            raise ConfigError("pool.envs_per_worker: the concurrency search sizes pools of "
                              "one environment per worker; turn the search off to set "
                              f"{self.pool.envs_per_worker}")
        if self.backend == "service" and self.service.url is None:
            raise ConfigError("backend service needs service.url (ws://HOST:PORT of a "
                              "`workbench serve` SIM service)")

    def _check_names(self) -> None:
        adapter = self.benchmark_class
        suites = adapter.list_suites()
        if self.suite not in suites:
            raise ConfigError(f"suite {self.suite!r} is not a suite of {adapter.name}; "
                              f"available: {_short(suites)}")
        if self.tasks is not None:
            self._set("tasks", _check_tasks(self.tasks, self.suite,
                                            adapter.suite_tasks(self.suite)))
        if adapter.initial_states is not None and self.episodes > adapter.initial_states:
            raise ConfigError(f"episodes: expected at most {adapter.initial_states} for "
                              f"{adapter.name}, which has {adapter.initial_states} initial "
                              f"states per task; got {self.episodes}")
        clash = [k for k in ADAPTER_KEYS if k in self.benchmark_options]
        if clash:
            raise ConfigError(f"benchmark_options.{clash[0]}: set {clash[0]} at the top level "
                              "of the config, not in benchmark_options")
        self.policy_factory()  # an unknown policy or options that do not fit: refused now
        self.adapter_factory().check("benchmark")

    # -- derived values ------------------------------------------------------------------
    @property
    def benchmark_class(self) -> type[BenchmarkAdapter]:
        try:
            return benchmark_class(self.benchmark)
        except ValueError as exc:
            raise ConfigError(f"benchmark: {exc}") from None

    @property
    def protocol_name(self) -> str:
        return self.benchmark_class.protocol.name

    def adapter_factory(self) -> Factory:
        """A picklable factory of the benchmark's adapter for this config."""
        return benchmark_factory(self.benchmark, suite=self.suite, seed=self.seed,
                                 image_size=self.image_size, **self.benchmark_options)

    def policy_factory(self) -> Factory:
        """A picklable factory of the policy (given the benchmark's protocol if it asks)."""
        try:
            return policy_factory(self.policy, self.policy_options, self.protocol_name)
        except ValueError as exc:
            raise ConfigError(f"policy: {exc}") from None

    def task_names(self) -> list[str]:
        """The tasks to run: ``tasks``, else every task of the suite."""
        return list(self.tasks) if self.tasks else self.benchmark_class.suite_tasks(self.suite)

    @property
    def observe_every_step(self) -> bool:
        """``observe``, else the backend's own schedule: the sequential backend is the
        official-like reference (every step), the pools observe at chunk boundaries."""
        return (self.observe or ("every_step" if self.backend == "sequential"
                                 else "chunk_boundary")) == "every_step"

    def key(self) -> str:
        """A short hash of everything that decides the episodes' outcomes."""
        speed_only = {"output_dir", "run_id", "video", "progress", "backend", "observe",
                      "warm_up", "device", "pool", "search", "ray", "service", "interactions"}
        decisive = {k: v for k, v in self.to_dict().items() if k not in speed_only
                    and not (k in _LATER_KEYS and v == _LATER_KEYS[k])}
        return hashlib.sha256(json.dumps(decisive, sort_keys=True, default=str).encode()
                              ).hexdigest()[:10]

    def resolved_run_id(self) -> str:
        """``run_id``, else ``<policy>-<suite>-<key>``: the same config resumes the same run
        whatever the backend."""
        suite = self.suite.replace(":", "_")
        return self.run_id or f"{self.policy_factory().label}-{suite}-{self.key()}"

    # -- display -------------------------------------------------------------------------
    def changed(self) -> dict[str, Any]:
        """The settings that differ from their defaults, as plain data (a section's keys
        as ``section.key``); benchmark, suite and policy always."""
        plain, out = self.to_dict(), {}
        for f in fields(self):
            default = (f.default if f.default is not dataclasses.MISSING else
                       f.default_factory() if f.default_factory is not dataclasses.MISSING
                       else None)
            if f.name in SECTIONS:
                base = asdict(default)
                out.update({f"{f.name}.{k}": v for k, v in plain[f.name].items() if base[k] != v})
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                out[f.name] = plain[f.name]
            elif plain[f.name] != (dict(default) if isinstance(default, Mapping) else default):
                out[f.name] = plain[f.name]
        return out

    def _repr_html_(self) -> str:
        """In a notebook: the run id, the settings that differ from the defaults, and
        every setting under a fold."""
        from workbench.contracts.display import heading, key_value_table

        every = {k: v for k, v in self.to_dict().items() if k not in SECTIONS}
        every.update({f"{name}.{k}": v for name in SECTIONS for k, v in
                      asdict(getattr(self, name)).items()})
        return (heading("EvalConfig", f"run {self.resolved_run_id()} ({self.backend} backend)")
                + key_value_table(self.changed().items())
                + f"<details><summary>all {len(every)} settings</summary>"
                + key_value_table(every.items()) + "</details>")

    # -- conversions ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): a class or factory given as an object is named by its
        module and qualified name."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in SECTIONS:
            out[name] = asdict(out[name])
        for name in ("benchmark", "policy"):
            if not isinstance(out[name], str):
                obj = out[name]
                out[name] = f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', obj)}"
        out["tasks"] = None if self.tasks is None else list(self.tasks)
        out["policy_options"], out["benchmark_options"] = (dict(self.policy_options),
                                                           dict(self.benchmark_options))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> "EvalConfig":
        """Build from plain data, refusing unknown keys (at every level) and missing ones."""
        data = check_mapping(source, data)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown key {unknown[0]!r}{_hint(unknown[0], known)}; "
                              f"known: {sorted(known)}")
        missing = sorted({"benchmark", "suite", "policy"} - set(data))
        if missing:
            raise ConfigError(f"{source}: missing required keys {missing}")
        return cls(**data)

    def replace(self, **changes: Any) -> "EvalConfig":
        """A copy with ``changes``; a section may be given as a mapping of its changes
        (``config.replace(pool={"workers": 4})``) or as its dataclass."""
        for name in SECTIONS:
            if isinstance(changes.get(name), Mapping):
                changes[name] = dataclasses.replace(getattr(self, name),
                                                    **_known(name, SECTIONS[name], changes[name]))
        return dataclasses.replace(self, **changes)


_LATER_KEYS = {"max_policy_calls": None, "invalid_actions": "fail",
               "policy_call_timeout_s": 300.0}
"""Keys added after run ids were first derived: at their defaults they stay out of
:meth:`EvalConfig.key`, so earlier runs keep their ids and resume."""


def _section(section: type, name: str, data: Mapping[str, Any]) -> Any:
    return section(**_known(name, section, check_mapping(name, data)))


def _known(name: str, section: type, data: Mapping[str, Any]) -> dict[str, Any]:
    known = {f.name for f in fields(section)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown key {name}.{unknown[0]}; known: {sorted(known)}")
    return dict(data)


def _hint(key: str, top_level: set[str]) -> str:
    for name, section in SECTIONS.items():
        if key in {f.name for f in fields(section)}:
            return f" (did you mean {name}.{key}?)"
    close = difflib.get_close_matches(key, top_level, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _short(names: Sequence[str], limit: int = 12) -> str:
    shown = list(names)[:limit]
    return f"{shown}" + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _check_video(value: Any) -> str | int:
    if isinstance(value, bool):  # YAML reads a bare `off` as false
        return "all" if value else "off"
    if value in ("off", "all") or (isinstance(value, int) and value >= 0):
        return value
    raise ConfigError(f'video: expected "off", "all" or a count of episodes >= 0; {_got(value)}')


def _check_device(value: Any) -> str:
    device = check_str("device", value)
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()) or (kind == "cpu" and index):
        raise ConfigError(f"device: expected cpu, cuda or cuda:N; {_got(value)}")
    return device


def _check_tasks(tasks: Any, suite: str, available: Sequence[str]) -> tuple[str, ...]:
    if isinstance(tasks, str) or not isinstance(tasks, Sequence):
        raise ConfigError(f"tasks: expected a list of task names of {suite} (or null for all); "
                          f"{_got(tasks)}")
    if not tasks:
        raise ConfigError(f"tasks is empty: name at least one task of {suite}, or leave tasks "
                          f"out (null) for all of them; available: {_short(available)}")
    unknown = [t for t in tasks if not isinstance(t, str) or t not in available]
    if unknown:
        raise ConfigError(f"tasks {_short(unknown)} are not tasks of suite {suite!r}; "
                          f"available: {_short(available)}")
    twice = sorted({t for t in tasks if tasks.count(t) > 1})
    if twice:
        raise ConfigError(f"tasks lists {twice} more than once; name each task once")
    return tuple(tasks)


def _check_output_dir(value: Any) -> str:
    folder = check_str("output_dir", value)
    if "\x00" in folder or len(folder) > 4096:
        raise ConfigError(f"output_dir: expected a path without NUL of at most 4096 characters; "
                          f"{_got(folder)}")
    if Path(folder).exists() and not Path(folder).is_dir():
        raise ConfigError(f"output_dir {folder!r} is a file; it must be a folder (or not yet "
                          "exist)")
    return folder


MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_VALUES = 100_000
"""Most values a config may hold once YAML's aliases are expanded (a small file of
nested aliases can stand for billions)."""


def read_yaml(source: str | Path, what: str = "config file") -> Any:
    """A YAML file's content; refuses a missing file, a folder, a file over
    :data:`MAX_CONFIG_BYTES`, text that is not YAML, and a document whose aliases expand
    past :data:`MAX_CONFIG_VALUES` values, each in one line naming the file."""
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"no {what} at {path}")
    if not path.is_file():
        raise ConfigError(f"{path} is a folder, not a {what}")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {path.stat().st_size} bytes; a {what} holds at most "
                          f"{MAX_CONFIG_BYTES}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path}: not valid YAML: {first[:200]}") from None
    if _too_many_values(data):
        raise ConfigError(f"{path}: more than {MAX_CONFIG_VALUES} values once its YAML aliases "
                          "are expanded; write the values out")
    return data


def _too_many_values(data: Any) -> bool:
    """Whether walking ``data`` (aliases expanded) meets more than MAX_CONFIG_VALUES."""
    left, stack = MAX_CONFIG_VALUES, [data]
    while stack:
        item = stack.pop()
        left -= 1
        if left < 0:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def load_config(source: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                overrides_label: str = "override") -> EvalConfig:
    """An :class:`EvalConfig` from a YAML file or a mapping, with ``overrides`` applied;
    a dotted override key (``pool.workers``) sets one key of a section. An override
    naming an unknown key is refused as ``overrides_label`` (the CLI's ``--set``), not
    as the file's."""
    if isinstance(source, Mapping):
        data, where = dict(source), "config"
    else:
        data, where = read_yaml(source), str(source)
        data = check_mapping(where, data)
    known = {f.name for f in fields(EvalConfig)}
    for key in overrides or {}:
        head = key.partition(".")[0]
        if head not in known:
            raise ConfigError(f"{overrides_label} {key}: unknown key {head!r}"
                              f"{_hint(head, known)}; known: {sorted(known)}")
    for key, value in (overrides or {}).items():
        head, _, rest = key.partition(".")
        if rest:
            section = data.get(head) or {}
            data[head] = {**check_mapping(head, section), rest: value}
        else:
            data[key] = value
    return EvalConfig.from_dict(data, where)


def as_config(config: EvalConfig | Mapping[str, Any]) -> EvalConfig:
    """``config`` itself, or one built from a mapping (papermill parameters, say)."""
    return config if isinstance(config, EvalConfig) else load_config(config)


@dataclass(frozen=True)
class RankingConfig:
    """Ranking policies by pairwise preferences over their rollouts (notebook 11).

    comparisons_per_pair: judged comparisons per unordered policy pair; checkpoints:
    nested comparison counts for convergence curves (None: ten even steps); n_boot:
    bootstrap replicates; swap_pairs: rollout pairs judged in both A/B orders;
    adaptive_budget: comparisons of uniform sampling (adaptive gets half and all).
    """

    comparisons_per_pair: int = 400
    checkpoints: tuple[int, ...] | None = None
    n_boot: int = 1000
    swap_pairs: int = 200
    adaptive_budget: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("ranking.comparisons_per_pair", self.comparisons_per_pair, 1)
        check_int("ranking.n_boot", self.n_boot, 1)
        check_int("ranking.swap_pairs", self.swap_pairs, 0)
        check_int("ranking.adaptive_budget", self.adaptive_budget, 1)
        check_int("ranking.seed", self.seed, 0)
        if self.checkpoints is not None:
            if isinstance(self.checkpoints, (str, bytes)) or not isinstance(
                    self.checkpoints, Sequence) or not self.checkpoints:
                raise ConfigError("ranking.checkpoints: expected a non-empty list of integers or "
                                  f"null; {_got(self.checkpoints)}")
            for k, c in enumerate(self.checkpoints):
                check_int(f"ranking.checkpoints[{k}]", c, 1, self.comparisons_per_pair)
            object.__setattr__(self, "checkpoints", tuple(self.checkpoints))
