"""Verdicts: did a change of tuning flags help? The same metrics before and after, compared.

Pure functions. A window is summarized per signal (samples, mean, p50/p90/p99) with the load
it served; two summaries give one verdict per metric: `helped`, `no_change`, `hurt` or
`inconclusive`, with the effect (after/before ratio of means) and a 90 % interval from a
moving-block bootstrap (`changes/bootstrap.py`: blocks of consecutive scrapes keep their
correlation; a fixed seed makes it repeatable).

Every change is judged on every objective, whatever the profile: tokens/s, TTFT p99, ITL p50
and p99, crashes. The asking rule's metrics (or the profile's) decide whether it helped; a
measured cost on another objective past its guard (tokens/s down 10 %, TTFT p99 up 50 %, ITL p50
up 25 %) makes it `hurt` — or `traded`, where its advice stated that cost in advance.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sglang_tuner.changes.bootstrap import METHOD, rank, ratio_interval
from sglang_tuner.model import signals as s
from sglang_tuner.model.advice import COST_GUARDS, ITL_P50, ITL_P99, TOKENS, TTFT_P99
from sglang_tuner.model.window import WindowView

# metric -> +1 when higher is better, -1 when lower is better. Both profiles measure every
# objective; they differ in the order shown and in what decides (PRIMARY).
OFFLINE_METRICS = {
    s.GEN_THROUGHPUT: 1,
    s.TOKEN_USAGE: 1,
    s.RETRACTIONS_PER_MINUTE: -1,
    s.RESTARTS: -1,  # crashes: what a fix for one is judged by
    s.TTFT_P99_SECONDS: -1,
    s.ITL_P50_SECONDS: -1,
    s.ITL_P99_SECONDS: -1,
}
ONLINE_METRICS = {
    s.TTFT_P50_SECONDS: -1,
    s.TTFT_P99_SECONDS: -1,
    s.ITL_P50_SECONDS: -1,
    s.ITL_P99_SECONDS: -1,
    s.GEN_THROUGHPUT: 1,
    s.RESTARTS: -1,
}
# The objectives a side effect is held to, by the metric that measures each.
OBJECTIVE_METRICS = {
    TOKENS: s.GEN_THROUGHPUT,
    TTFT_P99: s.TTFT_P99_SECONDS,
    ITL_P50: s.ITL_P50_SECONDS,
    ITL_P99: s.ITL_P99_SECONDS,
}
# The verdict on the change as a whole follows these; the others are shown beside them (more
# retractions at higher throughput is a better offline server, not a worse one).
PRIMARY = {"offline": (s.GEN_THROUGHPUT,), "online": (s.TTFT_P99_SECONDS, s.ITL_P99_SECONDS)}
LOAD_SIGNALS = (s.REQUEST_RATE, s.PROMPT_TOKENS_MEAN, s.NUM_RUNNING_REQS, s.NUM_QUEUE_REQS)
HELPED, NO_CHANGE, HURT, INCONCLUSIVE = "helped", "no_change", "hurt", "inconclusive"
TRADED = "traded"  # helped on what it was for, at a cost its advice stated in advance
VERDICTS = (HELPED, TRADED, NO_CHANGE, HURT, INCONCLUSIVE)


def metrics_for(profile: str) -> Mapping[str, int]:
    """The metrics a profile is judged on, each with the direction that is better."""
    return ONLINE_METRICS if profile == "online" else OFFLINE_METRICS


def primary_for(profile: str) -> tuple[str, ...]:
    """The metrics that decide a profile's verdict on a change as a whole."""
    return PRIMARY["online" if profile == "online" else "offline"]


@dataclass(frozen=True, slots=True)
class SignalSummary:
    """One signal over a window."""

    samples: int
    mean: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """A window: its span, per-signal summaries, and the raw values verdicts resample."""

    start: float
    end: float
    signals: Mapping[str, SignalSummary]
    values: Mapping[str, tuple[float, ...]]

    @property
    def seconds(self) -> float:
        """Time between the first and the last sample."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class MetricVerdict:
    """One metric before and after a change."""

    metric: str
    verdict: str
    effect_ratio: float | None  # after / before (means); None when either is missing or zero
    low: float | None  # the interval of the ratio
    high: float | None
    before: float | None  # means
    after: float | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The change as a whole, its metrics, how they were compared, and the metrics that
    decided it (`judged_on`: the asking rule's or the profile's primary ones; empty in
    verdicts stored before they were kept)."""

    verdict: str
    reason: str
    metrics: tuple[MetricVerdict, ...]
    method: str = METHOD
    judged_on: tuple[str, ...] = ()


