"""A model of one server: what a candidate change would do to THIS server's objective.

Built per judgement from the server's config (`ServerConfig`) and its window. The decode step is
the unit: one step of a rank's running batch `b` takes `T(b)` seconds, prefill interleaved, so
the rank makes `b / T(b)` tokens per second. `T` comes from

* the window's own points: (per-rank batch, batch / gen throughput) fitted as `T = a + s·b`,
  usable when the batch moved enough over the window;
* the physics (`sglang_physics`), where the model path and GPU name are recognised: the decode
  step `D(b)` of the model on the GPU, the prefill a decode step carries (`b x c`, with `c` the
  prefill seconds per output token from the window's prompt and generation rates), calibrated
  so that `T(b0)` is the step observed now: `T(b) = k·D(b) + b·c`.

The physics shape is preferred (it extrapolates), the fit widens the range; with neither the
answer is "no prediction" and why. Predictions are relative: gain on tokens/s offline, on TTFT
(queue wait) or ITL online. Pure: no I/O, no clock.
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from sglang_physics import GPUS, MODELS, Deployment, Gpu, ModelSpec, StepModel, gpu_named
from sglang_physics import kv_pool_tokens as physics_pool_tokens

from sglang_tuner.model.advice import ITL_P99, Prediction, Severity
from sglang_tuner.model.decode_rate import decode_rate
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import (
    GEN_THROUGHPUT,
    GENERATION_TOKENS_RATE,
    ITL_P50_SECONDS,
    ITL_P99_SECONDS,
    MAX_TOTAL_NUM_TOKENS,
    NUM_DP_RANKS,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    PREFIX_CACHE_HIT_RATIO,
    PROMPT_TOKENS_RATE,
    REQUEST_RATE,
    RETRACTIONS_PER_MINUTE,
    TOKEN_USAGE,
)
from sglang_tuner.model.window_histogram import ITL_BUCKETS, share_above, window_buckets
from sglang_tuner.predict.itl_model import TAIL_LEVEL, itl_p99_change, stall_quantile
from sglang_tuner.predict.queueing import UNBOUNDED, fit_queue, window_p99
from sglang_tuner.predict.units import max_running_per_rank
from sglang_tuner.rule import RuleInput

THROUGHPUT, TTFT, ITL = "tok/s", "TTFT p99", "ITL p50"
CRASHES = "crashes"  # a crash fix: its gain is the fall of crashes (1.0: they stop)
MIN_GAIN = 0.05  # a change predicted to gain this much on the objective is a warning
# The range around the central figure: the calibration's spread (k from 0.5x to 2x the
# physics) is taken as +-30 % of the predicted change, never narrower than 2 points.
SPREAD, FLOOR = 0.3, 0.02
_FIT_MIN_POINTS, _FIT_MIN_SPREAD = 4, 0.2  # batch range >= 20 % of its mean to fit a slope
_CALIBRATION = (0.5, 3.0)  # the physics' decode step may be off by this much, no more
_BINDING_USAGE = 0.7  # the pool binds admission from here (SGLang reserves room for outputs)
PRICED_CHUNK = 4096  # prefill is priced per token at the physics' time for a chunk this long
MEDIAN = 0.5  # ITL p50: the stall half the steps exceed
STALL_BOUND = "ITL p50 is mostly prefill"  # latency_cap's answer where the median step waits


def objective(profile: str) -> str:
    """What a profile is tuned for: latency online (TTFT), throughput otherwise."""
    return TTFT if profile == "online" else THROUGHPUT


def severity_for(prediction: Prediction, unknown: Severity | None = None) -> Severity | None:
    """Warning from `MIN_GAIN` up, a hint below; `unknown` where there is no prediction."""
    if prediction.gain is None:
        return unknown
    return Severity.WARNING if prediction.gain >= MIN_GAIN else Severity.INFO


def no_prediction(profile: str, why: str) -> Prediction:
    return Prediction(objective(profile), None, basis=why)


def _unchanged(inp: RuleInput, why: str) -> Prediction:
    """The objective as today (within the floor): the change moves nothing the model sees."""
    return Prediction(objective(inp.profile), 0.0, -FLOOR, FLOOR, why)


# -- the server's specs ----------------------------------------------------------------------
def model_spec(path: str | None) -> ModelSpec | None:
    """The physics model a model path names ('meta-llama/Llama-3.1-8B-Instruct'), if known."""
    if not path:
        return None
    name = path.rsplit("/", 1)[-1].lower()
    hits = [key for key, spec in MODELS.items() if path == spec.path or key in name]
    return MODELS[max(hits, key=len)] if hits else None


def gpu_spec(name: str | None) -> Gpu | None:
    """The physics GPU a reported name means ('NVIDIA H100 80GB HBM3', 'L40S'), if known."""
    if not name:
        return None
    try:
        return gpu_named(name)
    except ValueError:
        squeezed = name.upper().replace(" ", "").replace("-", "")
        hits = [k for k in GPUS if k.replace("-", "") in squeezed]
        return GPUS[max(hits, key=len)] if hits else None


def deployment(config: ServerConfig) -> Deployment:
    """The parallel layout and formats /server_info reports."""
    return Deployment(
        tp=config.tp_size or 1,
        dp=config.dp_size or 1,
        dp_attention=bool(config.enable_dp_attention),
        kv_dtype_bytes=1 if (config.kv_cache_dtype or "").startswith("fp8") else 2,
        weight_bytes_per_param=1.0 if "fp8" in (config.quantization or "") else 0.0,
    )


def physics_for(config: ServerConfig | None) -> StepModel | None:
    """The step model of this server's model on its GPU, when both are recognised."""
    if config is None:
        return None
    model, gpu = model_spec(config.model_path), gpu_spec(config.gpu_model)
    if model is None or gpu is None:
        return None
    try:
        return StepModel(gpu, model, deployment(config))
    except (ValueError, KeyError, ZeroDivisionError):
        return None


# -- what the window observed ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Observed:
    """One rank's window: batch and step time (busy-sample means), queue (p50), pool use
    (mean), prefill per output token."""

    ranks: int
    batch: float  # running requests per rank
    step: float  # seconds per decode step, prefill interleaved: batch / tokens per second
    queue: float  # waiting requests per rank
    usage: float  # token usage (0-1)
    pool: float | None  # KV pool tokens per rank
    prefill_per_output: float  # prompt tokens computed (not cached) per output token
    retracting: bool
    itl: float | None = None  # ITL p50: a decode step without the prefills between steps
    prompt: float | None = None  # prompt tokens per request, cached part included

    @property
    def kv_per_request(self) -> float:
        """Cached tokens per running request (token usage x pool / batch)."""
        if not self.pool or self.batch <= 0:
            return 0.0
        return self.usage * self.pool / self.batch


def observe(inp: RuleInput) -> Observed | None:
    """The window's figures per rank; None while nothing decodes."""
    view = inp.view
    rows = [
        r
        for r in view.rows((NUM_RUNNING_REQS, GEN_THROUGHPUT))
        if r[NUM_RUNNING_REQS] > 0 and r[GEN_THROUGHPUT] > 0
    ]
    if not rows:
        return None
    ranks = max(1, int(view.last(NUM_DP_RANKS) or 1))
    # means, not medians: a small batch's median is an integer (6 where 5.1 ran on average),
    # and tokens per second over the window are a mean
    running = sum(r[NUM_RUNNING_REQS] for r in rows) / len(rows)
    tokens = decode_rate(rows)
    assert tokens is not None
    pool = _pool(inp, ranks)
    # SGLang counts a request's prompt and generated tokens when it finishes: their rates over
    # a scrape are lumpy (no request finished in most scrapes of a slow server: a median of 0),
    # their means are the rates. The log has no generation counter: its decode lines' gen
    # throughput is the same rate.
    prompt = view.mean(PROMPT_TOKENS_RATE)
    gen = view.mean(GENERATION_TOKENS_RATE) or tokens
    hit = view.quantile(PREFIX_CACHE_HIT_RATIO, 0.5) or 0.0
    per_output = prompt * (1 - hit) / gen if prompt and gen else 0.0
    return Observed(
        ranks=ranks,
        batch=running / ranks,
        step=running / tokens,
        queue=(view.quantile(NUM_QUEUE_REQS, 0.5) or 0.0) / ranks,
        usage=view.mean(TOKEN_USAGE) or 0.0,
        pool=pool,
        prefill_per_output=per_output,
        retracting=(view.total(RETRACTIONS_PER_MINUTE) or 0.0) > 0,
        itl=view.quantile(ITL_P50_SECONDS, 0.5),
        prompt=prompts[1] if (prompts := prompt_tokens(inp)) else None,
    )


