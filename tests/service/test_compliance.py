"""The SIM wire compliance suite (workbench.service.compliance) against a real service on
loopback: every rule holds on ours, from Python and from its command line, and a rule that
does not hold is reported as failed (exit 1)."""

import os
import subprocess
import sys

import pytest

from workbench.contracts.rendering import use_headless_rendering
from workbench.service import compliance
from workbench.service.sim_server import build_service


@pytest.fixture(scope="module")
def service():
    use_headless_rendering()
    svc = build_service("metaworld", "MT1:reach-v3", episodes=4, image_size=32,
                        max_steps=10).start()
    yield svc
    svc.close()


def test_every_rule_holds_on_the_workbench_service(service):
    report = compliance.run_compliance(service.url, service.token)
    assert report.failures == [], report.text()
    assert len(report.checks) >= 18
    admin = compliance._Link(service.url)
    try:
        admin.ask({"type": "hello", "protocol": compliance.PROTOCOL, "token": service.token})
        states = [c["state"] for c in admin.ask({"type": "status"})["cases"]]
    finally:
        admin.close()
    assert states.count("unattempted") == 3  # it attempted one case of the four


def test_the_command_line_runs_it_against_a_url(service):
    env = {**os.environ, "WORKBENCH_SIM_TOKEN": service.token}
    done = subprocess.run([sys.executable, "-m", "workbench.service.compliance", service.url],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr  # on the next unattempted case
    assert done.stdout.strip().endswith("0 failed")


def test_a_rule_that_fails_is_reported_and_exits_1(service):
    env = {**os.environ, "WORKBENCH_SIM_TOKEN": service.token + "-not-it"}
    done = subprocess.run([sys.executable, "-m", "workbench.service.compliance", service.url],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1
    assert "FAIL the operator's hello is welcomed" in done.stdout
