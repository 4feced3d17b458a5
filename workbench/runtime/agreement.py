"""Agreement of per-episode outcomes between two runs of the same plan.

>>> import pandas as pd
>>> ref = pd.DataFrame({"episode_id": ["a", "b"], "success": [True, False], "terminal_step": [5, None]})
>>> run = pd.DataFrame({"episode_id": ["a", "b"], "success": [True, True], "terminal_step": [5, 9]})
>>> outcome_agreement(ref, run)
{'episodes': 2, 'success_agreement': 0.5, 'terminal_agreement': 0.5}
"""

from __future__ import annotations

import pandas as pd


def outcome_agreement(reference: pd.DataFrame, run: pd.DataFrame) -> dict[str, float]:
    """Fractions of shared episodes with the same success, and the same terminal step.

    Terminal steps agree when both are equal or both are missing (no success).
    Episodes with an infrastructure error in either run are left out.
    """
    cols = ["episode_id", "success", "terminal_step"]
    ref, other = _scored(reference)[cols], _scored(run)[cols]
    both = ref.merge(other, on="episode_id", suffixes=("_ref", "_run"))
    if both.empty:
        return {"episodes": 0, "success_agreement": float("nan"),
                "terminal_agreement": float("nan")}
    same_success = both["success_ref"].astype(bool) == both["success_run"].astype(bool)
    t_ref, t_run = both["terminal_step_ref"], both["terminal_step_run"]
    same_terminal = (t_ref == t_run) | (t_ref.isna() & t_run.isna())
    return {"episodes": int(len(both)), "success_agreement": float(same_success.mean()),
            "terminal_agreement": float(same_terminal.mean())}


def _scored(df: pd.DataFrame) -> pd.DataFrame:
    if "error_kind" in df:
        return df[df["error_kind"].ne("infrastructure")]
    return df