def _pool(inp: RuleInput, ranks: int) -> float | None:
    config = inp.config
    if config is not None and config.max_total_num_tokens:
        return float(config.max_total_num_tokens)
    total = inp.view.last(MAX_TOTAL_NUM_TOKENS)
    return None if not total else total / ranks


def step_fit(inp: RuleInput) -> tuple[float, float, int] | None:
    """(a, s, points) of step = a + s x per-rank batch over the busy samples, when the batch
    moved enough for a slope; a negative slope or intercept is no fit."""
    ranks = max(1, int(inp.view.last(NUM_DP_RANKS) or 1))
    pts = [
        (r[NUM_RUNNING_REQS] / ranks, r[NUM_RUNNING_REQS] / r[GEN_THROUGHPUT])
        for r in inp.view.rows((NUM_RUNNING_REQS, GEN_THROUGHPUT))
        if r[NUM_RUNNING_REQS] > 0 and r[GEN_THROUGHPUT] > 0
    ]
    if len(pts) < _FIT_MIN_POINTS:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    if (max(xs) - min(xs)) < _FIT_MIN_SPREAD * mx:
        return None
    spread = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread
    intercept = my - slope * mx
    return None if slope < 0 or intercept < 0 else (intercept, slope, len(pts))


# -- the server model --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ServerModel:
    """Step time against batch for one server: physics calibrated on the window, or a fit."""

    obs: Observed
    physics: StepModel | None
    fit: tuple[float, float, int] | None
    graph_max_bs: int | None  # None: graphs off, or unknown
    graphs_off: bool
    stall: "Stall | None" = None  # the prefill a decode step waits for, where it can be read
    bursts: "Bursts | None" = None  # behind a binding pool: the steps that waited, as read

    @property
    def basis(self) -> str:
        if self.physics is not None:
            m, g = self.physics.model.path.rsplit("/", 1)[-1], self.physics.gpu.name
            return f"{m} on {g}, calibrated on the observed step"
        assert self.fit is not None
        return f"a fit of step time on batch over {self.fit[2]} samples"

    def decode(self, batch: float, cuda_graph: bool | None = None) -> float:
        """The physics' decode step at `batch` (KV per request as observed), graph or eager.
        Unpadded: the batch is a window's mean, and SGLang's padding to the next captured size
        averages out over the sizes a moving batch takes (padding the mean misses by up to 16
        points on Qwen3-30B-A3B, whose padding rows route to more experts)."""
        assert self.physics is not None
        b = max(1, round(batch))
        graph = self.uses_graph(b) if cuda_graph is None else cuda_graph
        kv = b * self.obs.kv_per_request
        return self.physics.decode_seconds(b, kv, cuda_graph=graph)

    def uses_graph(self, batch: float) -> bool:
        if self.graphs_off:
            return False
        return self.graph_max_bs is None or batch <= self.graph_max_bs

    @property
    def stall_evident(self) -> bool:
        """ITL p50 beyond what calibrating the physics' decode step can explain (`_CALIBRATION`'s
        ceiling, with the physics): the median step waits for a prefill whether the pool binds
        or not (long prompts behind short outputs: each step's departures admit prompts that
        cost more than the step itself)."""
        itl = self.obs.itl
        if self.physics is None or not itl:
            return False
        return itl > _CALIBRATION[1] * self.decode(self.obs.batch)

    @property
    def decode_itl(self) -> float | None:
        """ITL p50 less the median stall it holds: a decode step alone. Where the pool does not
        bind, each departure admits one request at once and SGLang runs its prefill before the
        next decode step, so at about an admission a step or more most steps wait for one and
        ITL p50 holds that stall (`Stall`, at today's batch). Where the pool binds, admission
        waits for free tokens and comes in bursts: ITL p50 is the decode step, unless it is
        more than calibration can make of one (`stall_evident`): then the decode step is the
        physics' own and the rest of ITL p50 is the stall."""
        itl, stall = self.obs.itl, self.stall
        if itl and self.stall_evident:
            return self.decode(self.obs.batch)
        if not itl or stall is None or self.obs.usage >= _BINDING_USAGE:
            return itl
        return max(itl - stall.seconds(1.0, MEDIAN), 0.5 * itl)

    def median_stall(self, batch: float) -> float:
        """The stall ITL p50 holds at `batch` (`decode_itl`): where ITL p50 shows one
        (`stall_evident`), today's, grown as the admissions' median stall grows with the batch
        (`Stall`; without it, with the batch); where the pool binds, what the median step's
        stall grows by from today's as the steps that wait grow with the batch (`Bursts`,
        read off the window's ITL histogram; 0 without it)."""
        obs, stall = self.obs, self.stall
        if obs.itl and self.stall_evident:
            scale = self.stall_scale()
            if stall is not None and scale is not None:
                return scale * stall.seconds(batch / max(obs.batch, 1e-9), MEDIAN)
            return (obs.itl - self.decode(obs.batch)) * batch / max(obs.batch, 1e-9)
        if obs.usage >= _BINDING_USAGE:
            return self.bursts_growth(batch)
        if stall is None or not obs.itl:
            return 0.0
        return stall.seconds(batch / max(obs.batch, 1e-9), MEDIAN)

    def bursts_growth(self, batch: float) -> float:
        """What the median step's wait behind a full pool grows by at `batch` (`Bursts`; 0
        where the pool does not bind or the window shows no waits)."""
        obs = self.obs
        if self.bursts is None or self.stall is None or obs.usage < _BINDING_USAGE:
            return 0.0
        if obs.itl and self.stall_evident:
            return 0.0
        return self.bursts.growth(batch / max(obs.batch, 1e-9))

    def stall_scale(self) -> float | None:
        """Where ITL p50 shows its stall (`stall_evident`): that stall over the one the
        admissions' model gives at today's batch (None where the model gives none)."""
        obs, stall = self.obs, self.stall
        if stall is None or not obs.itl or not self.stall_evident:
            return None
        now = stall.seconds(1.0, MEDIAN)
        return (obs.itl - self.decode(obs.batch)) / now if now > 0 else None

    @property
    def split_by_itl(self) -> bool:
        """ITL p50, less its median stall, is the decode step: the rest of the observed step
        is prefill."""
        itl = self.decode_itl
        return itl is not None and 0 < itl < self.obs.step

    def prefill_per_step(self, batch: float) -> float:
        """Prefill seconds a decode step of `batch` carries (each output token's prompt share):
        from the observed step less ITL p50, else from the physics' prefill (`prefill_price`,
        each token attending to the window's prompt before it) and the window's prompt /
        generation token rates."""
        if self.split_by_itl:
            assert self.decode_itl is not None
            return batch * (self.obs.step - self.decode_itl) / self.obs.batch
        if self.physics is None or self.obs.prefill_per_output <= 0:
            return 0.0
        per_token = prefill_price(self.physics, PRICED_CHUNK, self.obs.prompt)
        return batch * self.obs.prefill_per_output * per_token

    def scale(self) -> float:
        """k in T(b) = k·D(b) + prefill: the observed decode step over the physics' (clamped)."""
        d0 = self.decode(self.obs.batch)
        decode = self.obs.step - self.prefill_per_step(self.obs.batch)
        k = decode / d0 if d0 > 0 else 1.0
        return min(max(k, _CALIBRATION[0]), _CALIBRATION[1])

    def step(self, batch: float, cuda_graph: bool | None = None) -> float:
        """T(batch): predicted seconds per decode step of one rank."""
        if self.physics is not None:
            return self.scale() * self.decode(batch, cuda_graph) + self.prefill_per_step(batch)
        assert self.fit is not None
        return self.fit[0] + self.fit[1] * batch

    def itl_scale(self) -> float | None:
        """ITL p50 observed over the physics' decode step at the observed batch: a decode
        step between two tokens, without the prefills that stall some of them."""
        itl = self.decode_itl
        if self.physics is None or not itl or itl <= 0:
            return None
        d0 = self.decode(self.obs.batch)
        return itl / d0 if d0 > 0 else None

    def itl(self, batch: float) -> float:
        """ITL p50 at `batch`: the decode step's shape, calibrated on the observed ITL, and the
        median stall at that batch (`decode_itl`)."""
        scale = self.itl_scale()
        assert scale is not None
        return scale * self.decode(batch) + self.median_stall(batch)

    def itl_unbound(self, batch: float, level: float = MEDIAN) -> float | None:
        """ITL at a batch the pool does not bind (a cap its slots hold, a pool every waiting
        request fits in; `level`: the share of tokens above, p50 by default): the decode step
        plus the stall that share of steps exceeds, each step waiting for the prompts admitted
        one per departure since the last (`Stall`). Where the pool binds
        today, admission waits for free tokens and comes in bursts, so today's ITL p50 is the
        decode step alone; where it does not, it also holds today's median stall. The stalls
        today's p99 shows beyond the count (admissions bunched behind a full pool, retracted
        requests prefilled again) do not come back under a cap that frees the pool. Where ITL
        p50 shows its stall (`stall_evident`), the admissions' stall is scaled to it. None
        without the physics or the rates that count admissions."""
        obs, stall = self.obs, self.stall
        if stall is None or self.physics is None or not obs.itl or obs.batch <= 0:
            return None
        d0 = self.decode(obs.batch)
        if d0 <= 0:
            return None
        step = self.decode_itl or obs.itl  # less today's median stall where it holds one
        waits = stall.seconds(batch / obs.batch, level)
        if self.stall_evident:  # today's median stall is read, not modelled: scale to it
            scale = self.stall_scale()
            if scale is not None:
                waits *= scale
            elif level == MEDIAN:
                waits = self.median_stall(batch)
        return step * self.decode(batch) / d0 + waits

    def throughput_ratio(self, batch: float) -> float:
        """Tokens/s at `batch` over tokens/s now."""
        b0 = self.obs.batch
        return (batch / self.step(batch)) / (b0 / self.step(b0))

    def fit_ratio(self, batch: float) -> float | None:
        if self.fit is None:
            return None
        a, s, _ = self.fit
        b0 = self.obs.batch
        return (batch / (a + s * batch)) / (b0 / (a + s * b0))


