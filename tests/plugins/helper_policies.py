"""Policies for runtime tests; importable by spawned worker and replica processes."""

import hashlib
import os
import signal
import time

import numpy as np

from workbench.contracts import Capabilities
from workbench.policies.scripted import ScriptedExpert
from workbench.policies.zero import ZeroPolicy


class HashRecorder(ScriptedExpert):
    """Expert held over chunks of 4; logs a hash of every camera frame it reads."""

    name = "hash-recorder"

    def __init__(self, log_path, chunk_size=4):
        super().__init__()
        self.log_path, self.chunk_size = log_path, chunk_size

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("images.primary", "images.wrist", "privileged.state"),
                            chunk_size=self.chunk_size, privileged=True)

    def _act(self, observation, episode_state):
        digest = "".join(hashlib.sha1(observation[k].tobytes()).hexdigest()[:16]
                         for k in ("images.primary", "images.wrist"))
        with open(self.log_path, "a") as f:
            f.write(f"{observation['episode_id']} {observation['step']} {digest}\n")
        action = super()._act(observation, episode_state)
        return np.repeat(action[None], self.chunk_size, 0)


class RaisesAtStep(ZeroPolicy):
    """Raises inside act at step 5 of episode 0001; otherwise acts like ZeroPolicy."""

    name = "raises"

    def __init__(self, protocol="metaworld-v1"):
        super().__init__(protocol)

    def _act(self, observation, episode_state):
        if observation["episode_id"].endswith("0001") and observation["step"] == 5:
            raise_deep_in_the_policy()
        return super()._act(observation, episode_state)


def raise_deep_in_the_policy():
    raise FloatingPointError("the policy's own bug")


class OutOfMemoryAtStep(ZeroPolicy):
    """Runs out of CUDA memory at step 5 of episode 0001 (raised as torch raises it)."""

    name = "out-of-memory"

    def __init__(self, protocol="metaworld-v1"):
        super().__init__(protocol)

    def _act(self, observation, episode_state):
        if observation["episode_id"].endswith("0001") and observation["step"] == 5:
            import torch

            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super()._act(observation, episode_state)


class SlowZero(ZeroPolicy):
    """Zero actions, each after ``delay_s`` seconds: episodes long enough to interrupt."""

    name = "slow-zero"

    def __init__(self, protocol="metaworld-v1", delay_s=0.01):
        super().__init__(protocol)
        self.delay_s = delay_s

    def _act(self, observation, episode_state):
        import time

        time.sleep(self.delay_s)
        return super()._act(observation, episode_state)


class DiesAtStep(ZeroPolicy):
    """The replica process is killed by a signal at step 3 of episode 0000, as the
    kernel's out-of-memory killer would kill it (a death the policy did not choose: the
    harness's; an ``os._exit`` of the policy's own is the policy's failure)."""

    name = "dies"

    def __init__(self, protocol="metaworld-v1"):
        super().__init__(protocol)

    def _act(self, observation, episode_state):
        if observation["episode_id"].endswith("0000") and observation["step"] == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._act(observation, episode_state)


class Sneaky(ZeroPolicy):
    """Reads the privileged state without declaring privileged=True."""

    name = "sneaky"

    def __init__(self, protocol="metaworld-v1"):
        super().__init__(protocol)

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("privileged.state",))


class HangsOnNegativeState(ZeroPolicy):
    """Zero actions; a state whose first entry is negative hangs the call (for a minute),
    as a wedged model would."""

    def __init__(self, protocol: str = "metaworld-v1") -> None:
        super().__init__(protocol)

    def _act(self, observation, episode_state):
        if float(observation["state"][0]) < 0:
            time.sleep(60)
        return super()._act(observation, episode_state)
