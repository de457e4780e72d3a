"""The accelerators a simulated server can run on: the shared catalogue of sglang_physics."""

from __future__ import annotations

from sglang_physics.gpu import GPUS, Gpu, gpu_named

__all__ = ["GPUS", "Gpu", "gpu_named"]