def server_model(inp: RuleInput) -> ServerModel | str:
    """The model of this server, or why there is none (`not_modelled`)."""
    config = inp.config
    if why := not_modelled(config):
        return why
    obs = observe(inp)
    if obs is None:
        return "nothing decoded in the window (no running batch with generation throughput)"
    physics, fit = physics_for(config), step_fit(inp)
    if physics is None and fit is None:
        return (
            "model or GPU not recognised (model_path, gpu_model) and the batch did not vary "
            "enough over the window to fit step time on batch"
        )
    off = bool(config and config.disable_cuda_graph)
    max_bs = config.cuda_graph_max_bs if config else None
    stall = stall_of(inp, obs, physics)
    return ServerModel(obs, physics, fit, max_bs, off, stall, bursts_of(inp, obs, stall))


def not_modelled(config: ServerConfig | None) -> str:
    """Why the model does not cover this server ("" where it does): speculative decoding (a
    draft model's steps and a verify pass per step, none of which the step model has, nor the
    window's fit of step on batch: an accepted length moves tokens per step), or one role of
    prefill-decode disaggregation (a prefill server's requests leave after their first token, a
    decode server's arrive with their KV cache over the network)."""
    if config is None:
        return ""
    algorithm = config.raw.get("speculative_algorithm")
    if algorithm and str(algorithm).lower() not in ("none", "null"):
        return (
            f"speculative decoding ({algorithm}): the model has no draft or verify steps, and "
            "the tokens a step makes move with the accepted length"
        )
    if config.disaggregation_mode in ("prefill", "decode"):
        return (
            f"a {config.disaggregation_mode} server of prefill-decode disaggregation: the model "
            "has no KV transfer between the prefill and the decode servers"
        )
    return ""


@dataclass(frozen=True, slots=True)
class Stall:
    """The prefill a decode step waits for when each departure admits one request: the
    prompts admitted since the last step, a Poisson count of mean `admitted` at the observed
    batch (`admitted_per_step`), `cost` seconds for a number of mean prompts."""

    admitted: float
    cost: Callable[[float], float]

    def seconds(self, batch_ratio: float, level: float) -> float:
        """The stall `level` of the steps exceed at the batch times `batch_ratio`."""
        prompts = stall_quantile(self.admitted * batch_ratio, level)
        return self.cost(prompts) if prompts > 0 else 0.0


def stall_of(inp: RuleInput, obs: Observed, physics: StepModel | None) -> Stall | None:
    """The window's admissions per step, priced by the physics' prefill passes (`stall_cost`);
    None without the physics or the rates. Not calibrated on the window: today's tail holds
    what a cap removes (bursts behind a full pool), and the step less ITL p50 is no mean."""
    admitted, cost = admitted_per_step(inp, obs), stall_cost(inp, physics)
    if admitted is None or cost is None:
        return None
    return Stall(admitted, cost)


@dataclass(frozen=True, slots=True)
class Bursts:
    """Behind a binding pool, the decode steps that waited for a prefill, as the window's ITL
    histogram shows them: `share` of the tokens came in steps that waited (a Poisson rate of
    `events` waits per step: share = 1 - e^-events), each wait as long as the histogram shows
    past today's ITL p50 (`itl`, the decode step), read off its buckets (`bounds`,
    cumulative `counts`). Admission behind a full pool waits for free tokens: where each
    departure frees room for the next request, the waits follow the departures and grow with
    the batch, so a larger pool brings one into the median step; where requests admitted
    together finish together (outputs run to the same max_new_tokens), one wait admits a
    cohort and few steps wait. Read, not assumed: a Poisson count at the admissions' own rate
    put a whole prompt's prefill in the median step of servers whose histogram showed 3 % of
    steps waiting, and prompts of exponential length put the median step's wait near 0 where
    the smallest one the histogram shows is a whole prompt's prefill."""

    events: float
    share: float
    itl: float
    bounds: tuple[float, ...]
    counts: tuple[float, ...]

    def waited(self, seconds: float) -> float:
        """The share of today's waits longer than `seconds`."""
        above = share_above(self.itl + seconds, self.bounds, self.counts) or 0.0
        return min(1.0, above / self.share)

    def median(self, events: float) -> float:
        """The wait the median step holds at `events` waits per step (0 where fewer than half
        of the steps wait): each step holds a Poisson count k of today's waits, taken as k
        times one of them."""
        return _wait_quantile(self, events, MEDIAN)

    def tail(self, events: float) -> float:
        """The wait ITL p99's step holds at `events` waits per step (`TAIL_LEVEL` of the steps
        wait longer; 0 where fewer than that wait at all), as `median`."""
        return _wait_quantile(self, events, TAIL_LEVEL)

    def growth(self, batch_ratio: float) -> float:
        """What the median step's wait grows by at the batch times `batch_ratio`: the waits
        per step grow with the batch (departures per step), each one as today's."""
        return self.median(self.events * batch_ratio) - self.median(self.events)