# Measured from the generation-token counter where the server has it: SGLang's gen_throughput
# gauge is the rate since its last decode log line, and the last such rate at each scrape is a
# biased sample of the true rate (+14 % at 1,024 running requests in our GPU model).
MEASURED_FROM = {s.GEN_THROUGHPUT: s.GENERATION_TOKENS_RATE}


def summarize(view: WindowView, names: Sequence[str]) -> WindowSummary:
    """Per-signal summaries of the view for `names` (absent signals are left out)."""
    summaries, values = {}, {}
    for name in names:
        source = MEASURED_FROM.get(name)
        vals = (view.values(source) if source else []) or view.values(name)
        if vals:
            ordered = sorted(vals)
            summaries[name] = SignalSummary(
                len(vals), sum(vals) / len(vals), *(rank(ordered, q) for q in (0.5, 0.9, 0.99))
            )
            values[name] = tuple(vals)
    start, end = (view.ts[0], view.ts[-1]) if view.ts else (0.0, 0.0)
    return WindowSummary(start, end, summaries, values)


def compare(
    before: WindowSummary,
    after: WindowSummary,
    profile: str,
    *,
    min_samples: int = 6,
    no_change_ratio: float = 0.03,
    load_tolerance: float = 0.25,
    primary: Sequence[str] = (),
    stated: Sequence[str] = (),
    resolution: Mapping[str, Sequence[float]] | None = None,
) -> Verdict:
    """The verdict on a change from the window before it and the warm window after it, decided
    by `primary` (the asking rule's metrics) or else the profile's, then held to every other
    objective (`stated`: the objectives whose cost its advice said in advance). `resolution`:
    the histogram bounds a latency quantile is read from; a change they cannot tell apart from
    none is no measurement (see `_beyond_resolution`)."""
    metrics = tuple(
        _metric(m, better, before, after, min_samples, no_change_ratio)
        for m, better in metrics_for(profile).items()
    )
    metrics, blurred = _held_to_resolution(metrics, resolution or {}, no_change_ratio)
    judged = tuple(m for m in primary if m in metrics_for(profile)) or primary_for(profile)
    load = load_changed(before, after, load_tolerance)
    if load:
        return Verdict(INCONCLUSIVE, load, metrics, judged_on=judged)
    verdict = _with_costs(_overall(metrics, judged), judged, stated, resolution or {})
    if blurred:
        verdict = replace(verdict, reason=f"{verdict.reason}; {blurred}")
    return replace(verdict, judged_on=judged)


def _held_to_resolution(
    metrics: tuple["MetricVerdict", ...], resolution: Mapping[str, Sequence[float]], band: float
) -> tuple[tuple["MetricVerdict", ...], str]:
    """The metrics with every helped / hurt a latency histogram cannot resolve made
    inconclusive, and a line saying which ('' when none)."""
    out, blurred = [], []
    for m in metrics:
        bounds = resolution.get(m.metric)
        if (
            bounds and m.verdict in (HELPED, HURT) and m.before and m.after
            and not _beyond_resolution(m.before, m.after, bounds, band)
        ):  # fmt: skip
            edges = sorted({*_bucket(m.before, bounds), *_bucket(m.after, bounds)})
            change = m.after / m.before - 1
            blurred.append(f"{m.metric} {change:+.0%} (bounds {', '.join(map(_edge, edges))})")
            out.append(replace(m, verdict=INCONCLUSIVE))
        else:
            out.append(m)
    if not blurred:
        return metrics, ""
    return tuple(out), (
        "within the histogram's resolution, not a measurement: " + ", ".join(blurred)
    )


def _beyond_resolution(before: float, after: float, bounds: Sequence[float], band: float) -> bool:
    """Whether the histogram itself shows the change past the no-change band: the least change
    its buckets allow (the after value's bucket edge nearest the before value's far edge) is
    past the band. A rise inside one bucket, or to the next, is interpolation only: SGLang's
    TTFT buckets double (100, 200, 400 s), and a p99 of a few requests jumps between them."""
    b_low, b_high = _bucket(before, bounds)
    a_low, a_high = _bucket(after, bounds)
    if after > before:
        return b_high > 0 and a_low / b_high > 1 + band
    return b_low > 0 and a_high / b_low < 1 - band


