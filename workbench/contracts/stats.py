"""Small statistics shared by reports and rankings.

>>> lo, hi = wilson_interval([8, 0], [10, 20])
>>> lo.round(3).tolist(), hi.round(3).tolist()
([0.49, 0.0], [0.943, 0.161])
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def wilson_interval(successes: ArrayLike, trials: ArrayLike,
                    level: float = 0.95) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score interval (lower, upper) for success proportions.

    >>> lo, hi = wilson_interval(8, 10)
    >>> round(float(lo), 3), round(float(hi), 3)
    (0.49, 0.943)
    """
    k, n = np.asarray(successes, np.float64), np.asarray(trials, np.float64)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= successes <= trials and trials > 0")
    from scipy import stats

    z = stats.norm.ppf(0.5 + level / 2)
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half
