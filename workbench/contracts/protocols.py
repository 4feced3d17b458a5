"""Benchmark protocols as data: canonical observation features and action contracts.

A protocol is what a benchmark promises a policy and what it accepts back. The six
protocols follow the RoboScope Kit appendix table (first source paper); the sizes of
``robotwin2-v1``, ``robocasa-v1`` and ``calvin-v1`` are checked against each
benchmark's own code, cited beside each. Validators
raise :class:`ContractError` naming the protocol, the field and what was expected.

>>> proto = get_protocol("metaworld-v1")
>>> proto.action.dim, proto.action.dtype
(4, 'float32')
>>> sorted(PROTOCOLS)[:2]
['calvin-v1', 'isaaclab-franka-ik-rel-v1']
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from workbench.errors import ContractError


class ActionRejected(ContractError):
    """The benchmark refused an action before executing it (the simulator did not
    advance); the message is bounded and public, fit to hand back to the policy."""


@dataclass(frozen=True)
class Feature:
    """One canonical observation feature.

    shape: a tuple of ints; ``None`` marks a dimension of any size (an image whose
    resolution the run chooses). ``dtype`` "str" marks a text feature.
    """

    name: str
    dtype: str
    shape: tuple[int | None, ...] = ()
    meaning: str = ""
    optional: bool = False

    def check(self, value: Any, protocol: str) -> None:
        where = f"{protocol}: observation feature {self.name!r}"
        if self.dtype == "str":
            if not isinstance(value, str):
                raise ContractError(f"{where}: expected str; got {type(value).__name__}")
            return
        if not isinstance(value, np.ndarray):
            raise ContractError(
                f"{where}: expected numpy array {self.dtype}{_fmt_shape(self.shape)}; "
                f"got {type(value).__name__}"
            )
        if value.dtype != np.dtype(self.dtype):
            raise ContractError(f"{where}: expected dtype {self.dtype}; got {value.dtype}")
        if not _shape_matches(value.shape, self.shape):
            raise ContractError(
                f"{where}: expected shape {_fmt_shape(self.shape)}; got {tuple(value.shape)}"
            )
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ContractError(f"{where}: contains NaN or inf")


@dataclass(frozen=True)
class ActionContract:
    """What a benchmark accepts as one action: ``(dim,)`` of ``dtype`` within bounds.

    A policy may emit a chunk ``(k, dim)``; each row must satisfy the contract.
    """

    dim: int
    dtype: str = "float32"
    meaning: str = ""
    low: float | tuple[float, ...] | None = None
    high: float | tuple[float, ...] | None = None

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low = -np.inf if self.low is None else self.low
        high = np.inf if self.high is None else self.high
        return (np.broadcast_to(np.asarray(low, np.float64), (self.dim,)),
                np.broadcast_to(np.asarray(high, np.float64), (self.dim,)))


@dataclass(frozen=True)
class Protocol:
    """A benchmark's declared interface: features it serves and the action it takes."""

    name: str
    benchmark: str
    features: tuple[Feature, ...]
    action: ActionContract
    privileged: tuple[Feature, ...] = field(default=())

    def feature(self, name: str) -> Feature:
        for f in self.features + self.privileged:
            if f.name == name:
                return f
        raise ContractError(
            f"{self.name}: no observation feature {name!r}; "
            f"declared: {sorted(f.name for f in self.features + self.privileged)}"
        )

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    @property
    def privileged_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.privileged)


def validate_observation(protocol: Protocol, obs: Mapping[str, Any],
                         features: tuple[str, ...] | None = None) -> None:
    """Check that ``obs`` holds each requested feature with the declared dtype and shape.

    features: the names to check (default: every non-optional feature of the protocol).
    """
    names = features if features is not None else tuple(
        f.name for f in protocol.features if not f.optional)
    for name in names:
        spec = protocol.feature(name)
        if name not in obs:
            raise ContractError(f"{protocol.name}: observation lacks feature {name!r}")
        spec.check(obs[name], protocol.name)


