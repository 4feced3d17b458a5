"""The errors the workbench raises on purpose, in one hierarchy (as Gymnasium's
``gymnasium.error``): catch :class:`WorkbenchError` for any of them, or one branch.

- :class:`ConfigError` (a ``ValueError``): a config, a CLI argument, a parameter or a
  file handed to the workbench is wrong; nothing ran.
- :class:`ContractError` (a ``ValueError``): an observation, an action or a component
  breaks what its protocol or capabilities declare.
- :class:`PolicyError`: the policy failed (its episode's policy failure): it hung,
  tried to end its process, broke its lifecycle, or its server said it failed.
- :class:`InfrastructureError`: the harness failed (a render, a transport, a dead
  process), not the policy; :class:`TransportError` is a connection that failed.
  Only the workbench's own code may say so: an instance remembers whether the
  workbench built it (``harness``), and one a policy builds to excuse its own failure
  is booked as the policy's (:func:`workbench.contracts.results.policy_blame`).

Every message has one form, ``<what>: expected <X>; got <Y>`` where a value was wrong.

>>> issubclass(ConfigError, ValueError), issubclass(TransportError, InfrastructureError)
(True, True)
"""

from __future__ import annotations

import sys


class WorkbenchError(Exception):
    """Base of every error the workbench raises on purpose."""


class ConfigError(WorkbenchError, ValueError):
    """A config, a CLI argument, a parameter or an input file is wrong; nothing ran."""


class ContractError(WorkbenchError, ValueError):
    """An observation, action or component breaks its declared protocol or capabilities."""


class PolicyError(WorkbenchError, RuntimeError):
    """The policy failed: its episode's policy failure, never the harness's."""


class InfrastructureError(WorkbenchError, RuntimeError):
    """The harness failed (a render, a transport, a dead process), not the policy.

    Only the harness may say so: an instance remembers whether the workbench's own code
    built it (``harness``). One that a policy's code builds, to excuse its own failure,
    is the policy's failure like any other exception.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.harness = _built_by_the_workbench()


class TransportError(InfrastructureError):
    """A connection failed: a policy server, a SIM service or a pipe to a process."""


def _built_by_the_workbench() -> bool:
    """Whether the code that constructed the InfrastructureError (past the ``__init__``
    of its classes) is a module of the workbench package."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name == "__init__" and \
            isinstance(frame.f_locals.get("self"), InfrastructureError):
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    return module == "workbench" or module.startswith("workbench.")
