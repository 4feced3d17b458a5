from workbench.plan import plan_episodes
from workbench.runtime.limits import measure_step_cost
from workbench.runtime.parallel import adapter_factory, policy_factory


def test_step_cost_in_one_and_in_concurrent_processes():
    plan = plan_episodes("metaworld", "MT10", ["reach-v3"], 1)
    factories = (adapter_factory("metaworld", suite="MT10", image_size=32),
                 policy_factory("expert-vision-cost", chunk_size=4))
    one = measure_step_cost(*factories, plan, cores=2)
    two = measure_step_cost(*factories, plan, cores=2, processes=2)
    assert one.steps > 0 and two.steps == 2 * one.steps  # each process runs the whole plan
    assert one.cpu_s > 0 and one.limit_steps_per_s == 2 / one.cpu_s_per_step
    assert two.processes == 2 and two.independent_steps_per_s > 0
