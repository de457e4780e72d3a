"""What each remedy for a retraction storm does on THIS server, from the server model.

A retraction storm is a full KV pool whose running requests outgrow it: SGLang admits a request
while the pool's free and evictable tokens cover its prompt, min(max_new_tokens, 4096) and the
running requests' remaining outputs x the new-token ratio (`PrefillAdder.rem_total_tokens`,
schedule_policy.py); the ratio decays to 0.14 x min(0.7 x --schedule-conservativeness, 1), so
admission bets that most requests stop early. When a decode step finds no room,
`ScheduleBatch.retract_decode` (schedule_batch.py, 0.5.4) frees the requests with the fewest
output tokens (ties: the longest prompt) until the next step fits, puts them back in the queue
with their output kept, and sets the ratio to (decoded + 20 x kept) / (sum(max_new_tokens) + 1)
of the kept batch. A retracted request prefills its prompt and its output again.

The three remedies, priced here:

* a request cap that the pool holds to the end: pool tokens over the tokens a running request
  holds at completion (the window's token usage x pool / running, plus half a finished
  request's output: a running request is on average half-way through it). At that batch every
  request can finish without a retraction, whatever the ratio; the price is the smaller batch;
* the radix cache off. Its evictable tokens are never what a retraction needs: token usage
  counts none of them (`Scheduler._get_token_info`: used = pool - free - evictable) and
  `check_decode_mem` evicts them before it decides to retract. Off (`ChunkCache`), every
  request holds its whole prompt and the hits are prefilled again: the batch the pool holds
  shrinks by the shared part, prefill grows by the hit ratio. It changes admission only for
  requests sent with `ignore_eos` (`add_one_req_ignore_eos` reserves their whole
  max_new_tokens when the tree cache is disabled), which no metric shows.
* --schedule-conservativeness up: `predict_fewer_overcommits` (server_model.py).
"""

import math
from dataclasses import dataclass

from sglang_tuner.model.advice import Prediction
from sglang_tuner.model.signals import (
    GENERATION_TOKENS_RATE,
    NUM_RUNNING_REQS,
    PREFIX_CACHE_HIT_RATIO,
    PROMPT_TOKENS_MEAN,
    REQUEST_RATE,
    RETRACTIONS_PER_MINUTE,
)
from sglang_tuner.predict.server_model import (
    FLOOR,
    PRICED_CHUNK,
    SPREAD,
    Observed,
    ServerModel,
    batch_effects,
    no_prediction,
    objective,
    objective_gain,
    prefill_price,
    server_model,
)
from sglang_tuner.rule import RuleInput

MAX_RECOMPUTE_SHARE = 0.5  # never credit more than half the time back to a stopped storm


@dataclass(frozen=True, slots=True)
class Holding:
    """KV tokens one running request of one rank holds: on average now, and at its end."""

    now: float
    end: float
    basis: str


def output_per_request(inp: RuleInput) -> float | None:
    """Output tokens of a finished request: generation tokens over finished requests."""
    gen, rate = inp.view.mean(GENERATION_TOKENS_RATE), inp.view.mean(REQUEST_RATE)
    return gen / rate if gen and rate else None


def holding(inp: RuleInput, obs: Observed) -> Holding | None:
    """What a running request holds now (token usage x pool / running) and at its end (plus
    half a finished request's output; without output lengths, twice what it holds now)."""
    now = obs.kv_per_request
    if now <= 0:
        return None
    output = output_per_request(inp)
    if output:
        why = f"{now:,.0f} tokens each now + half of {output:,.0f} output tokens"
        return Holding(now, now + output / 2, why)
    return Holding(now, 2 * now, f"{now:,.0f} tokens each now, x2 (no output length observed)")


def fitting_batch(inp: RuleInput) -> tuple[int, Holding] | str:
    """The per-rank batch the pool holds to every request's end, or why it cannot be sized."""
    model = server_model(inp)
    if isinstance(model, str):
        return model
    obs = model.obs
    hold = holding(inp, obs) if obs.pool else None
    if hold is None or not obs.pool:
        return "the KV pool size and token usage are needed to size the batch it holds"
    return max(1, math.floor(obs.pool / hold.end)), hold


