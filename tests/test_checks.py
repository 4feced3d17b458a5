"""The public checkers (workbench.check_adapter, workbench.check_policy and the CLI's
check-adapter / check-policy): every adapter that runs here and the registered policies
pass them, and components that break a contract fail the check that names it."""

import subprocess
import sys

import numpy as np
import pytest

import workbench
from workbench.benchmarks import benchmark_class
from workbench.benchmarks.metaworld import MetaWorldAdapter
from workbench.contracts import Capabilities
from workbench.policies import Policy, make_policy

RUNS_HERE = {"metaworld": "MT1:reach-v3", "kitchen": None, "aloha": None, "robosuite": None,
             "libero": "libero_spatial"}


@pytest.mark.parametrize("name", sorted(RUNS_HERE))
def test_every_adapter_that_runs_here_passes(name):
    if benchmark_class(name).readiness() != "ready":
        pytest.skip(f"{name}: {benchmark_class(name).readiness()}")
    report = workbench.check_adapter(name, suite=RUNS_HERE[name], steps=3)
    assert report.failures == [], report.text()
    assert len(report.checks) == 7


@pytest.mark.parametrize("name, protocol, task", [("zero", "metaworld-v1", "any"),
                                                  ("vision", "metaworld-v1", "any"),
                                                  ("expert", "metaworld-v1", "reach-v3"),
                                                  ("expert-mlp-cost", "metaworld-v1",
                                                   "reach-v3"),
                                                  ("zero", "libero-v1", "any")])
def test_registered_policies_pass(name, protocol, task):
    options = {"width": 64, "layers": 2} if name == "expert-mlp-cost" else {}
    report = workbench.check_policy(make_policy(name, protocol=protocol, **options), protocol,
                                    task=task)
    assert report.failures == [], report.text()
    assert len(report.checks) == 6


class Noisy(MetaWorldAdapter):
    """Rewards drawn afresh on every step: not the same outcome for the same episode."""

    def step(self, action):
        result = super().step(action)
        result.reward = float(np.random.default_rng().random())
        return result


class Chatty(MetaWorldAdapter):
    """Observes one feature more than it was asked for."""

    def observe(self, features):
        return super().observe(list(self.protocol.feature_names))


@pytest.mark.parametrize("cls, failed", [
    (Noisy, "the same episode and actions give the same trajectory and rewards"),
    (Chatty, "observe returns exactly the features asked for")])
def test_an_adapter_that_breaks_a_contract_fails_that_check(cls, failed):
    report = workbench.check_adapter(cls, suite="MT1:reach-v3", steps=3)
    assert [c.name for c in report.failures] == [failed]


class Lying(Policy):
    """Declares 4-D actions one at a time; returns 3-D chunks, random, unbatched."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def _load(self, context):
        return None

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("state",), native_batching=self.kind == "batch",
                            max_batch=4)

    def _act(self, observation, episode):
        if self.kind == "dim":
            return np.zeros(3, np.float32)
        if self.kind == "random":
            return np.random.default_rng().uniform(-1, 1, 4).astype(np.float32)
        return np.zeros(4, np.float32)

    def _act_batch(self, observations, episodes):
        return [np.full(4, 0.5, np.float32) for _ in observations]


@pytest.mark.parametrize("kind, failed", [
    ("dim", ["every action meets metaworld-v1's action contract with chunk size 1"]),
    ("random", ["the same episode seed and observations give the same actions",
                "act_batch equals one call at a time (no native batching declared)"]),
    ("batch", ["act_batch equals one call at a time"])])
def test_a_policy_that_breaks_a_contract_fails_that_check(kind, failed):
    report = workbench.check_policy(Lying(kind), "metaworld-v1")
    assert [c.name for c in report.failures] == failed, report.text()


def test_the_command_line_exits_0_on_a_pass_and_1_on_a_failure():
    run = [sys.executable, "-m", "workbench.cli"]
    ok = subprocess.run(run + ["check-policy", "zero", "--protocol", "metaworld-v1"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("6 passed, 0 failed"), ok.stderr
    bad = subprocess.run(run + ["check-adapter", "tests.test_checks:Chatty", "--suite",
                                "MT1:reach-v3"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1, bad.stderr
    assert "FAIL observe returns exactly the features asked for" in bad.stdout
