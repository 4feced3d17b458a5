import workbench
from workbench.runtime.job import build_components
from workbench.runtime.limits import measure_step_cost


def test_step_cost_in_one_and_in_concurrent_processes():
    config = workbench.load_config(dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"],
                                        policy="expert-vision-cost",
                                        policy_options={"chunk_size": 4}, image_size=32))
    plan = workbench.plan_episodes("metaworld", "MT10", ["reach-v3"], 1)
    parts = build_components(config)
    one = measure_step_cost(parts, plan, cores=2)
    two = measure_step_cost(parts, plan, cores=2, processes=2)
    assert one.steps > 0 and two.steps == 2 * one.steps  # each process runs the whole plan
    assert one.cpu_s > 0 and one.limit_steps_per_s == 2 / one.cpu_s_per_step
    assert two.processes == 2 and two.independent_steps_per_s > 0
