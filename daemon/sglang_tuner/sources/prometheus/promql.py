"""The signal map as PromQL: one instant query per canonical signal, each answering for the
whole fleet at once (never one query per server).

The expressions are derived from `sglang.py`'s own tables (gauges, counter rates, latency
histograms with their per-version names, the retraction fallbacks), so a signal added to the
map reaches the Prometheus source too. They aggregate the way `SignalMapper` does: summed over
non-rank labels, max over TP/PP/EP ranks, then DP ranks combined as `model/signals.py` says;
counters become `rate()` and latency quantiles `histogram_quantile()` over bucket rates.
Both spellings, `sglang:` and `sglang_`, are read; a range function takes each spelling
apart (with the colon one winning) because Prometheus refuses two series
that differ only in their name.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sglang_tuner.model import signals as s
from sglang_tuner.sources.sglang_names import (
    _CACHED_TOKENS,
    _CUDA_GRAPH_PASSES,
    _GAUGES,
    _HISTOGRAMS,
    _RANK_LABELS,
    _RATES,
    _RETRACTED_COUNTER,
    _RETRACTED_CUMULATIVE,
    _RETRACTED_INTERVAL,
    _ratios,
)

# Parts that are not signals themselves: inputs of derived signals and of target health.
CACHED_TOKENS_RATE = "cached_tokens_rate"
CUDA_GRAPH_PASSES_RATE = "cuda_graph_passes_rate"  # split by `mode`
COUNTER_RESETS = "counter_resets"  # resets over the rate window; a rise is a restart
UP = "up"  # targets Prometheus fails to scrape (up == 0), to say why their series are missing
_DECODE_MODES = ("decode_cuda_graph", "decode_none")
_AGGREGATIONS = {"sum": "sum", "max": "max", "min": "min", "mean": "avg"}
_SIGNALS = frozenset(s.ALL_SIGNALS)
# The latency quantile queries: by far the dearest (every bucket series of a family per step).
LATENCY_QUERIES = frozenset(name for pair in _HISTOGRAMS for name in pair)


@dataclass(frozen=True, slots=True)
class FleetQuery:
    """One instant query of a round; its answer has one series per target (per `split_by`)."""

    name: str
    expr: str
    split_by: str | None = None


def duration(seconds: float) -> str:
    """A PromQL duration: whole seconds as `60s`, anything finer in milliseconds."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


class PromQL:
    """Expression builder for one configuration (target labels, extra matchers, rate window)."""

    def __init__(self, target_labels: Sequence[str], selector: str, window_seconds: float) -> None:
        self.group = ", ".join(target_labels)
        self.selector = selector
        self._extra = f", {selector}" if selector else ""
        self.window = duration(window_seconds)
        self.window_seconds = window_seconds

    def series(self, family: str, matchers: str = "") -> str:
        """An instant selector for both spellings of an SGLang family."""
        return f'{{__name__=~"sglang[:_]{family}"{matchers}{self._extra}}}'

    def ranged(self, func: str, family: str, matchers: str = "") -> str:
        """`func(...[window])` over each spelling; the colon spelling wins for a label set."""
        colon, underscore = (
            f'{func}({{__name__="{name}"{matchers}{self._extra}}}[{self.window}])'
            for name in (f"sglang:{family}", f"sglang_{family}")
        )
        return f"({colon} or {underscore})"

    def per_dp(self, inner: str, split_by: str = "") -> str:
        """Per DP rank: summed over non-rank labels, then the max over TP/PP/EP ranks."""
        extra = f", {split_by}" if split_by else ""
        ranks = ", ".join(_RANK_LABELS)
        by_rank = f"sum by ({self.group}, {ranks}{extra}) ({inner})"
        return f"max by ({self.group}, dp_rank{extra}) ({by_rank})"

    def counter_rate(self, family: str, matchers: str = "", split_by: str = "") -> str:
        """A counter's per-second rate, DP ranks summed."""
        extra = f", {split_by}" if split_by else ""
        inner = self.per_dp(self.ranged("rate", family, matchers), split_by)
        return f"sum by ({self.group}{extra}) ({inner})"

    def quantile(self, q: float, families: Sequence[str]) -> str:
        """A latency quantile from bucket rates; the first family with series wins."""
        return " or ".join(
            f"histogram_quantile({q}, sum by ({self.group}, le) "
            f"({self.ranged('rate', family + '_bucket')}))"
            for family in families
        )


