"""Task-aware Bradley-Terry: a policy's strength may differ from task to task.

Plain Bradley-Terry gives each policy one latent score ``theta_i``, so a policy that is
strong on some tasks and weak on others gets one average. As RoboArena does for its
per-task effects, the task-aware model gives each policy a global score plus a per-task
offset::

    P(i beats j on task t) = sigmoid((theta_i + delta_it) - (theta_j + delta_jt))

with the offsets shrunk toward zero by a Gaussian prior of scale ``task_scale`` (a
ridge penalty ``sum delta^2 / (2 task_scale^2)``), so a task with few comparisons keeps
its policies near their global scores, and a task with many shows its own order. Both
sets of scores are centred (sum zero over policies; per task too). Fitted by L-BFGS on
the penalised log-likelihood.

``preferences`` is a table with columns ``task``, ``a``, ``b`` (policy names) and
``winner`` (``"a"``, ``"b"``; anything else, a tie or an invalid verdict, is left out).

>>> import pandas as pd
>>> prefs = pd.DataFrame({"task": ["t1"] * 6 + ["t2"] * 6, "a": ["p"] * 12, "b": ["q"] * 12,
...                       "winner": ["a"] * 5 + ["b"] + ["b"] * 5 + ["a"]})
>>> fit = fit_task_bradley_terry(prefs)
>>> fit.task_order("t1"), fit.task_order("t2"), round(float(abs(fit.theta).max()), 3)
(['p', 'q'], ['q', 'p'], 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

TASK_SCALE = 1.0


@dataclass(frozen=True)
class TaskBTResult:
    """policies and tasks (in order); theta: (policies,) global scores; delta: (tasks,
    policies) offsets; comparisons: (tasks,) counted per task; converged."""

    policies: list[str]
    tasks: list[str]
    theta: NDArray[np.float64]
    delta: NDArray[np.float64]
    comparisons: NDArray[np.int64]
    converged: bool

    def task_scores(self, task: str) -> pd.Series:
        """``theta + delta`` of every policy on ``task``."""
        k = self.tasks.index(task)
        return pd.Series(self.theta + self.delta[k], index=self.policies, name=task)

    def task_order(self, task: str) -> list[str]:
        return list(self.task_scores(task).sort_values(ascending=False, kind="stable").index)

    def order(self) -> list[str]:
        return list(pd.Series(self.theta, index=self.policies).sort_values(
            ascending=False, kind="stable").index)


def _coded(preferences: pd.DataFrame) -> tuple[list[str], list[str], NDArray, NDArray,
                                                 NDArray, NDArray]:
    missing = {"task", "a", "b", "winner"} - set(preferences.columns)
    if missing:
        raise ValueError(f"preferences: expected columns task, a, b, winner; got none for "
                         f"{sorted(missing)}")
    valid = preferences[preferences["winner"].isin(["a", "b"])]
    if valid.empty:
        raise ValueError("preferences: expected at least one decided comparison; got none")
    same = valid["a"].astype(str) == valid["b"].astype(str)
    if same.any():
        raise ValueError(f"preferences: expected two different policies per comparison; got "
                         f"{valid.loc[same, 'a'].iloc[0]!r} against itself")
    policies = sorted(set(valid["a"].astype(str)) | set(valid["b"].astype(str)))
    tasks = sorted(set(valid["task"].astype(str)))
    index = {p: k for k, p in enumerate(policies)}
    task_index = {t: k for k, t in enumerate(tasks)}
    winners = np.where(valid["winner"] == "a", valid["a"], valid["b"]).astype(str)
    losers = np.where(valid["winner"] == "a", valid["b"], valid["a"]).astype(str)
    return (policies, tasks, np.array([task_index[t] for t in valid["task"].astype(str)]),
            np.array([index[w] for w in winners]), np.array([index[x] for x in losers]),
            np.bincount([task_index[t] for t in valid["task"].astype(str)],
                        minlength=len(tasks)))


def fit_task_bradley_terry(preferences: pd.DataFrame, task_scale: float = TASK_SCALE,
                           global_scale: float = 10.0) -> TaskBTResult:
    """Fit the task-aware model (see the module docstring); ``global_scale`` is a weak
    prior on the global scores that keeps a policy that never loses finite."""
    from scipy.optimize import minimize

    if not (np.isfinite(task_scale) and task_scale > 0):
        raise ValueError(f"task_scale: expected a finite number > 0; got {task_scale!r}")
    policies, tasks, task, win, lose, counts = _coded(preferences)
    n, m = len(policies), len(tasks)

    def loss(x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        theta, delta = x[:n], x[n:].reshape(m, n)
        margin = theta[win] + delta[task, win] - theta[lose] - delta[task, lose]
        p_lose = 1.0 / (1.0 + np.exp(margin))  # d(-log sigmoid(margin)) / d margin = -p_lose
        value = float(np.logaddexp(0.0, -margin).sum() + (theta ** 2).sum() / (
            2 * global_scale ** 2) + (delta ** 2).sum() / (2 * task_scale ** 2))
        g_theta = np.zeros(n)
        g_delta = np.zeros((m, n))
        np.add.at(g_theta, win, -p_lose)
        np.add.at(g_theta, lose, p_lose)
        np.add.at(g_delta, (task, win), -p_lose)
        np.add.at(g_delta, (task, lose), p_lose)
        g_theta += theta / global_scale ** 2
        g_delta += delta / task_scale ** 2
        return value, np.concatenate([g_theta, g_delta.ravel()])

    found = minimize(loss, np.zeros(n + m * n), jac=True, method="L-BFGS-B",
                     options={"maxiter": 5000, "gtol": 1e-9})
    theta, delta = found.x[:n], found.x[n:].reshape(m, n)
    shift = delta.mean(axis=1, keepdims=True)  # a task's offsets are centred on the task
    theta, delta = theta - theta.mean(), delta - shift
    return TaskBTResult(policies, tasks, theta, delta, counts.astype(np.int64),
                        bool(found.success))


__all__ = ["TaskBTResult", "fit_task_bradley_terry"]
