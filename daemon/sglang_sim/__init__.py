"""Simulated SGLang servers: SGLang's scheduler on a GPU model, exposed the way each version does.

Imports nothing from sglang_tuner: the daemon and its simulator share no name table
(docs/simulator.md).
"""

from .catalogue import VERSIONS
from .flags import apply_flags, apply_load, flag_names
from .fleet import ServerSpec, SimFleet
from .gpus import GPUS, Gpu
from .hardware import Knobs
from .llms import LLMS, LlmSpec
from .measure import Measurement, measure
from .model import ServerConfig, ServerModel
from .perturb import draw as draw_perturbation
from .scenarios import SCENARIOS, Scenario
from .workload import Load

__all__ = [
    "GPUS",
    "LLMS",
    "SCENARIOS",
    "VERSIONS",
    "Gpu",
    "Knobs",
    "LlmSpec",
    "Load",
    "Measurement",
    "Scenario",
    "ServerConfig",
    "ServerModel",
    "ServerSpec",
    "SimFleet",
    "apply_flags",
    "apply_load",
    "draw_perturbation",
    "flag_names",
    "measure",
]