@lru_cache(maxsize=1024)  # a latency cap's search asks at many batches
def _wait_quantile(bursts: Bursts, events: float, level: float) -> float:
    """The wait `level` of the steps exceed at `events` waits per step."""
    if -math.expm1(-events) <= level:
        return 0.0
    top = int(events + 10 * math.sqrt(events) + 10)

    def above(wait: float) -> float:  # the share of steps that wait longer than `wait`
        total, pk = 0.0, math.exp(-events)
        for k in range(1, top + 1):
            pk *= events / k
            total += pk * bursts.waited(wait / k)
        return total

    finite = [b for b in bursts.bounds if math.isfinite(b)]
    lo, hi = 0.0, top * (max(finite) if finite else 1.0)
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if above(mid) > level else (lo, mid)
    return (lo + hi) / 2


def bursts_of(inp: RuleInput, obs: Observed, stall: Stall | None) -> Bursts | None:
    """The steps that waited for a prefill behind a binding pool (`Bursts`): ITL's tokens past
    today's ITL p50 by half a mean prompt's prefill (between a decode step and one that waited
    for a prompt). None where the pool does not bind, it retracts (retracted requests come
    back in bursts of their own), the window has no ITL histogram or no stall price, no step
    waited, or half of them did (today's ITL p50 then holds a wait itself)."""
    if stall is None or not obs.itl or obs.usage < _BINDING_USAGE or obs.retracting:
        return None
    found = window_buckets(inp.view, ITL_BUCKETS)
    if found is None or stall.admitted <= 0:
        return None
    share = share_above(obs.itl + stall.cost(1.0) / 2, *found)
    if not share or share <= 0 or share >= MEDIAN:
        return None
    events = min(-math.log1p(-share), stall.admitted)
    return Bursts(events, share, obs.itl, tuple(found[0]), tuple(found[1]))


# -- predictions --------------------------------------------------------------------------------
def _ranged(
    inp: RuleInput, model: ServerModel, batch: float, why: str, freed: bool = False
) -> Prediction:
    """The prediction for a change that moves the running batch from now to `batch`
    (`freed`: the pool no longer binds it, `batch_effects`)."""
    ratio = model.throughput_ratio(batch)
    other = model.fit_ratio(batch)
    gain = objective_gain(inp, model.obs, batch, ratio)
    spread = max(FLOOR, SPREAD * abs(gain))
    low, high = gain - spread, gain + spread
    if other is not None and model.physics is not None:
        alt = objective_gain(inp, model.obs, batch, other)
        low, high = min(low, alt), max(high, alt)
    effects = batch_effects(inp, model, batch, ratio, freed=freed)
    prediction = Prediction(
        objective(inp.profile), gain, low, high, f"{why}; {model.basis}", effects
    )
    return queue_bound(prediction, inp, model.obs, batch, ratio)


def queue_bound(
    prediction: Prediction, inp: RuleInput, obs: Observed, batch: float, ratio: float
) -> Prediction:
    """The prediction, saying so where open arrivals would outrun the new capacity: TTFT p99
    then grows for as long as the load lasts, and no figure is given for it."""
    if ttft_change(inp, obs, batch, ratio) != UNBOUNDED:
        return prediction
    why = (
        f"{prediction.basis}; TTFT p99 unbounded: today's arrivals need more than {batch:.0f} "
        "running per rank, the queue grows over the window"
    )
    return replace(prediction, basis=why, unbounded=(*prediction.unbounded, TTFT))


def _spread(change: float) -> tuple[float, float, float]:
    spread = max(FLOOR, SPREAD * abs(change))
    return change, change - spread, change + spread


def batch_effects(
    inp: RuleInput,
    model: ServerModel,
    batch: float,
    ratio: float,
    slots: bool = False,
    freed: bool = False,
) -> dict[str, tuple[float, float, float]]:
    """What moving the running batch to `batch` does to every objective, as the metric's own
    relative change: tokens/s by the step model; ITL p50 by the decode step (calibrated on the
    observed ITL where the physics has the model, else the whole step); ITL p99 by its stall
    (`itl_p99_change`); TTFT p99 by the queueing model (`ttft_change`; `slots`: a cap by slots),
    unless unbounded. A cap that leaves the batch held by its slots, or a change after which
    every waiting request fits (`freed`), admits one request per departure: ITL p50 and p99
    from the decode step and that admission's stall (`ServerModel.itl_unbound`)."""
    obs = model.obs
    unbound = freed or (slots and slot_bound(obs.usage, obs.batch, batch))
    slotted = model.itl_unbound(batch) if unbound else None
    decode = None  # ITL p50's change less the wait it comes to hold behind a full pool
    if slotted is not None and obs.itl:
        itl = slotted / obs.itl - 1
    elif model.physics is not None and model.itl_scale() is not None:
        now = model.itl(obs.batch)
        itl = model.itl(batch) / now - 1
        waits = model.bursts_growth(batch)
        decode = (model.itl(batch) - waits) / now - 1 if waits else None
    else:
        itl = model.step(batch) / model.step(obs.batch) - 1
    effects = {THROUGHPUT: _spread(ratio - 1), ITL: _spread(itl)}
    tail = unbound_tail(inp, model, batch) if unbound else None
    if tail is None:  # a tail token waits for its own stall, on the decode step alone
        tail = itl_tail(inp, model, batch, itl if decode is None else decode)
    if tail is not None:
        effects[ITL_P99] = _spread(tail)
    ttft = ttft_change(inp, obs, batch, ratio, slots)
    if ttft is not None and ttft != UNBOUNDED:
        effects[TTFT] = _spread(ttft)
    return effects


def capped_itl(model: ServerModel, batch: float, level: float = MEDIAN) -> float | None:
    """ITL (p50, or the quantile `level` of tokens exceed) at a cap to `batch` that its slots
    hold (`slot_bound`: the pool no longer binds): `ServerModel.itl_unbound`; None where the
    pool still binds or the model cannot say."""
    obs = model.obs
    if not slot_bound(obs.usage, obs.batch, batch):
        return None
    return model.itl_unbound(batch, level)


def unbound_tail(inp: RuleInput, model: ServerModel, batch: float) -> float | None:
    """ITL p99's relative change at a batch the pool no longer binds
    (`ServerModel.itl_unbound`), None where it cannot say."""
    p99, then = itl_p99(inp), model.itl_unbound(batch, TAIL_LEVEL)
    if not p99 or then is None:
        return None
    return then / p99 - 1


def itl_tail(inp: RuleInput, model: ServerModel, batch: float, itl_change: float) -> float | None:
    """ITL p99's relative change at `batch` (ITL p50 moving by `itl_change`); None without
    both quantiles. The stall is the prefill of the prompts admitted between two decode steps
    (`admitted_per_step`), priced by the physics where it has the model (`stall_cost`):
    today's stall scaled (`itl_p99_change`); where today's p99 holds no wait but the window's
    histogram shows waits behind a binding pool, those waits price it (`_tail_waits`)."""
    obs = model.obs
    p50, p99 = obs.itl, itl_p99(inp)
    if not p50 or not p99 or p99 < p50 or obs.batch <= 0:
        return None
    waits = _tail_waits(model, batch)
    if waits is not None:
        return (p50 * (1 + itl_change) + (p99 - p50) + waits) / p99 - 1
    admitted = admitted_per_step(inp, obs)
    cost = stall_cost(inp, model.physics)
    return itl_p99_change(p50, p99, itl_change, batch / obs.batch, admitted, cost)


