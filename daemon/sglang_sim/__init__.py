"""Simulated SGLang servers: a scheduler model exposed the way each SGLang version does.

Imports nothing from sglang_tuner: the daemon and its simulator share no name table
(docs/simulator.md).
"""

from .catalogue import VERSIONS
from .fleet import ServerSpec, SimFleet
from .model import ServerConfig, ServerModel
from .scenarios import SCENARIOS, Scenario

__all__ = [
    "SCENARIOS",
    "VERSIONS",
    "Scenario",
    "ServerConfig",
    "ServerModel",
    "ServerSpec",
    "SimFleet",
]
