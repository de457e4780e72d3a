"""The statistics under a verdict: a metric's after/before ratio of means and its 90 % interval,
from a moving-block bootstrap (blocks of consecutive scrapes keep their correlation; a fixed
seed makes it repeatable). Pure functions.
"""

import math
import random
from collections.abc import Sequence

METHOD = "moving-block bootstrap of the ratio of means (blocks of 6 scrapes), 90 % interval"
BLOCK, RESAMPLES, LEVEL = 6, 1000, 0.90


def rank(ordered: Sequence[float], q: float) -> float:
    """The `q` quantile of sorted values, by nearest rank."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def ratio_interval(
    old: Sequence[float], new: Sequence[float]
) -> tuple[float | None, float | None, float | None]:
    """(after/before ratio of means, and its interval) by moving-block bootstrap."""
    mean_old, mean_new = sum(old) / len(old), sum(new) / len(new)
    if mean_old <= 0 or mean_new < 0:
        return None, None, None
    rng = random.Random(len(old) * 7919 + len(new))
    ratios = []
    for _ in range(RESAMPLES):
        a, b = _block_mean(old, rng), _block_mean(new, rng)
        if a > 0:
            ratios.append(b / a)
    if not ratios:
        return mean_new / mean_old, None, None
    ratios.sort()
    tail = (1 - LEVEL) / 2
    return mean_new / mean_old, rank(ratios, tail), rank(ratios, 1 - tail)


def _block_mean(values: Sequence[float], rng: random.Random) -> float:
    """The mean of a resample made of random blocks of consecutive values."""
    n, block = len(values), min(BLOCK, len(values))
    picked: list[float] = []
    while len(picked) < n:
        start = rng.randrange(n - block + 1)
        picked.extend(values[start : start + block])
    return sum(picked[:n]) / n
