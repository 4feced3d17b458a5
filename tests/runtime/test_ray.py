"""The Ray backend on a real local Ray instance, through the runner."""

import pytest

ray = pytest.importorskip("ray", reason="ray is installed with the test extra")

import workbench  # noqa: E402

COMMON = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"], episodes=2,
              image_size=32, progress=False)


def outcomes(df):
    return {r.episode_id: (bool(r.success), None if r.terminal_step != r.terminal_step
                           else int(r.terminal_step), int(r.steps)) for r in df.itertuples()}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("policy, options", [
    ("expert", {"defect": "noise", "level": 0.3}),
    ("wb_plugin.policies:ResidualExpert", {}),  # batches natively, defined outside workbench/
], ids=["scripted", "batching"])
def test_ray_shards_give_the_sequential_outcomes_and_write_rollouts(tmp_path, local_ray, policy,
                                                                     options):
    common = dict(COMMON, policy=policy, policy_options=options)
    reference = workbench.run(dict(common, output_dir=str(tmp_path / "seq"))).results
    result = workbench.run(dict(common, output_dir=str(tmp_path / "ray"), backend="ray",
                                video=1, pool={"workers": 2, "max_wait_ms": 20},
                                ray={"shards": 2, "cpus_per_shard": 1}))
    df = result.results
    assert set(df["status"]) == {"finished"} and df["error_kind"].isna().all()
    assert outcomes(df) == outcomes(reference)
    assert df["worker"].str.startswith("ray-shard-").all() and df["worker"].nunique() == 2
    assert df["rollout_path"].notna().all()
    assert all((tmp_path / "ray" / "rollouts").glob("*.npz"))
    assert df["video_path"].notna().sum() == 1  # the plan's first episode, as elsewhere
    assert {r["worker"].split("/")[1] for r in result.report.rows} <= {"worker-0", "worker-1"}