def validate_action(protocol: Protocol, action: Any) -> np.ndarray:
    """Check one action ``(dim,)`` or a chunk ``(k, dim)``; return it as a ``(k, dim)`` array.

    >>> validate_action(get_protocol("metaworld-v1"), np.zeros(4, np.float32)).shape
    (1, 4)
    """
    c = protocol.action
    where = f"{protocol.name}: action"
    if not isinstance(action, np.ndarray):
        raise ContractError(f"{where}: expected numpy array {c.dtype}; got {type(action).__name__}")
    if action.dtype != np.dtype(c.dtype):
        raise ContractError(f"{where}: expected dtype {c.dtype}; got {action.dtype}")
    chunk = action[None] if action.ndim == 1 else action
    if chunk.ndim != 2 or chunk.shape[1] != c.dim or chunk.shape[0] == 0:
        raise ContractError(
            f"{where}: expected shape ({c.dim},) or (k, {c.dim}) ({c.meaning}); "
            f"got {tuple(action.shape)}"
        )
    if not np.all(np.isfinite(chunk)):
        raise ContractError(f"{where}: contains NaN or inf")
    low, high = c.bounds()
    bad = (chunk < low) | (chunk > high)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise ContractError(
            f"{where}: component {col} = {float(chunk[row, col]):.4g} outside "
            f"[{low[col]:.4g}, {high[col]:.4g}] ({c.meaning})"
        )
    return chunk


def _shape_matches(actual: tuple[int, ...], declared: tuple[int | None, ...]) -> bool:
    return len(actual) == len(declared) and all(
        d is None or a == d for a, d in zip(actual, declared))


