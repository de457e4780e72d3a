"""Inter-token latency against the per-rank batch: a linear fit over the window, and the batch
at which ITL p50 meets a target (the batch-size advice of "Troubleshooting / High Latency"), and
ITL p99 (a decode step and the prefill it waited for) at another batch."""

import math
from collections.abc import Callable
from functools import lru_cache

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


# The share of decode steps whose stall ITL p99 sees: the 99th percentile of the tokens, and
# every running request's next token waits for the prefill before its step.
TAIL_LEVEL = 0.01


@lru_cache(maxsize=4096)  # the server model asks for today's median stall at every batch it tries
def stall_quantile(admitted: float, level: float = TAIL_LEVEL) -> float:
    """The stall, in mean prompts, that `level` of decode steps exceed: each step waits for
    the prefill of the K requests admitted since the last, K ~ Poisson(`admitted`), each
    prompt of exponential length (the widest spread a known mean allows: the window gives
    the mean prompt, not its tail). 0 where fewer than `level` of the steps wait at all."""
    if admitted <= 0 or -math.expm1(-admitted) <= level:
        return 0.0
    top = int(admitted + 12 * math.sqrt(admitted) + 20)

    def beyond(s: float) -> float:  # P(S > s) = sum_k P(K = k) P(Gamma(k, 1) > s)
        total, pk, term, cdf = 0.0, math.exp(-admitted), 1.0, 0.0
        for k in range(1, top + 1):
            pk *= admitted / k
            cdf += term  # sum_{j<k} s^j / j!
            term *= s / k
            total += pk * math.exp(-s) * cdf
        return total

    lo, hi = 0.0, admitted + 10 * math.sqrt(admitted) + 30
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if beyond(mid) > level else (lo, mid)
    return (lo + hi) / 2


def itl_p99_change(
    itl_p50: float,
    itl_p99: float,
    p50_change: float,
    batch_ratio: float,
    admitted: float | None = None,
    cost: Callable[[float], float] | None = None,
) -> float:
    """ITL p99's relative change when ITL p50 moves by `p50_change` and the per-rank batch by
    `batch_ratio` (new over now). The tail is a decode step plus the prefill it waited for:
    p99 = p50 + a stall. SGLang retries admission after every decode step and runs every
    prefill batch it can form before the next one (`get_next_batch_to_run`), so a stall is
    the prefill of the requests admitted since the last step (`stall_quantile`). `admitted`:
    the mean prompts admitted per step today, the batch over the output length (Little's
    law, queued or not), which grows with the batch; `cost`: seconds to prefill that many
    mean prompts (default: in proportion), so the stall scales as cost(then) / cost(now).
    None: the stall is taken as proportional to the batch."""
    stall = max(0.0, itl_p99 - itl_p50)
    scale = batch_ratio
    if admitted is not None and admitted > 0:
        price = cost or (lambda prompts: prompts)
        now, then = stall_quantile(admitted), stall_quantile(admitted * batch_ratio)
        if now <= 0 < then and cost is not None:
            # today's tail waits for no admission (its p99 is a decode step's own spread):
            # the stall it will wait for is priced whole, not scaled from that spread
            return (itl_p50 * (1 + p50_change) + stall + cost(then)) / itl_p99 - 1
        # where today's tail waits for no admission, its stall is taken as one prompt's
        scale = price(then) / price(now) if now > 0 else price(then) / price(1.0) or 1.0
    then_p99 = itl_p50 * (1 + p50_change) + stall * scale
    return then_p99 / itl_p99 - 1