def _tail_waits(model: ServerModel, batch: float) -> float | None:
    """Behind a binding pool whose window shows waits (`Bursts`) too few to reach ITL p99
    today: the wait ITL p99's step will hold at `batch`, the waits the histogram shows
    compounded at the rate the batch brings (`Bursts.tail`). Admission behind a full pool
    waits for free tokens, and SGLang's `PrefillAdder` (0.4-0.5) then takes every waiting
    request whose prompt and reserved output the freed tokens cover into one prefill batch,
    so one wait can hold several prompts. In the simulator, which admits the same way, a 70B
    on 8 L40S whose pool
    grew from 14 to 230 running showed 0.9 % of its tokens waiting 0.1-0.8 s today, and ITL p99
    went from 35 ms to 0.9 s, where pricing one admission per departure at a prompt's prefill
    predicted 0.11 s. None elsewhere (today's p99 holds a wait: it is scaled, `itl_p99_change`)."""
    bursts = model.bursts
    if bursts is None or bursts.tail(bursts.events) > 0:
        return None
    return bursts.tail(bursts.events * batch / max(model.obs.batch, 1e-9))


def admitted_per_step(inp: RuleInput, obs: Observed) -> float | None:
    """Requests a rank admits per decode step on average: as many as leave, its batch over
    the output tokens per request (Little's law, whether requests queue or not); None
    without the generation and request rates."""
    tokens, requests = inp.view.mean(GENERATION_TOKENS_RATE), inp.view.mean(REQUEST_RATE)
    if not tokens or not requests or tokens <= requests:
        return None
    return obs.batch / (tokens / requests)


def stall_cost(inp: RuleInput, physics: StepModel | None) -> Callable[[float], float] | None:
    """Seconds the physics takes to prefill a number of the window's mean prompts (their
    uncached part, `prompt_tokens`) in passes of today's --chunked-prefill-size, each token
    attending to half its prompt: a pass's weight reads are shared by its tokens, so two
    prompts cost less than twice one. None without the physics or the token rates."""
    prompt = prompt_tokens(inp)
    if physics is None or prompt is None or prompt[0] <= 0:
        return None
    configured = inp.config.chunked_prefill_size if inp.config else None
    chunk = configured if configured and configured > 0 else PRICED_CHUNK
    uncached, context = prompt[0], prompt[1] / 2

    def seconds(tokens: float) -> float:
        n = max(1, round(tokens))
        return physics.prefill_seconds(n, physics.model.attention_flops(n, context))

    def cost(prompts: float) -> float:
        full, rest = divmod(prompts * uncached, chunk)
        return full * seconds(chunk) + (seconds(rest) if rest >= 1 else 0.0)

    return cost


def prompt_tokens(inp: RuleInput) -> tuple[float, float] | None:
    """(uncached, whole) prompt tokens per request over the window: prompt tokens over finished
    requests, the uncached part less the prefix-cache hits; None without both rates."""
    view = inp.view
    prompt_rate, requests = view.mean(PROMPT_TOKENS_RATE), view.mean(REQUEST_RATE)
    if not prompt_rate or not requests:
        return None
    hit = view.quantile(PREFIX_CACHE_HIT_RATIO, 0.5) or 0.0
    whole = prompt_rate / requests
    return whole * (1 - hit), whole


def prefill_price(physics: StepModel, chunk: int, prompt: float | None) -> float:
    """Seconds per prompt token in prefill passes of `chunk` tokens: each pass's weight reads,
    GEMMs and launch overhead shared by its tokens, and each token's attention over the prompt
    before it. A chunk of a long prompt attends to the chunks before it, so the mean context is
    half the prompt whatever the chunk (`prompt`; without it, a fresh sequence of the chunk's
    length): a smaller chunk saves no attention, it only pays the pass more often."""
    context = prompt / 2 if prompt and prompt > 0 else chunk / 2
    attention = physics.model.attention_flops(chunk, context)
    return physics.prefill_seconds(chunk, attention) / chunk


def ttft_change(
    inp: RuleInput,
    obs: Observed,
    batch: float,
    ratio: float,
    slots: bool = False,
    prefill_scale: float = 1.0,
) -> float | None:
    """TTFT p99's relative change when the batch moves to `batch` and tokens/s by `ratio`, from
    the queue fitted on the window (`queueing.fit_queue`): the same arrivals, served at the new
    capacity; UNBOUNDED where open arrivals outrun it; `slots`: the batch capped by slots
    (`Queue.slot_wait`); `prefill_scale`: a request's own prefill then takes that many times
    today's. Without TTFT p99 or a rate, where requests wait: the change of the wait itself (a
    closed loop's population over the new rate). None where neither can be read."""
    queue = fit_queue(inp.view, obs.ranks, obs.batch, obs.queue)
    if queue is not None:
        slots = slots and slot_bound(obs.usage, obs.batch, batch)
        paced = obs.usage < _BINDING_USAGE
        return max(-1.0, queue.ttft_change(batch, ratio, slots, paced, prefill_scale))
    if obs.queue <= 0 or ratio <= 0:
        return None
    return max(-1.0, max(0.0, obs.batch + obs.queue - batch) / ratio / obs.queue - 1)


def slot_bound(usage: float, batch: float, capped: float) -> bool:
    """Whether a batch capped from `batch` to `capped` per rank is held by its slots, not by
    the pool: the pool it then fills (token usage x capped / batch) below where the pool binds
    admission (`_BINDING_USAGE`). A cap the pool still binds keeps today's bunched admission."""
    return capped < batch and usage * capped / max(batch, 1e-9) < _BINDING_USAGE


def objective_gain(
    inp: RuleInput, obs: Observed, batch: float, ratio: float, slots: bool = False
) -> float:
    """Throughput gain offline; online, the fall of TTFT p99 (`ttft_change`), a growth without
    bound counted as doubling."""
    if objective(inp.profile) == THROUGHPUT:
        return ratio - 1
    change = ttft_change(inp, obs, batch, ratio, slots)
    return 0.0 if change is None else max(-1.0, -change)


def wait_for_a_slot(
    inp: RuleInput, ranks: int, batch: float, capped: float, ratio: float
) -> float | None:
    """TTFT p99's relative change when a rank's batch is capped from `batch` to `capped` and
    tokens/s moves by `ratio`, from the queue fitted on the window. None without the request
    rate or TTFT p99, when the batch does not shrink, or when the queue would grow without
    bound (no figure to give)."""
    if capped >= batch or ratio <= 0:
        return None
    waiting = (inp.view.quantile(NUM_QUEUE_REQS, 0.5) or 0.0) / max(1, ranks)
    queue = fit_queue(inp.view, max(1, ranks), batch, waiting)
    if queue is None:
        return None
    usage = inp.view.mean(TOKEN_USAGE) or 0.0
    slots = slot_bound(usage, batch, capped)
    change = queue.ttft_change(capped, ratio, slots, paced=usage < _BINDING_USAGE)
    return None if change == UNBOUNDED else change


def usage_in(obs: Observed, new_pool: float) -> float:
    """Token usage a binding pool of `new_pool` tokens reaches: the room SGLang reserves for
    the running requests' outputs stays the same share, while the part of the pool no
    request fits in (half a request's KV on average) shrinks with the pool's size."""
    if not obs.pool or obs.usage <= 0:
        return obs.usage
    unfit = min(1 - obs.usage, 0.5 * obs.kv_per_request / obs.pool)
    reserved = max(0.0, 1 - obs.usage - unfit)
    return 1 - reserved - unfit * obs.pool / new_pool


def admitted(obs: Observed, cap: int | None, wanted: float) -> float:
    """The batch admission reaches: what the pool allows, capped by what waits and the flag."""
    batch = min(wanted, obs.batch + obs.queue)
    return min(batch, cap) if cap else batch


