"""The sequential backend through the runner, and who is blamed when an episode fails."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import workbench
from workbench.contracts import Capabilities, ContractError
from workbench.policies import Policy

PICK = dict(benchmark="metaworld", suite="MT1:pick-place-v3", episodes=2, image_size=64,
            progress=False)


class WantsDepth(Policy):
    name = "wants-depth"

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("images.depth", "state"))


class BadAtStep(Policy):
    """Emits an out-of-bounds action at step 10 of episode 0."""

    name = "bad-at-step"

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("state",))

    def _reset(self, context):
        return {"bad": context.episode_id.endswith("0000")}

    def _act(self, observation, state):
        if state["bad"] and observation["step"] == 10:
            return np.array([0, 0, 7.0, 0], np.float32)
        return np.zeros(4, np.float32)


def test_policy_reading_missing_features_is_refused_before_any_episode(tmp_path):
    with pytest.raises(ContractError, match="reads features \\['images.depth'\\]"):
        workbench.run(dict(PICK, policy=WantsDepth, output_dir=str(tmp_path)))
    assert not (tmp_path / "records.sqlite").exists()  # nothing was planned or claimed


def test_bad_action_mid_episode_is_a_policy_error_and_the_run_goes_on(tmp_path):
    df = workbench.run(dict(PICK, policy=BadAtStep, output_dir=str(tmp_path))).results
    first, second = df.iloc[0], df.iloc[1]
    assert first["error_kind"] == "policy" and first["steps"] == 10
    assert "metaworld-v1: action: component 2 = 7 outside [-1, 1]" in first["error_message"]
    assert pd.isna(second["error_kind"]) and second["steps"] == 500 and not second["success"]
    assert set(df["status"]) == {"finished"}
    summary = workbench.summarize(df).set_index("task").loc["ALL"]
    assert summary["policy_errors"] == 1 and summary["success_rate"] == 0.0  # it counts


@pytest.mark.parametrize("backend", ["sequential", "pool"])
def test_a_render_failure_is_an_infrastructure_error_of_its_episode_only(tmp_path, backend):
    result = workbench.run(dict(PICK, benchmark="wb_plugin.benchmarks:FaultyMetaWorld",
                                benchmark_options={"fail_render": ["pick-place-v3", 1, 4]},
                                suite="MT1:pick-place-v3", episodes=3, image_size=32,
                                policy="expert-vision-cost", policy_options={"chunk_size": 4},
                                observe="chunk_boundary", backend=backend,
                                output_dir=str(tmp_path)))
    df = result.results.set_index("episode_id")
    bad = df.loc["metaworld/MT1:pick-place-v3/pick-place-v3/0001"]
    assert bad["error_kind"] == "infrastructure" and bad["steps"] == 4
    assert "observation: RuntimeError: EGL: the rendering context was lost" in bad["error_message"]
    others = df.drop(index=bad.name)
    assert others["error_kind"].isna().all() and others["success"].all()
    summary = workbench.summarize(result.results).set_index("task").loc["ALL"]
    assert summary["infra_errors"] == 1 and summary["success_rate"] == 1.0  # left out


def test_runs_sharing_an_output_dir_keep_their_own_rollout_files(tmp_path):
    common = dict(benchmark="metaworld", suite="MT1:reach-v3", episodes=1, image_size=32,
                  output_dir=str(tmp_path), progress=False, policy="expert")
    a = workbench.run(common).results
    b = workbench.run(dict(common, policy_options={"defect": "noise", "level": 0.5})).results
    assert a["rollout_path"].iloc[0] != b["rollout_path"].iloc[0]
    steps = [len(np.load(p)["actions"]) for p in (a["rollout_path"].iloc[0],
                                                  b["rollout_path"].iloc[0])]
    assert steps == [a["steps"].iloc[0], b["steps"].iloc[0]]


def test_running_a_config_again_resumes_and_a_crashed_claim_is_not_retried(tmp_path):
    from workbench.records import RecordStore

    config = workbench.load_config(dict(benchmark="metaworld", suite="MT10", progress=False,
                                        tasks=["reach-v3"], episodes=3, policy="expert",
                                        image_size=32, output_dir=str(tmp_path)))
    store = RecordStore(tmp_path / "records.sqlite")  # a crash mid-episode: claimed, never finished
    run_id = config.resolved_run_id()
    store.create_run(run_id, workbench.plan_episodes("metaworld", "MT10", ["reach-v3"], 3),
                     config.to_dict())
    store.claim(run_id, "metaworld/MT10/reach-v3/0001", "crashed-worker")
    store.close()
    again = workbench.run(config)
    assert [r["episode_id"] for r in again.report.rows] == ["metaworld/MT10/reach-v3/0000",
                                                            "metaworld/MT10/reach-v3/0002"]
    crashed = again.results.set_index("episode_id").loc["metaworld/MT10/reach-v3/0001"]
    assert crashed["error_kind"] == "infrastructure" and "interrupted" in crashed["error_message"]
    assert workbench.run(config).report.rows == []  # nothing left, nothing re-run


def test_a_finished_run_run_again_says_so_in_one_line_and_records_where_it_ran(tmp_path,
                                                                             capsys):
    import subprocess

    from workbench.records import RecordStore

    config = workbench.load_config(dict(benchmark="metaworld", suite="MT1:reach-v3",
                                        episodes=2, policy="expert", image_size=32,
                                        output_dir=str(tmp_path)))
    first = workbench.run(config)
    out, err = capsys.readouterr()
    assert "2/2" in err and "nothing to run" not in out
    again = workbench.run(config)
    out, err = capsys.readouterr()
    assert again.report.rows == []
    assert out.splitlines() == [f"expert on metaworld: all 2 episodes already recorded in "
                                f"{first.records_path} (run {first.run_id}); nothing to run"]
    assert "0/0" not in err and "ep/s" not in err, "no empty progress bar"
    assert "nothing ran in this call" in again._repr_html_()
    assert "2 of 2 episodes recorded, 2 in this call" in first._repr_html_()

    store = RecordStore(first.records_path)
    made = store.provenance(first.run_id)
    store.close()
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=Path(workbench.__file__).parent).stdout.strip()
    assert made["commit"] == head and made["workbench_version"] == workbench.__version__
    assert made["policy_source_file"].endswith("workbench/policies/scripted.py")
    assert len(made["policy_source_hash"]) == 64 and "resumed" not in made
    assert set(made["benchmark_versions"]) == {"metaworld", "mujoco"}


def test_video_films_the_plans_first_episodes_whatever_the_backend(tmp_path):
    common = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"],
                  episodes=2, policy="expert", image_size=32, progress=False, video=2,
                  max_steps=40, output_dir=str(tmp_path))
    for backend in ("sequential", "pool"):
        df = workbench.run(dict(common, backend=backend, run_id=backend)).results
        filmed = sorted(df.loc[df["video_path"].notna(), "episode_id"])
        assert filmed == ["metaworld/MT10/push-v3/0000", "metaworld/MT10/push-v3/0001"]
