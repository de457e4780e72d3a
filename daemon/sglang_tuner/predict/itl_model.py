"""Inter-token latency against the per-rank batch: a linear fit over the window, and the batch
at which ITL p50 meets a target (the batch-size advice of "Troubleshooting / High Latency"), and
ITL p99 (a decode step and the prefill it waited for) at another batch."""

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


# The normal 99th percentile: the p99 stall holds the mean admission plus this many of its
# standard deviations (a Poisson count's is the square root of its mean).
STALL_Z = 2.326


def itl_p99_change(
    itl_p50: float,
    itl_p99: float,
    p50_change: float,
    batch_ratio: float,
    prompts: float | None = None,
) -> float:
    """ITL p99's relative change when ITL p50 moves by `p50_change` and the per-rank batch by
    `batch_ratio` (new over now). The tail is a decode step plus the prefill it waited for:
    p99 = p50 + a stall. SGLang runs every prefill batch it can form before the next decode
    step (`get_next_batch_to_run`), so a stall is the prefill of the requests admitted
    together, and those arrive as running requests leave: a count with a Poisson spread
    whose mean m grows with the batch. The p99 stall holds m + z·sqrt(m) prompts (z the
    normal p99), so it grows slower than the batch where m is small and as the batch where
    it is large. `prompts`: the prompts today's stall holds (its seconds over one prompt's
    prefill), from which m is solved; None: the stall is taken as proportional to the batch."""
    stall = max(0.0, itl_p99 - itl_p50)
    scale = batch_ratio
    if prompts is not None and prompts > 0:
        root = (math.sqrt(STALL_Z * STALL_Z + 4 * prompts) - STALL_Z) / 2  # sqrt(m) today
        mean = root * root * batch_ratio
        scale = (mean + STALL_Z * math.sqrt(mean)) / prompts
    then = itl_p50 * (1 + p50_change) + stall * scale
    return then / itl_p99 - 1
