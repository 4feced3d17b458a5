"""What two runs of one plan must agree on, episode by episode."""

import pandas as pd


def outcomes(df: pd.DataFrame) -> dict[str, tuple]:
    """episode_id -> (success, terminal step or None, steps) of a results table."""
    return {r.episode_id: (bool(r.success), None if pd.isna(r.terminal_step)
                           else int(r.terminal_step), int(r.steps)) for r in df.itertuples()}