def _batch_at_usage(inp: RuleInput, obs: Observed, target_usage: float) -> float:
    """The per-rank batch once admission fills the pool to `target_usage` (the KV per request
    as observed), within the server's running cap."""
    wanted = obs.batch * target_usage / obs.usage
    return admitted(obs, max_running_per_rank(inp.config), wanted)


def pool_binds(inp: RuleInput, obs: Observed) -> str:
    """Why the KV pool binds the batch ('' when it does not: then a larger pool sits empty)."""
    cap = max_running_per_rank(inp.config)
    if obs.queue <= 0:
        return ""
    if cap and obs.batch >= 0.95 * cap:
        return ""
    if obs.usage < _BINDING_USAGE and not obs.retracting:
        return ""
    return (
        f"the KV pool binds the batch at {obs.batch:.0f} per rank with {obs.queue:.0f} waiting "
        f"(token usage p50 {obs.usage:.2f})"
    )


def _smaller_pool_binds(obs: Observed, pool: float, new_pool: float) -> tuple[float, str] | None:
    """(batch, why) where a cut pool would hold less than the running requests use today at the
    usage from which admission binds (None: it still holds them, or the pool grows): the
    batch shrinks with it and the rest wait."""
    used = obs.usage * pool
    room = _BINDING_USAGE * new_pool
    if new_pool >= pool or obs.usage <= 0 or obs.batch <= 0 or used <= room:
        return None
    batch = obs.batch * room / used
    return batch, (
        f"the pool {pool:,.0f} -> {new_pool:,.0f} tokens holds less than the {used:,.0f} in use "
        f"today (token usage p50 {obs.usage:.2f}): the batch falls to {batch:.0f} per rank"
    )


def predict_pool_change(inp: RuleInput, new_fraction: float) -> Prediction:
    """--mem-fraction-static current -> new: the pool grows (or shrinks) by the freed memory;
    where the pool binds the batch while requests wait, the batch follows it."""
    config = inp.config
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(inp.profile, model)
    current = config.mem_fraction_static if config else None
    if current is None or model.physics is None or not model.obs.pool:
        return no_prediction(
            inp.profile,
            "the pool's growth needs the current --mem-fraction-static, the KV pool size and a "
            "recognised model and GPU (model_path, gpu_model)",
        )
    obs, physics, pool = model.obs, model.physics, model.obs.pool
    pools = [
        physics_pool_tokens(physics.gpu, physics.model, physics.deployment, f)
        for f in (current, new_fraction)
    ]
    new_pool = pool + pools[1] - pools[0]
    binds = pool_binds(inp, obs)
    if not binds:
        smaller = _smaller_pool_binds(obs, pool, new_pool)
        if smaller is not None:
            return _ranged(inp, model, *smaller)
        why = f"the KV pool does not bind the batch (queue p50 {obs.queue:.0f} per rank, "
        why += f"token usage p50 {obs.usage:.2f}): a larger pool would sit empty"
        return _unchanged(inp, why)
    wanted = obs.batch * usage_in(obs, new_pool) / obs.usage * new_pool / pool
    batch = admitted(obs, max_running_per_rank(config), wanted)
    why = f"{binds}; pool {pool:,.0f} -> {new_pool:,.0f} tokens, batch -> {batch:.0f}"
    return _ranged(inp, model, batch, why, freed=batch < wanted)


def predict_admission(inp: RuleInput, target_usage: float) -> Prediction:
    """Lower conservativeness: admission fills the pool to `target_usage` while requests wait."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(inp.profile, model)
    obs = model.obs
    if obs.queue <= 0 or obs.usage <= 0 or obs.usage >= target_usage:
        why = f"nothing to admit (queue p50 {obs.queue:.0f}, token usage p50 {obs.usage:.2f})"
        return _unchanged(inp, why)
    batch = _batch_at_usage(inp, obs, target_usage)
    why = (
        f"token usage p50 {obs.usage:.2f} -> {target_usage:g} with {obs.queue:.0f} waiting: "
        f"batch {obs.batch:.0f} -> {batch:.0f} per rank"
    )
    return _ranged(inp, model, batch, why)


def predict_chunk_change(inp: RuleInput, new_chunk: int) -> Prediction:
    """--chunked-prefill-size current -> new at today's batch: each prefill pass reads the
    weights and pays its launch overhead once, so the prefill a decode step carries costs, per
    token, the physics' pass over `new_chunk` tokens against one over today's, each token
    attending to the window's prompt before it either way (`prefill_price`). SGLang runs every
    chunk of an admitted prompt before the next decode step (`get_next_batch_to_run` forms a
    prefill batch while a chunked request is open), so a stall is the whole prompt's prefill
    whatever the chunk, priced anew: ITL p50 moves by the median stall it holds
    (`ServerModel.median_stall`; the decode step itself does not move), ITL p99 by today's
    stall beyond ITL p50; TTFT p99 follows the new capacity (`ttft_change`). Needs ITL p50 to
    split the observed step into decode and prefill."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(inp.profile, model)
    current = inp.config.chunked_prefill_size if inp.config else None
    if model.physics is None or not current or current <= 0 or not model.split_by_itl:
        return no_prediction(
            inp.profile,
            "the prefill's price per token needs today's --chunked-prefill-size, a recognised "
            "model and GPU, and ITL p50 to split the step into decode and prefill",
        )
    physics, obs = model.physics, model.obs
    prefill = model.prefill_per_step(obs.batch)
    if prefill <= 0:
        return _unchanged(inp, "the window's steps carry no prefill: a new chunk changes none")
    prompt = prompt_tokens(inp)
    per_token = [
        prefill_price(physics, c, prompt[1] if prompt else None) for c in (current, new_chunk)
    ]
    price = per_token[1] / per_token[0]
    now = model.step(obs.batch)
    after = now - prefill + prefill * price
    ratio = now / after
    gain = objective_gain(inp, obs, obs.batch, ratio)
    median = model.median_stall(obs.batch)
    itl = median * (price - 1) / obs.itl if obs.itl and median > 0 else 0.0
    effects = {THROUGHPUT: _spread(ratio - 1), ITL: _spread(itl)}
    p99 = itl_p99(inp)
    if p99 and obs.itl and p99 >= obs.itl:
        then = obs.itl * (1 + itl) + (p99 - obs.itl) * price
        effects[ITL_P99] = _spread(then / p99 - 1)
    ttft = ttft_change(inp, obs, obs.batch, ratio, prefill_scale=price)
    if ttft is not None and ttft != UNBOUNDED:
        effects[TTFT] = _spread(ttft)
    target, gain = falls_most(inp, effects, gain)
    why = (
        f"prefill {per_token[0] * 1e6:.0f} -> {per_token[1] * 1e6:.0f} us per token in passes "
        f"of {current} -> {new_chunk} tokens, {prefill / now:.0%} of today's step"
        + (f", {median / obs.itl:.0%} of ITL p50" if obs.itl and median > 0 else "")
        + f"; {model.basis}"
    )
    spread = max(FLOOR, SPREAD * abs(gain))
    prediction = Prediction(target, gain, gain - spread, gain + spread, why, effects)
    return queue_bound(prediction, inp, obs, obs.batch, ratio)


