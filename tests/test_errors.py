"""The error hierarchy of workbench.errors: every error the workbench raises on purpose is
a WorkbenchError of one branch, and messages share one separator ("; got")."""

import ast
from pathlib import Path

import pytest

import workbench
from workbench import errors
from workbench.contracts import ContractError, get_protocol, validate_action
from workbench.contracts.results import PolicyExited, PolicyTimeout, policy_blame
from workbench.policies import LifecycleError
from workbench.policies.wire_link import MalformedReply, PreflightError, ServerError
from workbench.records.store import RecordsError

PACKAGE = Path(workbench.__file__).parent


@pytest.mark.parametrize("cls, branch", [
    (PolicyTimeout, errors.PolicyError), (PolicyExited, errors.PolicyError),
    (LifecycleError, errors.PolicyError), (ServerError, errors.PolicyError),
    (MalformedReply, errors.PolicyError), (PreflightError, errors.ConfigError),
    (ContractError, errors.ContractError), (RecordsError, errors.WorkbenchError),
    (errors.TransportError, errors.InfrastructureError)])
def test_each_error_sits_on_its_branch(cls, branch):
    assert issubclass(cls, branch) and issubclass(cls, errors.WorkbenchError)


def test_a_bad_config_is_a_config_error_and_still_a_value_error(tmp_path):
    with pytest.raises(errors.ConfigError, match="episodes") as caught:
        workbench.run({"benchmark": "metaworld", "suite": "MT10", "tasks": ["reach-v3"],
                       "episodes": -1, "policy": "zero", "output_dir": str(tmp_path / "r")})
    assert isinstance(caught.value, ValueError)
    assert not (tmp_path / "r").exists()  # nothing was written


def test_a_broken_action_is_a_contract_error():
    import numpy as np

    with pytest.raises(errors.ContractError, match="expected"):
        validate_action(get_protocol("metaworld-v1"), np.zeros(3, np.float64))


def test_the_harness_alone_may_raise_an_infrastructure_error():
    assert errors.InfrastructureError("built here").harness is False  # a test is not the harness
    assert policy_blame(errors.TransportError("from a test")).value == "policy"
    assert errors.TransportError.__module__ == "workbench.errors"


def _messages(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_messages_use_one_separator_before_what_was_got():
    found = [f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for line, text in _messages(ast.parse(path.read_text()))
             if ", got " in text]
    assert found == []
