"""MetaWorld MT10 as a vla-eval benchmark, plus a launcher that runs it end to end.

Two things live here:

* :class:`MetaWorldMT10Benchmark` -- a ``vla_eval.benchmarks.base.StepBenchmark``
  written only against vla-eval's public benchmark API (vla-eval 0.8.0 ships no
  MetaWorld adapter).  Import string for eval configs:
  ``vla_eval_metaworld:MetaWorldMT10Benchmark`` with ``/work/main/benchmarks`` on
  ``PYTHONPATH`` (the directory has no ``__init__.py``; see ``VLA_EVAL_PYTHONPATH``).
* :func:`run_vla_eval` -- starts the batching model server
  (``vla_eval_expert_server.py``), launches ``vla-eval run --no-docker`` shard
  processes against it, exports the recording with ``vla_eval.results.export``
  and returns one row per episode as a pandas DataFrame.

Observation sent to the model server on every step (msgpack over WebSocket)::

    {
      "images": {"corner": uint8 (224,224,3), "gripperPOV": uint8 (224,224,3)},
      "state": float32 (4,)            # end-effector xyz = obs[:3], gripper = obs[3]
      "task_description": str,         # instruction
      "privileged_state": float64 (39,)  # full MetaWorld observation (for the expert)
      "task_name": str,                # MetaWorld env name, e.g. "reach-v3"
    }

Action expected back: ``{"actions": float32 (4,)}`` (xyz delta + gripper, [-1, 1]).

CLI (tiny smoke run)::

    /work/main/.venv/bin/python /work/main/benchmarks/vla_eval_metaworld.py \
        --tasks reach-v3 push-v3 --episodes-per-task 1 --max-batch 2 --max-wait-ms 10 --shards 2
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vla_eval.benchmarks.base import StepBenchmark, StepResult
from vla_eval.render import apply_env, configure_mujoco_render
from vla_eval.specs import IMAGE_RGB, LANGUAGE, POSITION_DELTA, DimSpec

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
#: Directory that must be on PYTHONPATH of every vla-eval process so the import
#: string ``vla_eval_metaworld:MetaWorldMT10Benchmark`` resolves.
VLA_EVAL_PYTHONPATH = str(HERE)
BENCHMARK_IMPORT = "vla_eval_metaworld:MetaWorldMT10Benchmark"
SERVER_SCRIPT = HERE / "vla_eval_expert_server.py"

MT10_TASKS: tuple[str, ...] = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)

INSTRUCTIONS: dict[str, str] = {
    "reach-v3": "reach the goal position",
    "push-v3": "push the puck to the goal",
    "pick-place-v3": "pick up the puck and place it at the goal",
    "door-open-v3": "open the door",
    "drawer-open-v3": "open the drawer",
    "drawer-close-v3": "close the drawer",
    "button-press-topdown-v3": "press the button from the top",
    "peg-insert-side-v3": "insert the peg into the hole from the side",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}

MAX_PATH_LENGTH = 500  # metaworld SawyerXYZEnv.max_path_length
N_GOALS = 50  # metaworld _N_GOALS: tasks per env in MT10.train_tasks

# Specs (vla_eval.specs): exchanged in HELLO; the orchestrator only *warns* on mismatch.
GRIPPER_METAWORLD = DimSpec("gripper", 1, "metaworld_gripper", (-1, 1), description="+1 closes, -1 opens")
STATE_EEF_XYZ_GRIP = DimSpec("state", 4, "eef_pos3_gripper1")
PRIVILEGED_STATE = DimSpec("privileged_state", 39, "metaworld_obs39")


class MetaWorldMT10Benchmark(StepBenchmark):
    """MetaWorld 3.x MT10 on vla-eval's ``StepBenchmark`` contract.

    Tasks: one per MT10 env (``get_tasks``); the orchestrator injects
    ``task["episode_idx"]`` and episode *i* of a task uses ``MT10.train_tasks``
    entry *i* of that env (so at most 50 episodes per task unless the eval entry
    sets ``throughput_mode: true``, which wraps ``episode_idx`` modulo 50).

    Episode end: ``truncated`` at 500 env steps, or (``stop_on_success=True``,
    default) the first step whose ``info["success"]`` is true.

    Args (eval-config ``params:``):
        seed: ``metaworld.MT10(seed=...)`` seed, fixes the 50 goals per env.
        image_size: square render size for both cameras.
        send_wrist_image: also render/send the ``gripperPOV`` camera.
        stop_on_success: end the episode at the first success.
        max_steps: env step cap (<= 500); also reported as metadata ``max_steps``.
        image_format: wire encoding of uint8 images, ``"png"`` (vla-eval's default,
            lossless, costs an encode per image per step), ``"jpeg"`` or ``"raw"``.
            ``None`` leaves vla-eval's process-wide default untouched.
    """

    render_backends = frozenset({"gpu", "cpu"})
    _ALL_RECORD_FIELDS = frozenset({"reward", "success", "action"})

    @classmethod
    def configure_render(cls, mode: str) -> dict[str, str]:
        # Called by the orchestrator before construction, i.e. before mujoco is imported.
        if mode == "cpu":
            return configure_mujoco_render("cpu")  # OSMesa
        # "gpu" (vla-eval's default mode): headless EGL. Respect an explicit MUJOCO_GL.
        return apply_env({"MUJOCO_GL": os.environ.get("MUJOCO_GL") or "egl"})

    def __init__(
        self,
        seed: int = 0,
        image_size: int = 224,
        send_wrist_image: bool = True,
        stop_on_success: bool = True,
        max_steps: int = MAX_PATH_LENGTH,
        image_format: str | None = None,
    ) -> None:
        super().__init__()
        os.environ.setdefault("MUJOCO_GL", "egl")  # direct construction (tests) skips configure_render
        if image_format is not None:
            from vla_eval.protocol.numpy_codec import set_image_format

            set_image_format(image_format)  # type: ignore[arg-type]
        import metaworld  # noqa: F401  (imports mujoco; MUJOCO_GL must be set before)

        self.seed = seed
        self.image_size = int(image_size)
        self.send_wrist_image = bool(send_wrist_image)
        self.stop_on_success = bool(stop_on_success)
        self.max_steps = min(int(max_steps), MAX_PATH_LENGTH)

        t0 = time.monotonic()
        self._mt = metaworld.MT10(seed=seed)
        self.mt10_build_s = time.monotonic() - t0
        logger.info("metaworld.MT10(seed=%s) built in %.1fs", seed, self.mt10_build_s)
        self._goals: dict[str, list[Any]] = {
            name: [t for t in self._mt.train_tasks if t.env_name == name] for name in self._mt.train_classes
        }
        self._envs: dict[str, tuple[Any, Any]] = {}  # name -> (env, mujoco.Renderer)
        self._env: Any = None
        self._renderer: Any = None
        self._success = False
        self._t_start = 0.0

    # -- data ------------------------------------------------------------

    def get_tasks(self) -> list[dict[str, Any]]:
        return [
            {"name": name, "suite": "MT10", "instruction": INSTRUCTIONS.get(name, name)}
            for name in self._mt.train_classes
        ]

    def get_metadata(self) -> dict[str, Any]:
        return {"max_steps": self.max_steps, "max_episodes_per_task": N_GOALS}

    def get_metric_keys(self) -> dict[str, str]:
        return {"success": "mean", "terminal_step": "mean"}

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"position": POSITION_DELTA, "gripper": GRIPPER_METAWORLD}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        spec = {
            "corner": IMAGE_RGB,
            "state": STATE_EEF_XYZ_GRIP,
            "language": LANGUAGE,
            "privileged_state": PRIVILEGED_STATE,
        }
        if self.send_wrist_image:
            spec["gripperPOV"] = IMAGE_RGB
        return spec

    # -- episode -----------------------------------------------------------

    def _get_env(self, name: str) -> tuple[Any, Any]:
        if name not in self._envs:
            import mujoco

            env = self._mt.train_classes[name]()
            renderer = mujoco.Renderer(env.model, self.image_size, self.image_size)
            self._envs[name] = (env, renderer)
        return self._envs[name]

    def reset(self, task: dict[str, Any]) -> Any:
        name = task["name"]
        idx = int(task.get("episode_idx", 0))
        goals = self._goals[name]
        if idx >= len(goals):
            raise ValueError(
                f"{name}: episode_idx {idx} >= {len(goals)} MT10 goals; "
                "use episodes_per_task <= 50 or set throughput_mode: true in the eval entry"
            )
        self._env, self._renderer = self._get_env(name)
        self._env.set_task(goals[idx])
        obs, _info = self._env.reset()
        self._success = False
        self._t_start = time.time()
        if self._recorder.is_active:
            self._recorder.record_video(self._render("corner"))
        return obs

    def step(self, action: dict[str, Any]) -> StepResult:
        a = np.asarray(action.get("actions", action.get("action")), dtype=np.float32).reshape(-1)
        if a.shape[0] != 4:
            raise ValueError(f"MetaWorld expects a 4-D action, got shape {a.shape}")
        obs, reward, terminated, truncated, info = self._env.step(a)
        success = bool(info.get("success", False))
        self._success = self._success or success
        done = (
            bool(terminated)
            or bool(truncated)
            or (self.stop_on_success and success)
            or self._env.curr_path_length >= self.max_steps
        )
        if self._recorder.is_active:
            self._recorder.record_step(reward=float(reward), success=success, action=a)
        return StepResult(obs=obs, reward=float(reward), done=done, info=info)

    def _render(self, camera: str) -> np.ndarray:
        self._renderer.update_scene(self._env.data, camera=camera)
        img = self._renderer.render()
        if camera == "corner":
            img = img[::-1]  # the corner camera renders upside down
        return np.ascontiguousarray(img, dtype=np.uint8)

    def make_obs(self, raw_obs: Any, task: dict[str, Any]) -> dict[str, Any]:
        images = {"corner": self._render("corner")}
        if self.send_wrist_image:
            images["gripperPOV"] = self._render("gripperPOV")
        raw = np.asarray(raw_obs, dtype=np.float64)
        return {
            "images": images,
            "state": raw[:4].astype(np.float32),
            "task_description": task.get("instruction", task["name"]),
            "privileged_state": raw,
            "task_name": task["name"],
        }

    def get_step_result(self, step_result: StepResult) -> dict[str, Any]:
        return {
            "success": self._success,
            "final_success": bool(step_result.info.get("success", False)),
            "terminal_step": int(self._env.curr_path_length),
            "t_start": self._t_start,
            "t_end": time.time(),
        }

    def cleanup(self) -> None:
        for env, renderer in self._envs.values():
            try:
                renderer.close()
            except Exception:
                pass
            try:
                env.close()
            except Exception:
                pass
        self._envs.clear()


# ---------------------------------------------------------------------------
# Launcher
# ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_health(port: int, proc: subprocess.Popen | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{port}/health"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"model server exited with {proc.returncode} before becoming healthy")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"model server on port {port} not healthy after {timeout_s}s")


def make_eval_config(
    *,
    tasks: Sequence[str],
    episodes_per_task: int,
    server_url: str,
    output_dir: str,
    seed: int = 0,
    stop_on_success: bool = True,
    max_steps: int = MAX_PATH_LENGTH,
    send_wrist_image: bool = True,
    image_format: str | None = None,
    server_timeout_s: float = 60.0,
    record_video: bool = False,
    throughput_mode: bool = False,
) -> dict[str, Any]:
    """The eval-config dict (same schema as the YAML ``vla-eval run -c`` reads)."""
    params: dict[str, Any] = {
        "seed": seed,
        "stop_on_success": stop_on_success,
        "max_steps": max_steps,
        "send_wrist_image": send_wrist_image,
    }
    if image_format is not None:
        params["image_format"] = image_format
    entry: dict[str, Any] = {
        "benchmark": BENCHMARK_IMPORT,
        "name": "metaworld_mt10",
        "mode": "sync",
        "episodes_per_task": int(episodes_per_task),
        "tasks": list(tasks),
        "max_steps": max_steps,
        "params": params,
    }
    if throughput_mode:
        entry["throughput_mode"] = True
    if record_video:
        entry["recording"] = {"record_video": True}
    return {
        "server": {"url": server_url, "timeout": server_timeout_s},
        "output_dir": output_dir,
        "render": "gpu",  # vla-eval's name for "native" rendering; our configure_render maps it to EGL
        "benchmarks": [entry],
    }


def episodes_dataframe(aggregates: list[dict[str, Any]]):
    """Flatten ``vla_eval.results.export`` aggregates into one row per episode."""
    import pandas as pd

    rows = []
    for agg in aggregates:
        for task in agg.get("tasks", []):
            for ep in task.get("episodes", []):
                m = ep.get("metrics") or {}
                rows.append(
                    {
                        "task": ep.get("name", task["task"]),
                        "episode": int(ep.get("episode_id", -1)),
                        "success": bool(m.get("success", False)),
                        "terminal_step": m.get("terminal_step"),
                        "steps": ep.get("steps"),
                        "wall_s": ep.get("elapsed_sec"),
                        "t_start": m.get("t_start"),
                        "t_end": m.get("t_end"),
                        "failure_reason": ep.get("failure_reason"),
                        "sid": ep.get("sid"),
                    }
                )
    cols = ["task", "episode", "success", "terminal_step", "steps", "wall_s", "t_start", "t_end", "failure_reason", "sid"]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["task", "episode"], kind="stable").reset_index(drop=True)


def run_vla_eval(
    tasks: Sequence[str] | int | None = None,
    episodes_per_task: int = 1,
    max_batch: int = 1,
    max_wait_ms: float = 10.0,
    shards: int = 1,
    *,
    seed: int = 0,
    stop_on_success: bool = True,
    max_steps: int = MAX_PATH_LENGTH,
    send_wrist_image: bool = True,
    image_format: str | None = None,
    extra_cost: str | None = None,
    extra_cost_factory: str | None = None,
    extra_cost_kwargs: dict[str, Any] | None = None,
    chunk_size: int | None = None,
    server_mode: str = "process",
    output_dir: str | os.PathLike | None = None,
    keep_output: bool = True,
    timeout_s: float = 3600.0,
    server_timeout_s: float = 60.0,
    record_video: bool = False,
    throughput_mode: bool = False,
    python: str | None = None,
    extra_env: dict[str, str] | None = None,
    verbose: bool = False,
):
    """Run MetaWorld MT10 through vla-eval (``--no-docker``) and return per-episode results.

    Args:
        tasks: MT10 env names, or an int *n* for the first *n* MT10 tasks, or None for all 10.
        episodes_per_task: episodes per task; episode *i* uses MT10 goal *i* (<= 50).
        max_batch: model server ``max_batch_size`` (1 = vla-eval's unbatched path).
        max_wait_ms: model server ``max_wait_time`` (vla-eval takes seconds; converted here).
        shards: parallel environments = separate ``vla-eval run`` processes, each with
            one env and one WebSocket session, sharing one eval id / SQLite work queue.
        extra_cost / extra_cost_factory / extra_cost_kwargs: forwarded to the server
            (see ``vla_eval_expert_server.MetaWorldExpertServer``), import strings.
        server_mode: ``"process"`` (own process, like ``vla-eval serve``; default) or
            ``"thread"`` (``vla_eval.serve_background`` in this process).
        output_dir: where the config, logs, SQLite recording and exports go
            (default: a fresh dir under /tmp/vla_eval_runs).

    Returns:
        pandas.DataFrame with columns task, episode, success, terminal_step, steps,
        wall_s (+ t_start, t_end, failure_reason, sid). ``df.attrs`` holds
        ``total_wall_s`` (first shard launch -> last shard exit), ``server_start_s``,
        ``eval_id``, ``output_dir``, ``server_stats`` and the shard return codes.
    """
    if tasks is None:
        task_list = list(MT10_TASKS)
    elif isinstance(tasks, int):
        task_list = list(MT10_TASKS[:tasks])
    else:
        task_list = list(tasks)
    unknown = [t for t in task_list if t not in MT10_TASKS]
    if unknown:
        raise ValueError(f"not MT10 tasks: {unknown}")
    if shards < 1 or max_batch < 1:
        raise ValueError("shards and max_batch must be >= 1")

    python = python or sys.executable
    eval_id = str(uuid.uuid4())
    out = Path(output_dir) if output_dir is not None else Path("/tmp/vla_eval_runs") / eval_id[:8]
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    stats_path = out / "server_stats.json"

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (VLA_EVAL_PYTHONPATH, env.get("PYTHONPATH", "")) if p)
    env.setdefault("MUJOCO_GL", "egl")
    env.update(extra_env or {})

    server_args: dict[str, Any] = {
        "max_batch_size": int(max_batch),
        "max_wait_time": float(max_wait_ms) / 1000.0,
        "stats_path": str(stats_path),
    }
    if extra_cost:
        server_args["extra_cost"] = extra_cost
    if extra_cost_factory:
        server_args["extra_cost_factory"] = extra_cost_factory
    if extra_cost_kwargs:
        server_args["extra_cost_kwargs"] = extra_cost_kwargs
    if chunk_size:
        server_args["chunk_size"] = int(chunk_size)

    server_proc: subprocess.Popen | None = None
    server_handle = None
    server_log = open(out / "server.log", "w")
    t_srv = time.monotonic()
    try:
        if server_mode == "process":
            port = _free_port()
            cmd = [python, str(SERVER_SCRIPT), "--address", f"127.0.0.1:{port}"]
            for k, v in server_args.items():
                cmd.append(f"--args.{k}={json.dumps(v) if isinstance(v, dict) else v}")
            server_proc = subprocess.Popen(cmd, env=env, stdout=server_log, stderr=subprocess.STDOUT, cwd=str(out))
            _wait_health(port, server_proc, timeout_s=120.0)
        elif server_mode == "thread":
            import vla_eval

            if VLA_EVAL_PYTHONPATH not in sys.path:
                sys.path.insert(0, VLA_EVAL_PYTHONPATH)
            from vla_eval_expert_server import MetaWorldExpertServer

            server_handle = vla_eval.serve_background(MetaWorldExpertServer(**server_args), host="127.0.0.1")
            port = server_handle.port
            _wait_health(port, None, timeout_s=30.0)
        else:
            raise ValueError(f"server_mode must be 'process' or 'thread', got {server_mode!r}")
        server_start_s = time.monotonic() - t_srv

        cfg = make_eval_config(
            tasks=task_list,
            episodes_per_task=episodes_per_task,
            server_url=f"ws://127.0.0.1:{port}",
            output_dir=str(out),
            seed=seed,
            stop_on_success=stop_on_success,
            max_steps=max_steps,
            send_wrist_image=send_wrist_image,
            image_format=image_format,
            server_timeout_s=server_timeout_s,
            record_video=record_video,
            throughput_mode=throughput_mode,
        )
        import yaml

        cfg_path = out / "eval.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))

        base = [python, "-m", "vla_eval.cli.main", "run", "-c", str(cfg_path), "--no-docker", "--eval-id", eval_id]
        if verbose:
            base.append("--verbose")
        procs: list[tuple[subprocess.Popen, Any]] = []
        t0 = time.monotonic()
        for i in range(shards):
            cmd = list(base)
            if shards > 1:
                cmd += ["--shard-id", str(i), "--num-shards", str(shards)]
            log = open(out / f"shard{i}.log", "w")
            procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(out)), log))
        rcs = []
        for p, log in procs:
            try:
                rcs.append(p.wait(timeout=max(1.0, timeout_s - (time.monotonic() - t0))))
            except subprocess.TimeoutExpired:
                p.kill()
                rcs.append(p.wait())
            finally:
                log.close()
        total_wall_s = time.monotonic() - t0
    finally:
        if server_proc is not None and server_proc.poll() is None:
            server_proc.terminate()
            try:
                server_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server_proc.kill()
                server_proc.wait()
        if server_handle is not None:
            server_handle.close()
        server_log.close()

    if any(rc != 0 for rc in rcs):
        logger.warning("vla-eval shard exit codes %s; see %s/shard*.log", rcs, out)

    from vla_eval.results.export import export_eval

    try:
        aggregates = export_eval(out, eval_id)  # same as `vla-eval export <out>/recording-<id>.sqlite`
    except FileNotFoundError as exc:
        raise RuntimeError(f"no vla-eval recording (shard exit codes {rcs}); see {out}/shard*.log, server.log") from exc
    df = episodes_dataframe(aggregates)
    server_stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    df.attrs.update(
        {
            "harness": "vla-eval",
            "eval_id": eval_id,
            "output_dir": str(out),
            "total_wall_s": total_wall_s,
            "server_start_s": server_start_s,
            "shard_returncodes": rcs,
            "shards": shards,
            "max_batch": max_batch,
            "max_wait_ms": max_wait_ms,
            "server_mode": server_mode,
            "server_stats": server_stats,
            "num_errors": sum(int(a.get("num_errors", 0)) for a in aggregates),
            "partial": any(a.get("partial") for a in aggregates),
        }
    )
    if not keep_output:
        shutil.rmtree(out, ignore_errors=True)
    return df


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Run MetaWorld MT10 through vla-eval (--no-docker)")
    ap.add_argument("--tasks", nargs="*", default=None, help="MT10 env names (default: all 10)")
    ap.add_argument("--episodes-per-task", type=int, default=1)
    ap.add_argument("--max-batch", type=int, default=1)
    ap.add_argument("--max-wait-ms", type=float, default=10.0)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--server-mode", default="process", choices=["process", "thread"])
    ap.add_argument("--image-format", default=None, choices=["png", "jpeg", "raw"])
    ap.add_argument("--extra-cost-factory", default=None)
    ap.add_argument("--extra-cost-kwargs", default=None, help="JSON dict")
    ap.add_argument("--output-dir", default=None)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    df = run_vla_eval(
        a.tasks or None,
        a.episodes_per_task,
        a.max_batch,
        a.max_wait_ms,
        a.shards,
        server_mode=a.server_mode,
        image_format=a.image_format,
        extra_cost_factory=a.extra_cost_factory,
        extra_cost_kwargs=json.loads(a.extra_cost_kwargs) if a.extra_cost_kwargs else None,
        output_dir=a.output_dir,
        verbose=a.verbose,
    )
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.drop(columns=["sid", "t_start", "t_end"]))
    attrs = {k: v for k, v in df.attrs.items()}
    print(json.dumps(attrs, indent=1, default=str))


if __name__ == "__main__":
    _main()
