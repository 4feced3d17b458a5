"""The concurrency search's rules on synthetic probe tables: where it stops, which caps
and feasibility checks keep it from probing, and which probes fail. Each machine below is
a function from (workers, replicas) to what a probe would measure."""

import math

import pytest

from workbench.runtime.search import (GIB, SearchRules, cost_per_worker, memory_per_worker,
                                      predicted_peak, replica_cap, run_rules)


def machine(rate, busy=lambda w, r: 1.0 * w, peak=lambda w, r: 1 * GIB + w * GIB,
            replica=lambda w, r: 0.5 * GIB, fails=None):
    """A synthetic machine: each function of (workers, replicas) gives one measurement."""
    probed = []

    def measure(w, r):
        probed.append((w, r))
        reason = (fails or (lambda w, r: ""))(w, r)
        return {"workers": w, "replicas": r, "steps_per_s": rate(w, r),
                "busy_cores": busy(w, r), "device_peak_bytes": peak(w, r),
                "replica_peak_bytes": replica(w, r), "status": "failed" if reason else "ok",
                "reason": reason}

    return measure, probed


def rules(**kw):
    return SearchRules(**{"cores": 16, "device_bytes": (64 * GIB,), "reserve_bytes": 1 * GIB,
                          "max_workers": 64, "max_replicas": 1, "min_gain": 0.03, **kw})


def test_workers_grow_until_the_gain_falls_below_min_gain():
    measure, probed = machine(lambda w, r: {1: 10, 2: 19, 3: 26, 4: 26.5}.get(w, 27))
    result = run_rules(rules(worker_candidates=(1, 2, 3, 4, 6)), measure)
    assert probed == [(1, 1), (2, 1), (3, 1), (4, 1)]  # 4 gains 1.9% < 3%: stop, 6 untried
    assert (result.best.workers, result.best.replicas) == (3, 1)
    assert result.decisions[-1].startswith("stop: 4 workers gain less than 3%")


def test_the_worker_cap_comes_from_the_fitted_cpu_cost_per_worker():
    # each worker keeps one core busy on 4 cores: c = 1, cap floor(4 / 1) = 4
    measure, probed = machine(lambda w, r: 10.0 * w)
    result = run_rules(rules(cores=4, worker_candidates=(1, 2, 3, 4, 6, 8)), measure)
    assert probed == [(1, 1), (2, 1), (3, 1), (4, 1)]
    assert result.cost_per_worker == 1.0 and result.worker_cap == 4
    assert "6 workers exceed the worker cap 4" in result.decisions[-1]
    # workers that wait on the policy half the time: c = 0.5, cap 8, so 6 and 8 are tried
    measure, probed = machine(lambda w, r: 10.0 * w, busy=lambda w, r: 0.5 * w + 0.2)
    result = run_rules(rules(cores=4, worker_candidates=(1, 2, 3, 4, 6, 8, 12)), measure)
    assert probed[-2:] == [(6, 1), (8, 1)] and result.worker_cap == 8
    assert result.cost_per_worker == pytest.approx(0.5)


def test_before_two_probes_the_cost_per_worker_is_one():
    first = {"workers": 1, "replicas": 1, "status": "ok", "busy_cores": 0.3}
    assert cost_per_worker([first]) == 1.0
    # so on 2 cores the second probe (2 workers) is allowed whatever the first measured
    measure, probed = machine(lambda w, r: 10.0 * w, busy=lambda w, r: 0.3 * w)
    run_rules(rules(cores=2, worker_candidates=(1, 2, 3, 4)), measure)
    assert probed[:2] == [(1, 1), (2, 1)]


def test_the_replica_cap_subtracts_the_reserve_on_every_gpu():
    two_gpus = rules(device_bytes=(24 * GIB, 24 * GIB), reserve_bytes=2 * GIB, max_replicas=64)
    assert replica_cap(two_gpus, 5 * GIB) == 8  # floor(22 / 5) per GPU; once-only gives 9
    one_gpu = rules(device_bytes=(24 * GIB,), reserve_bytes=2 * GIB, max_replicas=64)
    assert replica_cap(one_gpu, 5 * GIB) == 4
    assert replica_cap(rules(max_replicas=3), 1 * GIB) == 3  # never more than it may start