def predict_graphs(
    inp: RuleInput, new_max_bs: int, uncovered: float, pool_fraction: float | None = None
) -> Prediction:
    """CUDA graphs up to `new_max_bs`: the uncovered share of steps loses its eager launch cost
    (~11.5 launches per layer at 12.5 us of host time each, gpu-physics.md); a companion
    --mem-fraction-static cut shrinks a binding pool. Every objective: tokens/s by the steps
    saved; ITL p50 by one step's launches where the median token's step ran eager (most steps
    uncovered), calibrated as the observed ITL is; ITL p99 by its stall (`itl_tail`); TTFT p99
    by the queue at the new rate (`ttft_change`). Online the objective is whichever latency
    falls more: graphs shorten every token's step, and TTFT moves only where requests queue."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(THROUGHPUT, model)
    if model.physics is None:
        return no_prediction(
            THROUGHPUT,
            "an eager step's launch cost needs a recognised model and GPU (model_path, gpu_model)",
        )
    obs = model.obs
    b = obs.batch
    eager, graph = model.decode(b, cuda_graph=False), model.decode(b, cuda_graph=True)
    covered = 1.0 if new_max_bs >= b else 0.5  # half the steps, roughly, still above the size
    saved = max(0.0, eager - graph) * model.scale() * uncovered * covered
    ratio = obs.step / max(obs.step - saved, 1e-9)
    why = (
        f"{uncovered:.0%} of decode steps run eager at batch ~{b:.0f}: "
        f"{(eager - graph) * 1e3:.1f} ms of launches per step ({obs.step * 1e3:.1f} ms observed)"
    )
    if pool_fraction is not None:
        pool = predict_pool_change(inp, pool_fraction)
        if pool.gain is not None and pool.gain < 0:
            ratio *= 1 + pool.gain
            why += f"; the companion memory cut: {pool.gain:+.0%}"
    effects = {THROUGHPUT: _spread(ratio - 1)}
    itl_scale = model.itl_scale()
    if obs.itl and itl_scale is not None:
        median_eager = uncovered >= MEDIAN
        itl = -max(0.0, eager - graph) * itl_scale * covered / obs.itl if median_eager else 0.0
        effects[ITL] = _spread(max(-0.9, itl))
        tail = itl_tail(inp, model, b, effects[ITL][0])
        if tail is not None:
            effects[ITL_P99] = _spread(tail)
    ttft = ttft_change(inp, obs, b, ratio)
    if ttft is not None and ttft != UNBOUNDED:
        effects[TTFT] = _spread(ttft)
    target, gain = falls_most(inp, effects, ratio - 1)
    spread = max(FLOOR, SPREAD * abs(gain))
    return Prediction(target, gain, gain - spread, gain + spread, f"{why}; {model.basis}", effects)


def falls_most(
    inp: RuleInput, effects: Mapping[str, tuple[float, float, float]], gain: float
) -> tuple[str, float]:
    """(objective, gain) of a change that shortens every step: offline tokens/s (`gain`);
    online whichever latency falls more, TTFT p99 or ITL p50 (TTFT moves only where requests
    queue or their own prefill gets faster; ITL wherever the step does)."""
    if objective(inp.profile) != TTFT:
        return objective(inp.profile), gain
    falls = {o: -effects[o][0] for o in (TTFT, ITL) if o in effects}
    if not falls:
        return TTFT, gain
    target = max(falls, key=lambda o: falls[o])
    return target, falls[target]


def predict_itl_cap(
    itl_now: float,
    itl_then: float,
    basis: str,
    tokens: float | None = None,
    ttft: float | None = None,
) -> Prediction:
    """--max-running-requests lowered for latency: ITL p50 from now to then; `tokens` and
    `ttft` the relative changes of tokens/s and TTFT p99 where they are known."""
    if itl_now <= 0 or itl_then <= 0 or math.isnan(itl_then):
        return Prediction(ITL, None, basis="ITL was not observed")
    gain = 1 - itl_then / itl_now
    spread = max(FLOOR, SPREAD * abs(gain))
    effects = {ITL: _spread(itl_then / itl_now - 1)}
    if tokens is not None:
        effects[THROUGHPUT] = _spread(tokens)
    if ttft is not None:
        effects[TTFT] = _spread(ttft)
    return Prediction(ITL, gain, gain - spread, gain + spread, basis, effects)


def predict_cap_raise(inp: RuleInput, new_cap: int) -> Prediction:
    """--max-running-requests raised: the batch grows into the new cap, as far as requests
    wait and the pool has room (token usage up to 0.9)."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(inp.profile, model)
    obs = model.obs
    room = obs.batch * 0.9 / obs.usage if obs.usage > 0 else obs.batch
    batch = admitted(obs, new_cap, max(obs.batch, room))
    why = f"batch {obs.batch:.0f} -> {batch:.0f} per rank ({obs.queue:.0f} waiting)"
    return _ranged(inp, model, batch, why)


def latency_cap(inp: RuleInput, target: float) -> tuple[int, Prediction] | str:
    """The largest per-rank batch below today's whose ITL p50 meets `target`, and what the cap
    does: ITL p50 (the objective) from the physics' decode step calibrated on the observed ITL,
    tokens/s from the step model. Or why it cannot be sized this way: where ITL p50 is mostly
    the prefill its median step waits for (`ServerModel.stall_evident`), a cap gains ITL p50 by
    holding prompts in the queue, and TTFT p99's cost was measured past its 50 % guard where
    the queue model said +10 to +48 % (the closed-loop matrix, docs/performance.md)."""
    model = server_model(inp)
    if isinstance(model, str):
        return model
    if model.itl_scale() is None:
        return "the physics' decode step needs ITL p50 and a recognised model and GPU"
    obs = model.obs
    top = max(1, math.floor(obs.batch) - 1)

    def itl_at(batch: float) -> float:  # a cap the slots hold admits one per departure
        slotted = capped_itl(model, batch)
        return model.itl(batch) if slotted is None else slotted

    if itl_at(1) > target:
        return (
            f"no batch meets {target * 1e3:.0f} ms on this server: one request alone takes "
            f"{itl_at(1) * 1e3:.0f} ms a step (the weights' read)"
        )
    if model.stall_evident and obs.itl:
        decode = model.decode(obs.batch)
        return (
            f"{STALL_BOUND}: {(obs.itl - decode) * 1e3:.0f} of its {obs.itl * 1e3:.0f} ms is "
            f"the prefill the median step waits for, the decode step {decode * 1e3:.0f} ms; a "
            "cap moves that wait into the queue, and TTFT pays it by more than the queue "
            "model can bound"
        )
    low, high = 1, top  # itl(low) <= target; find the largest such batch
    if itl_at(high) <= target:
        low = high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if itl_at(mid) <= target else (low, mid)
    batch, now = low, obs.itl
    assert now is not None
    then = itl_at(batch)
    gain = 1 - then / now
    spread = max(FLOOR, SPREAD * abs(gain))
    ratio = model.throughput_ratio(batch)
    effects = batch_effects(inp, model, batch, ratio, slots=True)  # ITL p50 there is `then`
    tail = effects[ITL_P99][0] if ITL_P99 in effects else None
    why = (
        f"ITL p50 {now * 1e3:.0f} -> {then * 1e3:.0f} ms at {batch} per rank (batch p50 "
        f"{obs.batch:.0f}){_tail_text(inp, tail)}; decode tokens/s {ratio - 1:+.0%} while the "
        f"load stays, queue wait longer; {model.basis}"
    )
    prediction = Prediction(ITL, gain, gain - spread, gain + spread, why, effects)
    return batch, queue_bound(prediction, inp, obs, batch, ratio)


def itl_p99(inp: RuleInput) -> float | None:
    """ITL p99 over the window: its histogram, else the intervals pooled by their tokens
    (`queueing.window_p99`)."""
    return window_p99(inp.view, (ITL_P50_SECONDS, ITL_P99_SECONDS), GEN_THROUGHPUT)


def _tail_text(inp: RuleInput, tail: float | None) -> str:
    p99 = itl_p99(inp)
    if tail is None or not p99:
        return ""
    return f", ITL p99 {p99 * 1e3:.0f} -> {p99 * (1 + tail) * 1e3:.0f} ms"


