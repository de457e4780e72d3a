"""The KV pool SGLang should have sized at startup, and what it means when the pool it printed
disagrees (every version 0.4-0.5; `profile_max_num_token`): the budget is the memory free after
the weights less what the fraction keeps back, `after_load - total x (1 - mem_fraction_static)`,
where `total` is the memory free before the weights (SGLang's own "total").

A pool much larger than that budget is an accounting bug (SGLang counted memory it does not
have); one far below it with no `--max-total-tokens` cap is a sizing bug (memory it has and did
not give the pool).
"""

from dataclasses import dataclass

# A pool within this much of its budget is as sized (page rounding, a draft pool, a rank's
# spread); beyond it the numbers disagree.
TOLERANCE_GB = 1.0
TOLERANCE_RATIO = 0.10
ACCOUNTING, SIZING = "accounting", "sizing"


@dataclass(frozen=True, slots=True)
class PoolSizing:
    """What disagrees between the pool and its budget: `kind` (accounting or sizing) and the
    sentence that says it with the numbers."""

    kind: str
    text: str


def pool_budget_gb(before_load_gb: float, after_load_gb: float, fraction: float) -> float:
    """The pool SGLang sizes under `fraction`: free after the weights - total x (1 - it)."""
    return after_load_gb - before_load_gb * (1.0 - fraction)


def pool_sizing(
    before_load_gb: float,
    after_load_gb: float,
    weights_gb: float | None,
    pool_gb: float,
    fraction: float,
    capped: bool = False,
    tolerance: tuple[float, float] = (TOLERANCE_GB, TOLERANCE_RATIO),
) -> PoolSizing | None:
    """The disagreement, or None where pool and budget agree; `capped`: --max-total-tokens (or
    a hybrid model's ratio) made the pool smaller on purpose; `tolerance`: (GB, share of the
    budget) the two may differ by."""
    budget = pool_budget_gb(before_load_gb, after_load_gb, fraction)
    slack = max(tolerance[0], tolerance[1] * max(budget, 0.0))
    said = (
        f"KV pool {pool_gb:.2f} GB against {budget:.2f} GB from total {before_load_gb:g} GB"
        f" x mem_fraction_static {fraction:g} - weights {weights_gb or 0:.2f} GB"
    )
    if pool_gb > budget + slack:
        return PoolSizing(ACCOUNTING, f"{said}: larger than SGLang's own budget, an accounting bug")
    if not capped and pool_gb < budget - slack and pool_gb < 0.5 * budget:
        return PoolSizing(SIZING, f"{said}: under half of it with no cap, a sizing bug")
    return None