def _edge(bound: float) -> str:
    return "+Inf" if bound == float("inf") else f"{bound:g}"


def _bucket(value: float, bounds: Sequence[float]) -> tuple[float, float]:
    """(lower, upper] of the bucket holding `value` (the lowest starts at 0; past the last
    finite bound the upper is +Inf)."""
    lower = 0.0
    for le in sorted(b for b in bounds if b == b):
        if value <= le:
            return lower, le
        lower = le
    return lower, float("inf")


def _with_costs(
    verdict: Verdict,
    primary: Sequence[str],
    stated: Sequence[str],
    resolution: Mapping[str, Sequence[float]] | None = None,
) -> Verdict:
    """A verdict held to the objectives it was not judged on: a measured cost past the guard
    makes it `hurt`, or `traded` where the advice stated that cost and the change helped. A
    cost stated in advance beside a gain the windows cannot tell (`inconclusive`) leaves it
    `inconclusive`: the trade was the one announced, and whether it bought anything is not
    measured; undoing it on that noise would give back a gain that may be there (a revert of
    an offline pool raise gives back its tokens/s). A stated cost for no change is `hurt`."""
    costs = _costs(verdict.metrics, primary, resolution or {})
    if not costs or verdict.verdict == HURT:
        return verdict
    unstated = [(o, m) for o, m in costs if o not in stated]
    said = "; ".join(f"{o} {_effect_text(m)}" for o, m in costs)
    if not unstated and verdict.verdict == INCONCLUSIVE:
        return replace(
            verdict, reason=f"{verdict.reason}; at the cost stated in advance: {said}, for a gain "
            "not measured"
        )  # fmt: skip
    if unstated or verdict.verdict != HELPED:
        why = "" if not unstated else " (not stated in advance)"
        return replace(verdict, verdict=HURT, reason=f"{verdict.reason}; cost: {said}{why}")
    return replace(verdict, verdict=TRADED, reason=f"{verdict.reason}; at the stated cost: {said}")


def _costs(
    metrics: Sequence["MetricVerdict"],
    primary: Sequence[str],
    resolution: Mapping[str, Sequence[float]] | None = None,
) -> list[tuple[str, "MetricVerdict"]]:
    """(objective, metric) for each objective outside `primary` measured worse past its guard.
    A latency read from a histogram is held to the least rise its buckets show (`_least_rise`):
    a cost only interpolation puts past the guard is not measured past it."""
    by_name = {m.metric: m for m in metrics}
    out = []
    for objective, name in OBJECTIVE_METRICS.items():
        m = by_name.get(name)
        if name in primary or m is None or m.verdict != HURT or m.effect_ratio is None:
            continue
        change = m.effect_ratio - 1
        worse = -change if objective == TOKENS else change
        bounds = (resolution or {}).get(name)
        if bounds and objective != TOKENS and m.before and m.after:
            worse = min(worse, _least_rise(m.before, m.after, bounds))
        if worse > COST_GUARDS[objective]:
            out.append((objective, m))
    return out


def _least_rise(before: float, after: float, bounds: Sequence[float]) -> float:
    """The least relative rise from `before` to `after` the histogram's buckets show: from the
    before value's bucket's upper edge to the after value's bucket's lower edge (SGLang's TTFT
    p99 read 55.6 s -> 99.8 s, +80 %, lies in 40-60 s and 80-100 s: at least +33 %)."""
    b_high = _bucket(before, bounds)[1]
    a_low = _bucket(after, bounds)[0]
    if b_high <= 0 or b_high == float("inf"):
        return after / before - 1
    return max(0.0, a_low / b_high - 1)


def _effect_text(m: "MetricVerdict") -> str:
    assert m.effect_ratio is not None
    return f"{m.effect_ratio - 1:+.0%}"