def predict_data_parallel(inp: RuleInput, replicas: int) -> Prediction:
    """tp N -> N tp-1 replicas: each replica holds the whole weights (a smaller KV pool per GPU
    than tp's share, the physics says how much) and runs its own batch without the per-layer
    all-reduce; the work the server has now (running + waiting) is split over the replicas.
    The decode step's calibration on this server carries over to the replicas."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(THROUGHPUT, model)
    config, physics, obs = inp.config, model.physics, model.obs
    fraction = config.mem_fraction_static if config else None
    if physics is None or fraction is None or not obs.pool:
        return no_prediction(
            THROUGHPUT,
            "the replicas' step and pool need a recognised model and GPU (model_path, "
            "gpu_model), the KV pool size and --mem-fraction-static",
        )
    one = Deployment(
        kv_dtype_bytes=physics.deployment.kv_dtype_bytes,
        weight_bytes_per_param=physics.deployment.weight_bytes_per_param,
    )
    try:
        single = StepModel(physics.gpu, physics.model, one)
        pool_ratio = physics_pool_tokens(physics.gpu, physics.model, one, fraction) / max(
            1, physics_pool_tokens(physics.gpu, physics.model, physics.deployment, fraction)
        )
    except (ValueError, KeyError, ZeroDivisionError) as exc:
        return no_prediction(THROUGHPUT, f"the model does not fit one GPU in the physics ({exc})")
    if pool_ratio <= 0:
        return no_prediction(THROUGHPUT, "the weights leave no KV pool on one GPU")
    wanted = (obs.batch + obs.queue) / replicas
    binds = pool_binds(inp, obs)
    # the same KV per request in a replica's pool, filled to today's usage where the pool binds
    # or runs past the level from which it binds admission (a replica whose pool is smaller
    # than its share binds there), else as far as the requests go
    full = binds or obs.usage >= _BINDING_USAGE
    room = obs.batch * pool_ratio if full else wanted
    batch = max(1.0, min(wanted, room))
    cap = max_running_per_rank(config)
    batch = min(batch, cap) if cap else batch
    b = max(1, round(batch))
    kv = b * obs.kv_per_request
    k = model.scale()
    decode = k * single.decode_seconds(b, kv, cuda_graph=model.uses_graph(b))
    one_gpu = prefill_price(single, PRICED_CHUNK, obs.prompt)
    prefill = b * obs.prefill_per_output * one_gpu
    if model.split_by_itl:  # the observed prefill share, scaled by the per-GPU compute
        tp_prefill = prefill_price(physics, PRICED_CHUNK, obs.prompt)
        prefill = model.prefill_per_step(b) * one_gpu / tp_prefill
    after = replicas * b / (decode + prefill)
    now = obs.batch / obs.step
    gain = after / now - 1
    spread = max(FLOOR, SPREAD * abs(gain))
    slow = one_gpu / max(prefill_price(physics, PRICED_CHUNK, obs.prompt), 1e-12)
    itl_scale, itl_then = model.itl_scale(), None
    if itl_scale is not None:  # the ITL calibration carries over as the step's does
        replica_step = single.decode_seconds(b, kv, cuda_graph=model.uses_graph(b))
        itl_then = itl_scale * replica_step + slow * model.median_stall(b)
    effects, unbounded = replica_effects(inp, model, replicas, b, gain, itl_then, slow)
    why = (
        f"{replicas} replicas at a batch of {b} each (now {obs.batch:.0f} on tp {replicas}, "
        f"{obs.queue:.0f} waiting); one GPU's pool is {pool_ratio:.0%} of this server's"
        f"{' (it binds the batch)' if full and room < wanted else ''}; a prompt's prefill on "
        f"one GPU takes {slow:.1f}x its time on {replicas}; {model.basis}"
    )
    return Prediction(
        THROUGHPUT, gain, gain - spread, gain + spread, why, effects, unbounded=unbounded
    )


def replica_effects(
    inp: RuleInput,
    model: ServerModel,
    replicas: int,
    batch: int,
    gain: float,
    itl_then: float | None,
    slow: float,
) -> tuple[dict[str, tuple[float, float, float]], tuple[str, ...]]:
    """Every objective of `replicas` data-parallel replicas that each run `batch` where one rank
    runs today's batch, tokens/s moving by `gain` and each prompt's prefill taking `slow` times
    today's (one GPU's compute, not the tp group's): ITL p50 to `itl_then` (the replica's
    decode step and median stall; None: not predicted); ITL p99 as that plus today's stall
    grown by the replica's admissions (`itl_p99_change`) and by `slow`; TTFT p99 from the
    queue fitted on the window, split evenly over the replicas (each takes 1/replicas of the
    arrivals and clients, `Queue.ttft_change`), its prefill `slow` times as long. The second
    value names the objectives that grow without bound (open arrivals past the capacity)."""
    obs = model.obs
    effects = {THROUGHPUT: _spread(gain)}
    if itl_then is not None and obs.itl:
        itl = itl_then / obs.itl - 1
        effects[ITL] = _spread(itl)
        p50, p99 = obs.itl, itl_p99(inp)
        if p99 and p99 >= p50:
            admitted, cost = admitted_per_step(inp, obs), stall_cost(inp, model.physics)
            grown = itl_p99_change(p50, p99, 0.0, batch / obs.batch, admitted, cost)
            stall = max(0.0, p99 * (1 + grown) - p50)  # the stall at the replica's admissions
            effects[ITL_P99] = _spread((itl_then + slow * stall) / p99 - 1)
    queue = fit_queue(inp.view, obs.ranks, obs.batch, obs.queue)
    if queue is None:
        return effects, ()
    split = replace(
        queue,
        arrivals=queue.arrivals / replicas,
        batch=queue.batch / replicas,
        waiting=queue.waiting / replicas,
    )
    ttft = split.ttft_change(batch, 1 + gain, paced=obs.usage < _BINDING_USAGE, prefill_scale=slow)
    if ttft == UNBOUNDED:
        return effects, (TTFT,)
    effects[TTFT] = _spread(max(-1.0, ttft))
    return effects, ()


def predict_fewer_overcommits(
    inp: RuleInput, target_usage: float, current: float | None, default: float
) -> Prediction:
    """--schedule-conservativeness raised on a retracting server: SGLang's new-token ratio
    decays to 0.14 x its start (min(0.7 x conservativeness, 1)); from a low value admission
    overcommits, each retraction frees more than the next steps need, and the pool runs below
    full while it refills. From the guide's 1.3 the floor is 4x higher than from 0.3: the pool
    stays near `target_usage`, the batch with it (the KV per request as observed). From
    SGLang's `default` (1.0, taken where `current` is unknown) or above, the floor rises by
    the ratio of the two values only (1.3x: 0.098 -> 0.127), and after each retraction
    `retract_decode` sets the ratio from the kept batch whatever the flag: admission, and the
    batch with it, stay as they are."""
    model = server_model(inp)
    if isinstance(model, str):
        return no_prediction(inp.profile, model)
    obs = model.obs
    if current is None or current >= default:
        start = f"{default:g} (SGLang's default, assumed)" if current is None else f"{current:g}"
        why = (
            f"from {start} the new-token ratio's floor rises by a third at most and each "
            "retraction resets the ratio from the kept batch: admission, token usage and the "
            f"batch ({obs.batch:.0f} per rank) stay as they are"
        )
        return _unchanged(inp, why)
    if obs.usage <= 0 or obs.usage >= target_usage:
        why = (
            f"token usage p50 {obs.usage:.2f} already at {target_usage:g}: the retractions "
            "cost their recomputation only, which a steadier admission does not give back"
        )
        return _unchanged(inp, why)
    batch = _batch_at_usage(inp, obs, target_usage)
    why = (
        f"retracting at token usage p50 {obs.usage:.2f}: a steadier admission keeps the pool "
        f"near {target_usage:g}, batch {obs.batch:.0f} -> {batch:.0f} per rank"
    )
    return _ranged(inp, model, batch, why)
