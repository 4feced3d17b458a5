"""Headless rendering, chosen at start-up by whoever starts a run (never by an import).

MuJoCo reads ``MUJOCO_GL`` when it is first imported; on a machine without a display,
EGL (Mesa's llvmpipe on CPU machines) is what works. The CLI, the runner and the pool's
processes call :func:`use_headless_rendering` before anything imports MuJoCo.

>>> import os
>>> use_headless_rendering() in ("egl", os.environ["MUJOCO_GL"])
True
"""

from __future__ import annotations

import os
import sys
import warnings


def use_headless_rendering(backend: str = "egl") -> str:
    """Set ``MUJOCO_GL`` to ``backend`` unless the user chose one; returns the one in use.

    Warns when MuJoCo was imported before with no backend chosen (then it is too late).
    """
    if "MUJOCO_GL" not in os.environ and "mujoco" in sys.modules:
        warnings.warn("mujoco was imported before MUJOCO_GL was set; cameras may fail to "
                      f"render headless. Set MUJOCO_GL={backend} before importing it.",
                      RuntimeWarning, stacklevel=2)
    return os.environ.setdefault("MUJOCO_GL", backend)