def _overall(metrics: tuple[MetricVerdict, ...], primary: Sequence[str]) -> Verdict:
    """On the primary metrics: hurt if one got worse; helped if one got better and none worse;
    no change if all stayed in the band; else inconclusive. The others are named beside."""
    main = [m for m in metrics if m.metric in primary]
    if all(m.verdict == INCONCLUSIVE for m in main):
        return Verdict(INCONCLUSIVE, f"too few samples or too much noise in {_names(main)}"
                       + _also(metrics, primary), metrics)  # fmt: skip
    worse = [m for m in main if m.verdict == HURT]
    better = [m for m in main if m.verdict == HELPED]
    if worse:
        return Verdict(HURT, f"worse: {_names(worse)}{_also(metrics, primary)}", metrics)
    if better and len(better) + sum(m.verdict == NO_CHANGE for m in main) == len(main):
        return Verdict(HELPED, f"better: {_names(better)}{_also(metrics, primary)}", metrics)
    if all(m.verdict == NO_CHANGE for m in main):
        return Verdict(NO_CHANGE, f"{_names(main)} within the no-change band"
                       + _also(metrics, primary), metrics)  # fmt: skip
    return Verdict(INCONCLUSIVE, f"the intervals of {_names(main)} are too wide to say"
                   + _also(metrics, primary), metrics)  # fmt: skip


def _names(metrics: Sequence[MetricVerdict]) -> str:
    return ", ".join(m.metric for m in metrics)


def _also(metrics: Sequence[MetricVerdict], primary: Sequence[str]) -> str:
    """'; also better: token_usage; worse: retractions_per_minute' for the other metrics."""
    parts = [
        f"{label}: {_names(found)}"
        for label, verdict in (("better", HELPED), ("worse", HURT))
        if (found := [m for m in metrics if m.metric not in primary and m.verdict == verdict])
    ]
    return f"; also {'; '.join(parts)}" if parts else ""


def load_changed(before: WindowSummary, after: WindowSummary, tolerance: float) -> str:
    """Why the two windows served different load ('' when comparable).

    A saturated server (requests waiting) is loaded by its clients' concurrency: running plus
    waiting requests; one that keeps up is loaded by its request rate. Prompt length is compared
    either way. The served rate of a saturated server follows its speed, so it is no load measure.
    """
    # Saturated before or after: a faster server drains the queue of the same clients.
    saturated = any(_mean(w, s.NUM_QUEUE_REQS) > 0.5 for w in (before, after))
    demand = [_sum_means(w, (s.NUM_RUNNING_REQS, s.NUM_QUEUE_REQS)) for w in (before, after)]
    rate = [_mean(w, s.REQUEST_RATE) for w in (before, after)]
    checks = [("prompt length", [_mean(w, s.PROMPT_TOKENS_MEAN) for w in (before, after)])]
    checks.append(("running + waiting requests", demand) if saturated else ("request rate", rate))
    for what, (old, new) in checks:
        if old > 0 and new > 0 and abs(new / old - 1) > tolerance:
            return f"the load changed: {what} {old:.3g} -> {new:.3g} ({new / old - 1:+.0%})"
    return ""


def _mean(w: WindowSummary, name: str) -> float:
    found = w.signals.get(name)
    return found.mean if found else 0.0


def _sum_means(w: WindowSummary, names: Sequence[str]) -> float:
    return sum(_mean(w, n) for n in names)


def _metric(
    name: str,
    better: int,
    before: WindowSummary,
    after: WindowSummary,
    min_samples: int,
    band: float,
) -> MetricVerdict:
    old, new = before.values.get(name, ()), after.values.get(name, ())
    if len(old) < min_samples or len(new) < min_samples:
        return MetricVerdict(name, INCONCLUSIVE, None, None, None, _avg(old), _avg(new))
    ratio, low, high = ratio_interval(old, new)
    if ratio is None or low is None or high is None:  # a mean of zero: compare differences
        verdict = NO_CHANGE if _avg(old) == _avg(new) else (HELPED if (
            (_avg(new) or 0) - (_avg(old) or 0)) * better > 0 else HURT)  # fmt: skip
        return MetricVerdict(name, verdict, None, None, None, _avg(old), _avg(new))
    return MetricVerdict(
        name, _classify(ratio, low, high, better, band), ratio, low, high, _avg(old), _avg(new)
    )


def _classify(ratio: float, low: float, high: float, better: int, band: float) -> str:
    """no_change when the whole interval is inside the band; helped / hurt when the interval
    excludes no effect and the effect itself is past the band (significant and large enough to
    matter); inconclusive otherwise."""
    if 1 - band <= low and high <= 1 + band:
        return NO_CHANGE
    up, down = low > 1 and ratio > 1 + band, high < 1 and ratio < 1 - band
    if up or down:
        return HELPED if (1 if up else -1) == better else HURT
    return INCONCLUSIVE


def _avg(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
