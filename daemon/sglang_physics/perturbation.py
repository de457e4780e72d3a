"""Factors on the step model's hardware and kernel constants: a world the constants do not know.

Every factor multiplies one constant of `step.py` (1.0 everywhere: the constants as they are).
A factor above 1 on an efficiency makes that part faster, on a cost (seconds, launches) slower.
The simulator builds its step model with one drawn per run, so the daemon's predictor, which
keeps the unperturbed constants, must calibrate on what it observes. Pure: no draw here; the
caller passes the factors (or `Perturbation.drawn` a value per factor in [-1, 1]).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Perturbation:
    """One factor per constant of the step model (all 1.0: no perturbation).

    hbm_bandwidth: HBM_EFFICIENCY (weights and KV reads); decode_gemm, prefill_gemm:
    the GEMM efficiencies; prefill_attention, decode_attention_flops: attention FLOP
    efficiencies; kv_read: the attention backend's KV-read efficiency; step_overhead,
    prefill_overhead: per-step host costs; launch_cpu, launch_gap: eager launch costs
    per kernel; allreduce_latency, link_bandwidth: the all-reduce; moe_inefficiency:
    routed-expert bytes and FLOPs (above 1: the MoE kernels waste more); torch_compile:
    the compiled step's time factor.
    """

    hbm_bandwidth: float = 1.0
    decode_gemm: float = 1.0
    prefill_gemm: float = 1.0
    prefill_attention: float = 1.0
    decode_attention_flops: float = 1.0
    kv_read: float = 1.0
    step_overhead: float = 1.0
    prefill_overhead: float = 1.0
    launch_cpu: float = 1.0
    launch_gap: float = 1.0
    allreduce_latency: float = 1.0
    link_bandwidth: float = 1.0
    moe_inefficiency: float = 1.0
    torch_compile: float = 1.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not value > 0:  # also NaN
                raise ValueError(f"perturbation {f.name} must be > 0, got {value!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The perturbed constants, in field order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def drawn(cls, spread: float, unit: Mapping[str, float]) -> Perturbation:
        """Factors 1 + spread x u for each constant's u in [-1, 1] (missing ones: 0)."""
        if not 0 <= spread < 1:
            raise ValueError(f"spread must be in [0, 1), got {spread!r}")
        bad = sorted(set(unit) - set(cls.names()))
        if bad:
            raise ValueError(f"unknown perturbed constant(s) {', '.join(bad)}")
        if any(not -1 <= u <= 1 for u in unit.values()):
            raise ValueError("each unit draw must be in [-1, 1]")
        return cls(**{name: 1 + spread * u for name, u in unit.items()})

    def as_dict(self) -> dict[str, float]:
        """The factors by name."""
        return {name: getattr(self, name) for name in self.names()}

    @property
    def is_identity(self) -> bool:
        """True where every factor is 1 (the constants unchanged)."""
        return all(v == 1.0 for v in self.as_dict().values())


NONE = Perturbation()
