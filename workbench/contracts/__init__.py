"""The bottom layer: what every other package of the workbench may import.

Episode identities and plans (:mod:`.plan`), protocols and capabilities
(:mod:`.protocols`, :mod:`.capabilities`), episode results and error kinds
(:mod:`.results`), references to components (:mod:`.registry`), how a process renders
headless (:mod:`.rendering`) and how results read as text (:mod:`.display`). It imports
nothing else of the workbench.
"""

from workbench.contracts.capabilities import (
    Capabilities,
    EpisodeContext,
    LoadContext,
    Observation,
)
from workbench.contracts.plan import EpisodeSpec, plan_episodes, shard_episodes
from workbench.contracts.protocols import (
    PROTOCOLS,
    ActionContract,
    ContractError,
    Feature,
    Protocol,
    get_protocol,
    protocol_names,
    register_protocol,
    sample_observation,
    validate_action,
    validate_observation,
)
from workbench.contracts.registry import (
    Factory,
    Registry,
    adopt_sys_path,
    import_target,
)
from workbench.contracts.rendering import use_headless_rendering
from workbench.contracts.results import (
    EpisodeResult,
    ErrorKind,
    InfrastructureError,
    describe_exception,
    summarize,
)

__all__ = [
    "PROTOCOLS", "ActionContract", "Capabilities", "ContractError", "EpisodeContext",
    "EpisodeResult", "EpisodeSpec", "ErrorKind", "Factory", "Feature",
    "InfrastructureError", "LoadContext", "Observation", "Protocol", "Registry",
    "adopt_sys_path", "describe_exception", "get_protocol", "import_target", "plan_episodes",
    "protocol_names", "register_protocol", "sample_observation", "shard_episodes", "summarize",
    "use_headless_rendering", "validate_action", "validate_observation",
]
