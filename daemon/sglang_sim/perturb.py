"""A perturbed world: the step model's hardware and kernel constants drawn per run.

`draw(seed, spread)` gives every constant of `sglang_physics.Perturbation` a factor uniform in
[1 - spread, 1 + spread], from its own random stream: the same seed replays the same world.
"""

from __future__ import annotations

import random

from sglang_physics import Perturbation


def draw(seed: int | str, spread: float) -> Perturbation:
    """The world of `seed`: each constant x U(1 - spread, 1 + spread); spread 0: unperturbed."""
    rng = random.Random(f"perturbation/{seed}")
    unit = {name: rng.uniform(-1.0, 1.0) for name in Perturbation.names()}
    return Perturbation.drawn(spread, unit)
