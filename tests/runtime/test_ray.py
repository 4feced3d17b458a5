"""Shards of a plan as Ray tasks on a real local Ray instance."""

import pytest

ray = pytest.importorskip("ray", reason="ray is installed with the test extra")

from workbench.config import EvalConfig  # noqa: E402
from workbench.evaluate import evaluate  # noqa: E402
from workbench.runtime.ray_backend import evaluate_on_ray  # noqa: E402


def outcomes(df):
    return {r.episode_id: (bool(r.success), r.terminal_step) for r in df.itertuples()}


def test_ray_shards_give_the_sequential_outcomes(tmp_path):
    common = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"],
                  episodes=2, policy="expert", policy_options={"defect": "noise", "level": 0.3},
                  image_size=32, progress=False)
    reference = evaluate(EvalConfig(**common, output_dir=str(tmp_path / "seq"))).results
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        df = evaluate_on_ray(EvalConfig(**common, output_dir=str(tmp_path / "ray"), workers=1,
                                        runtime="pool"), shards=2, cpus_per_shard=1)
    finally:
        ray.shutdown()
    assert set(df["status"]) == {"finished"} and df["error_kind"].isna().all()
    assert outcomes(df) == outcomes(reference)
    assert df["worker"].str.startswith("ray-shard-").all()
    assert df["worker"].nunique() == 2
