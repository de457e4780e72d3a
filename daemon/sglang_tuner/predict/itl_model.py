"""Inter-token latency against the per-rank batch: a linear fit over the window, and the batch
at which ITL p50 meets a target (the batch-size advice of "Troubleshooting / High Latency")."""

import math

from sglang_tuner.model.signals import ITL_P50_SECONDS
from sglang_tuner.predict.units import batch_signal
from sglang_tuner.rule import RuleInput


def itl_fit(inp: RuleInput) -> tuple[float, float, int] | None:
    """(intercept, slope, samples) of ITL p50 against the per-rank batch over the window: a
    decode step reads the weights (fixed) and every running request's KV (per request)."""
    batch = batch_signal(inp)
    rows = [r for r in inp.view.rows((ITL_P50_SECONDS, batch)) if r[batch] > 0]
    if len(rows) < 3:
        return None
    xs, ys = [r[batch] for r in rows], [r[ITL_P50_SECONDS] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    if spread <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread
    return my - slope * mx, slope, len(rows)


PROPORTIONAL = "ITL taken as proportional to the batch (no usable fit)"


def batch_for_itl_target(inp: RuleInput, batch: float, itl: float) -> tuple[int, float, str]:
    """(per-rank batch, ITL expected there, basis) meeting the ITL target; without a usable fit
    ITL is taken as proportional to the batch (`PROPORTIONAL`), which says nothing of the
    throughput cost: tokens/s = batch / ITL is then the same at every batch by construction."""
    target = inp.thresholds["itl_p50_max_seconds"]
    fit = itl_fit(inp)
    if fit is not None and fit[1] > 0 and fit[0] < target:
        per_rank = math.floor((target - fit[0]) / fit[1] + 1e-9)
        basis = f"a linear fit of ITL on batch over {fit[2]} samples"
        return max(1, per_rank), fit[0] + fit[1] * max(1, per_rank), basis
    per_rank = math.floor(batch * target / itl)  # ITL taken as proportional to the batch
    return max(1, per_rank), target, PROPORTIONAL