def build_queries(promql: PromQL) -> tuple[FleetQuery, ...]:
    """Every query of a round, in a fixed order."""
    g = promql.group
    queries = [
        FleetQuery(sig, f"{_AGGREGATIONS[how]} by ({g}) ({promql.per_dp(_gauge(promql, fam))})")
        for sig, (fam, how) in _GAUGES.items()
    ]
    running = _gauge(promql, _GAUGES[s.NUM_RUNNING_REQS][0])
    queries.append(FleetQuery(s.NUM_DP_RANKS, f"count by ({g}) ({promql.per_dp(running)})"))
    queries += [FleetQuery(sig, promql.counter_rate(fam)) for sig, fam in _RATES.items()]
    queries.append(FleetQuery(CACHED_TOKENS_RATE, promql.counter_rate(_CACHED_TOKENS)))
    modes = f', mode=~"{"|".join(_DECODE_MODES)}"'
    graph = promql.counter_rate(_CUDA_GRAPH_PASSES, modes, "mode")
    queries.append(FleetQuery(CUDA_GRAPH_PASSES_RATE, graph, "mode"))
    queries.append(FleetQuery(s.RETRACTIONS_PER_MINUTE, _retractions(promql)))
    for (p50, p99), families in _HISTOGRAMS.items():
        queries.append(FleetQuery(p50, promql.quantile(0.5, families)))
        queries.append(FleetQuery(p99, promql.quantile(0.99, families)))
    queries.append(FleetQuery(s.TTFT_MEAN_SECONDS, _ttft_mean(promql)))
    queries.append(FleetQuery(COUNTER_RESETS, _resets(promql)))
    queries.append(FleetQuery(UP, f"max by ({g}) (up{{{promql.selector}}}) == 0"))
    return tuple(queries)


def _gauge(promql: PromQL, family: str) -> str:
    """A scheduler gauge's all-priorities series (no `priority` label, or an empty one)."""
    return promql.series(family, ', priority=""')


def _retractions(promql: PromQL) -> str:
    """Retractions per minute, with the map's fallbacks in its order: the counter (>= v0.5.7);
    0 on a server that has CUDA-graph counters but never retracted (no counter series yet);
    the cumulative gauge (v0.4.9.post3 - v0.5.3); the per-log-interval gauge summed over the
    window (v0.5.2 - v0.5.6, a lower bound like the direct scrape's)."""
    g = promql.group
    counter = f"60 * {promql.counter_rate(_RETRACTED_COUNTER)}"
    zero = f"0 * count by ({g}) ({promql.series(_CUDA_GRAPH_PASSES)})"
    cumulative = f"60 * {promql.counter_rate(_RETRACTED_CUMULATIVE)}"
    summed = promql.per_dp(promql.ranged("sum_over_time", _RETRACTED_INTERVAL))
    interval = f"60 / {promql.window_seconds:g} * sum by ({g}) ({summed})"
    return " or ".join((counter, zero, cumulative, interval))


def _ttft_mean(promql: PromQL) -> str:
    """The mean TTFT of the requests the window finished: the _sum's rate over the _count's."""
    g = promql.group
    total, count = (
        f"sum by ({g}) ({promql.ranged('rate', 'time_to_first_token_seconds' + x)})"
        for x in ("_sum", "_count")
    )
    return f"{total} / {count}"


def _resets(promql: PromQL) -> str:
    """Counter resets of the request and token counters over the window, summed per target."""
    g = promql.group
    per_family = [
        f'label_replace(sum by ({g}) ({promql.ranged("resets", fam)}), "counter", "{fam}", "", "")'
        for fam in _RATES.values()
    ]
    return f"sum by ({g}) ({' or '.join(per_family)})"


def part_name(query: FleetQuery, split_value: str | None) -> str:
    """Where one answer series goes in a target's parts: the query name, plus the split."""
    return query.name if split_value is None else f"{query.name}:{split_value}"


def signals_from(parts: Mapping[str, float]) -> dict[str, float]:
    """One target's canonical signals from its answers (part name -> value), derived ones as
    `SignalMapper` derives them. Missing and NaN answers (no requests finished) stay absent."""
    values = {k: v for k, v in parts.items() if k in _SIGNALS and math.isfinite(v)}
    increases = {fam: parts[sig] for sig, fam in _RATES.items() if sig in parts}
    cached = parts.get(CACHED_TOKENS_RATE)
    if cached is None and "prompt_tokens_total" in increases:
        cached = 0.0  # no cached-token series while prompts were counted: no hit yet
    if cached is not None:
        increases[_CACHED_TOKENS] = cached
    for mode in _DECODE_MODES:
        rate = parts.get(f"{CUDA_GRAPH_PASSES_RATE}:{mode}")
        if rate is not None:
            increases[mode] = rate
    values |= _ratios(increases)  # ratios of rates are ratios of increases over one window
    return values