def recompute_share(inp: RuleInput, model: ServerModel) -> tuple[float, str]:
    """The share of a rank's time spent prefilling retracted requests again: retracted
    requests per second x what a running request holds x the physics' prefill seconds per
    token (a retracted request keeps its output and prefills prompt and output again, each
    token attending to what it holds before it: `prefill_price`). On five simulated storms
    (8B/H100) the cap's prediction with this credit, then priced as fresh 4096-token passes,
    missed the measured tokens/s by 1-3 points on four and by 9 on one; with the prompt
    alone, by 2-7."""
    obs, physics = model.obs, model.physics
    per_minute = (inp.view.mean(RETRACTIONS_PER_MINUTE) or 0.0) / obs.ranks
    if physics is None or per_minute <= 0:
        return 0.0, "the retractions' recompute not counted (no physics for this model or GPU)"
    held = obs.kv_per_request
    per_token = prefill_price(physics, PRICED_CHUNK, held)  # its prompt and output again
    share = min(MAX_RECOMPUTE_SHARE, per_minute / 60 * held * per_token)
    return share, f"{share:.1%} of the time went to prefilling retracted requests again"


def capped_batch(inp: RuleInput, obs: Observed, cap: int) -> float:
    """The mean per-rank batch once capped: each busy sample's batch cut to `cap`."""
    batches = [
        r[NUM_RUNNING_REQS] / obs.ranks
        for r in inp.view.rows((NUM_RUNNING_REQS,))
        if r[NUM_RUNNING_REQS] > 0
    ]
    if not batches:
        return min(obs.batch, float(cap))
    return sum(min(b, float(cap)) for b in batches) / len(batches)


def _predicted(
    inp: RuleInput, model: ServerModel, batch: float, ratio: float, why: str, slots: bool = False
) -> Prediction:
    """The prediction for a change that moves the batch to `batch` and tokens/s by `ratio`
    (`slots`: by a cap on the running requests)."""
    gain = objective_gain(inp, model.obs, batch, ratio, slots)
    spread = max(FLOOR, SPREAD * abs(gain))
    effects = batch_effects(inp, model, batch, ratio, slots)
    basis = f"{why}; {model.basis}"
    return Prediction(objective(inp.profile), gain, gain - spread, gain + spread, basis, effects)


def predict_cap_down(inp: RuleInput, cap: int) -> Prediction:
    """--max-running-requests down to `cap` per rank: the batch shrinks to it, and the time
    spent prefilling retracted requests again comes back."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(inp.profile, model)
    obs = model.obs
    batch = capped_batch(inp, obs, cap)
    share, credit = recompute_share(inp, model)
    ratio = model.throughput_ratio(batch) / (1 - share)
    why = f"batch {obs.batch:.0f} -> {batch:.0f} per rank, no retraction; {credit}"
    return _predicted(inp, model, batch, ratio, why, slots=True)


def predict_radix_off(inp: RuleInput) -> Prediction:
    """--disable-radix-cache: no room freed for the running batch (SGLang evicts the cache
    before it retracts); each request holds its whole prompt and the hits are prefilled again."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(inp.profile, model)
    obs, hit = model.obs, inp.view.mean(PREFIX_CACHE_HIT_RATIO) or 0.0
    prompt = inp.view.mean(PROMPT_TOKENS_MEAN) or obs.kv_per_request
    now = obs.kv_per_request
    batch = obs.batch * now / (now + hit * prompt) if now > 0 else obs.batch
    extra = model.prefill_per_step(batch) * hit / max(1e-9, 1 - hit)
    after = batch / (model.step(batch) + extra)
    ratio = after / (obs.batch / model.step(obs.batch))
    why = (
        f"the cache is evicted before any retraction: no room freed; hit ratio {hit:.2f} "
        f"prefilled again and held per request, batch {obs.batch:.0f} -> {batch:.0f} per rank"
    )
    return _predicted(inp, model, batch, ratio, why)