def test_the_replica_footprint_is_the_first_probes_peak():
    # replicas report a larger peak while serving than right after loading; the rules
    # take the first probe's peak (6 GiB here), whatever later probes report
    measure, _ = machine(lambda w, r: 10.0 * w + r,
                         replica=lambda w, r: 6 * GIB if (w, r) == (1, 1) else 2 * GIB)
    result = run_rules(rules(worker_candidates=(1, 2), max_replicas=8,
                             device_bytes=(24 * GIB,), reserve_bytes=2 * GIB), measure)
    assert result.replica_footprint_gib == 6.0
    assert result.replica_cap == 3  # floor((24 - 2) / 6)


def test_replicas_grow_while_they_help_up_to_the_cap():
    # two replicas help at 4 workers, a third does not
    rate = {(1, 1): 10, (2, 1): 18, (2, 2): 19, (4, 2): 40, (4, 3): 40.5}
    measure, probed = machine(lambda w, r: rate.get((w, r), 20 * r))
    result = run_rules(rules(worker_candidates=(1, 2, 4), max_replicas=4,
                             device_bytes=(64 * GIB,)), measure)
    # at 2 workers a second replica gains 5.6%, so 4 workers start at two replicas
    assert probed == [(1, 1), (2, 1), (2, 2), (4, 2), (4, 3)]
    assert (result.best.workers, result.best.replicas) == (4, 2)


def test_configurations_that_would_not_fit_in_memory_are_never_probed():
    # one 16 GiB GPU, 1 GiB reserved: what a probe really peaks at is 1 + 5 r + 1.5 w GiB
    true_peak = lambda w, r: (1 + 5 * r + 1.5 * w) * GIB  # noqa: E731
    measure, probed = machine(lambda w, r: 10.0 * w * r, busy=lambda w, r: 0.1 * w,
                              peak=true_peak, replica=lambda w, r: 5 * GIB)
    gpu = rules(device_bytes=(16 * GIB,), reserve_bytes=1 * GIB, max_replicas=4,
                worker_candidates=(1, 2, 3, 4, 6))
    result = run_rules(gpu, measure)
    assert all(true_peak(w, r) < 15 * GIB for w, r in probed)
    assert any(d.startswith("skip") for d in result.decisions)
    # the fitted memory per worker is the slope between the fewest and most workers
    assert result.memory_per_worker_gib == pytest.approx(1.5)
    skipped = [d for d in result.decisions if d.startswith("skip")]
    assert "over 15.00 GiB (16.00 GiB less the 1.00 GiB reserve)" in skipped[0]


def test_prediction_uses_the_busiest_device():
    rules2 = rules(device_bytes=(24 * GIB, 24 * GIB))
    incumbent = {"workers": 2, "replicas": 2, "device_peak_bytes": 8 * GIB}
    # 3 replicas over 2 GPUs: the busiest holds 2 (one more than now), 4 workers: 2 per GPU
    assert predicted_peak(rules2, incumbent, 4, 3, 5 * GIB, 1 * GIB) == 14 * GIB
    rows = [{"workers": 1, "replicas": 1, "status": "ok", "device_peak_bytes": 7 * GIB,
             "replica_peak_bytes": 5 * GIB}]
    assert memory_per_worker(rows, rules2) == 2 * GIB  # before two probes: first's share


def test_a_failed_probe_stops_the_search_and_the_incumbent_stays():
    measure, probed = machine(lambda w, r: 10.0 * w,
                              fails=lambda w, r: "out of memory" if w >= 3 else "")
    result = run_rules(rules(worker_candidates=(1, 2, 3, 4)), measure)
    assert probed == [(1, 1), (2, 1), (3, 1)]
    assert (result.best.workers, result.best.replicas) == (2, 1)
    assert "failed: out of memory" in result.decisions[-2]
    assert result.decisions[-1].startswith("stop: the probe at 3 workers failed")
    table = result.probes
    assert table["status"].tolist() == ["ok", "ok", "failed"]


def test_a_failed_first_probe_falls_back_to_one_worker_and_one_replica():
    measure, probed = machine(lambda w, r: 10.0, fails=lambda w, r: "worker 0 died")
    result = run_rules(rules(), measure)
    assert probed == [(1, 1)] and (result.best.workers, result.best.replicas) == (1, 1)
    assert "the first probe failed" in result.decisions[-1]
    assert math.isclose(result.cost_per_worker, 1.0)