def _fmt_shape(shape: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("H" if i == 0 and d is None else "W" if i == 1 and d is None
                           else "*" if d is None else str(d)
                           for i, d in enumerate(shape)) + ("," if len(shape) == 1 else "") + ")"


def _rgb(name: str, meaning: str, optional: bool = False) -> Feature:
    return Feature(name, "uint8", (None, None, 3), meaning, optional)


_INSTRUCTION = Feature("instruction", "str", (), "natural-language task instruction")

_LIBERO = Protocol(
    "libero-v1", "LIBERO",
    (_rgb("images.primary", "agentview RGB"), _rgb("images.wrist", "eye-in-hand RGB"),
     Feature("state", "float32", (16,), "proprioception: end-effector position 3, "
             "quaternion 4, gripper joints 2, arm joints 7"),
     Feature("state.eef8", "float32", (8,), "LeRobot/openpi state: end-effector position "
             "3, axis-angle 3, gripper joints 2", optional=True),
     Feature("state.controller8", "float32", (8,), "vla-eval's controller state: the "
             "OSC controller's end-effector position 3, axis-angle of its orientation 3, "
             "gripper joints 2", optional=True),
     _INSTRUCTION),
    ActionContract(7, "float32", "end-effector delta (xyz, rpy) plus gripper", -1.0, 1.0),
    privileged=(Feature("privileged.state", "float32", (None,),
                        "LIBERO's object-state vector (size depends on the task)"),
                Feature("privileged.regions", "float32", (None, 3),
                        "world xyz of each site the task's goal predicates name")),
)

PROTOCOLS: dict[str, Protocol] = {
    # Isaac Lab's Franka cube stacking (Isaac-Stack-Cube-Franka-IK-Rel-v0 and its
    # Visuomotor variant): see workbench/benchmarks/isaaclab.py for the sources
    "isaaclab-franka-ik-rel-v1": Protocol(
        "isaaclab-franka-ik-rel-v1", "Isaac Lab",
        (_rgb("images.primary", "table_cam RGB (visuomotor task only)", optional=True),
         _rgb("images.wrist", "wrist_cam RGB (visuomotor task only)", optional=True),
         Feature("state", "float32", (9,), "end-effector position 3 (environment frame), "
                 "quaternion w, x, y, z 4, finger joint positions 2"),
         _INSTRUCTION),
        ActionContract(7, "float32", "relative end-effector pose (xyz, rotation vector), "
                       "scaled 0.5 by Isaac Lab, and gripper (< 0 closes, otherwise opens)"),
        privileged=(Feature("privileged.state", "float32", (39,),
                            "Isaac Lab's object term: three cube poses and their offsets"),),
    ),
    "libero-v1": _LIBERO,
    # robosuite's own tasks through the same OSC pose controller: LIBERO's contract
    "robosuite-v1": replace(
        _LIBERO, name="robosuite-v1", benchmark="robosuite",
        privileged=(Feature("privileged.state", "float32", (None,),
                            "robosuite's object-state vector (size depends on the task)"),)),
    # LIBERO-Plus keeps LIBERO's named contract (the source paper's appendix table)
    "libero-plus-v1": replace(_LIBERO, name="libero-plus-v1", benchmark="LIBERO-Plus"),
    # RoboTwin 2.0 (github.com/RoboTwin-Platform/RoboTwin): cameras head_camera,
    # left_camera, right_camera (D435 type, 320x240, task_config/_camera_config.yml);
    # state and action are envs/_base_task.py's joint_action["vector"] and take_action's
    # qpos layout: left arm joints, left gripper, right arm joints, right gripper. The
    # default embodiment of demo_clean/demo_randomized is aloha-agilex with 6 joints an
    # arm (env_cfg/robot/_robot_info.json: arm_dim [6, 6], ee_dim [1, 1]): 14-D.
    # Grippers are normalised, 0 closed to 1 open.
    "robotwin2-v1": Protocol(
        "robotwin2-v1", "RoboTwin",
        (_rgb("images.head", "head camera RGB"), _rgb("images.left_wrist", "left wrist RGB"),
         _rgb("images.right_wrist", "right wrist RGB"),
         Feature("state", "float32", (14,), "aloha-agilex joint state: left arm joints 6, "
                 "left gripper 1, right arm joints 6, right gripper 1 (grippers 0 closed "
                 "to 1 open)"),
         _INSTRUCTION),
        ActionContract(14, "float32", "absolute joint target in the state's layout: left "
                       "arm 6, left gripper, right arm 6, right gripper (0 closed, 1 open)"),
    ),
    # RoboCasa GR-1 tabletop tasks (github.com/robocasa/robocasa-gr1-tabletop-tasks),
    # robot GR1ArmsAndWaistFourierHands: arms 7 + 7 and waist 3
    # (models/robots/manipulators/gr1_robot.py: init_qpos of 17), Fourier hands 6 + 6
    # (models/robots/__init__.py: unformat_gripper_space keeps 6 of a hand's joints),
    # absolute joint targets (gym_utils/gymnasium_basic.py: control_delta False). Order
    # as GR00T's fourier_gr1_arms_waist data config: left arm, right arm, left hand,
    # right hand, waist = 29. The GR-1 key converter has one camera, egoview (1280x800),
    # and no wrist camera.
    "robocasa-v1": Protocol(
        "robocasa-v1", "RoboCasa",
        (_rgb("images.primary", "egoview RGB, upright, letterboxed square"),
         Feature("state", "float32", (29,), "GR-1 joint positions: left arm 7, right arm "
                 "7, left hand 6, right hand 6, waist 3"), _INSTRUCTION),
        ActionContract(29, "float32", "GR-1 absolute joint targets: left arm 7, right arm "
                       "7, left hand 6, right hand 6, waist 3"),
    ),
    # CALVIN (github.com/mees/calvin README "Sensory Observations" and dataset/README.md):
    # rgb_static 200x200, rgb_gripper 84x84; robot_obs 15 = tcp position 3, tcp euler 3,
    # gripper opening width 1, arm joints 7, gripper action 1; scene_obs 24; rel_actions
    # 7 = tcp position 3 and euler 3, normalised and clipped to (-1, 1), gripper
    # binary (close -1, open 1).
    "calvin-v1": Protocol(
        "calvin-v1", "CALVIN",
        (_rgb("images.static", "static camera RGB"), _rgb("images.gripper", "gripper camera RGB"),
         Feature("state", "float32", (15,), "robot_obs: tcp position 3, tcp euler 3, "
                 "gripper width 1, arm joints 7, gripper action 1"), _INSTRUCTION),
        ActionContract(7, "float32", "relative end-effector (xyz, euler xyz) in [-1, 1] and "
                       "gripper (> 0 opens, otherwise closes)", -1.0, 1.0),
        privileged=(Feature("privileged.state", "float32", (24,),
                            "scene_obs: slider, drawer, button, switch, lightbulb, green "
                            "light, and the red, blue and pink blocks' poses (6 each)"),),
    ),
    "metaworld-v1": Protocol(
        "metaworld-v1", "MetaWorld",
        (_rgb("images.primary", "corner camera RGB, rows flipped upright"),
         _rgb("images.wrist", "gripperPOV RGB", optional=True),
         Feature("state", "float32", (4,), "end-effector position (xyz) and gripper aperture"),
         _INSTRUCTION),
        ActionContract(4, "float32", "end-effector delta (xyz) and gripper command", -1.0, 1.0),
        privileged=(Feature("privileged.state", "float32", (39,),
                            "full MetaWorld observation incl. object and goal poses"),),
    ),
    # gymnasium-robotics' FrankaKitchen-v1: its native joint-velocity action
    "kitchen-v1": Protocol(
        "kitchen-v1", "Franka Kitchen",
        (_rgb("images.primary", "the environment's default view (free camera), upright"),
         Feature("state", "float32", (18,), "observation[:18]: joint positions of the 7 arm "
                 "joints and 2 fingers, then their velocities (with the environment's noise)"),
         _INSTRUCTION),
        ActionContract(9, "float32", "joint velocities of the 7 arm joints (rad/s) and 2 "
                       "fingers (m/s), each 2x the action", -1.0, 1.0),
        privileged=(Feature("privileged.state", "float32", (59,),
                            "full observation: robot 18, object joint positions 21 and "
                            "velocities 20"),),
    ),
}


PROTOCOL_GROUP = "workbench.protocols"
"""The entry-point group through which a package registers protocols of its own (each
entry names a :class:`Protocol`, or a callable returning one)."""
_REGISTERED: dict[str, Protocol] = {}


def register_protocol(protocol: Protocol) -> Protocol:
    """Make ``protocol`` known by its name (to :func:`get_protocol`, hence to every
    policy, validator and server of the workbench); returns it. Registering the same
    definition again is a no-op; another definition under a known name is refused."""
    if not isinstance(protocol, Protocol):
        raise ValueError(f"register_protocol: expected a Protocol; got a "
                         f"{type(protocol).__name__}")
    known = PROTOCOLS.get(protocol.name) or _REGISTERED.get(protocol.name)
    if known is not None and known != protocol:
        raise ValueError(f"protocol {protocol.name!r} is already known with another "
                         "definition; give yours a name of its own")
    _REGISTERED[protocol.name] = protocol
    return protocol


def is_known_protocol(name: str) -> bool:
    """Whether ``name`` is built in or registered already (entry points not consulted)."""
    return name in PROTOCOLS or name in _REGISTERED


def _from_entry_points(name: str) -> Protocol | None:
    """``name`` from a package's ``workbench.protocols`` entry points, or carried by an
    adapter registered under ``workbench.benchmarks`` (its class's ``protocol``);
    registered when found. Any process finds these (installed metadata), so a plugin's
    protocol reaches pool workers, replicas and servers too."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=PROTOCOL_GROUP):
        if ep.name == name:
            value = ep.load()
            protocol = value if isinstance(value, Protocol) else value()
            if not isinstance(protocol, Protocol) or protocol.name != name:
                raise ValueError(f"entry point {PROTOCOL_GROUP}:{name} ({ep.value}) does not "
                                 f"give the Protocol {name!r}")
            return register_protocol(protocol)
    for ep in entry_points(group="workbench.benchmarks"):
        try:
            carried = getattr(ep.load(), "protocol", None)
        except Exception:  # a broken plugin says so where it is used, not here
            continue
        if isinstance(carried, Protocol) and carried.name == name:
            return register_protocol(carried)
    return None


def protocol_names() -> list[str]:
    """Every protocol known here: built in, registered, or named by an entry point."""
    from importlib.metadata import entry_points

    return sorted({*PROTOCOLS, *_REGISTERED,
                   *(ep.name for ep in entry_points(group=PROTOCOL_GROUP))})


def get_protocol(name: str) -> Protocol:
    """Look up a protocol by name (built in, registered with :func:`register_protocol`,
    or a plugin's), refusing unknown names with the list of known ones."""
    found = PROTOCOLS.get(name) or _REGISTERED.get(name) if isinstance(name, str) else None
    if found is None and isinstance(name, str):
        found = _from_entry_points(name)
    if found is None:
        raise ValueError(f"unknown protocol {name!r}; available: {protocol_names()}")
    return found


def sample_observation(protocol: Protocol, height: int = 8, width: int = 8) -> dict[str, Any]:
    """A valid observation for ``protocol`` (zeros), useful for tests and dry runs."""
    obs: dict[str, Any] = {}
    for f in protocol.features + protocol.privileged:
        if f.dtype == "str":
            obs[f.name] = "do the task"
        else:
            shape = tuple(height if (i == 0 and d is None) else width if d is None else d
                          for i, d in enumerate(f.shape))
            obs[f.name] = np.zeros(shape, f.dtype)
    return obs
