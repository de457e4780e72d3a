"""The one signal-mapping module: SGLang's metric names, per version, onto canonical signals.

Aggregation over ranks (reference §4): a series set is one scheduler, keyed by `dp_rank`; within a
DP rank we take the max over `tp_rank` (retraction counters are written on every TP rank with
identical counts, and `--enable-metrics-for-all-schedulers` repeats gauges per TP rank), summing
over any other label (`pid`, `is_streaming`, `cache_source`, custom labels). Then DP ranks are
summed, averaged or maxed as `model/signals.py` says. Counters become rates with reset detection.
The names read, per version, are in `sglang_names.py`.
"""

import math
import re
from collections.abc import Callable, Iterable

from sglang_tuner.model import signals as s
from sglang_tuner.model.scrape import ScrapeLimits
from sglang_tuner.model.window_histogram import PREFIX_OF, bucket_signals
from sglang_tuner.sources.exposition import RawSamples, scan_exposition
from sglang_tuner.sources.exposition_labels import LabelCache
from sglang_tuner.sources.histograms import (
    Buckets,
    Packed,
    deltas,
    from_dict,
    from_text,
    pack,
    quantile_of,
)
from sglang_tuner.sources.sglang_names import (
    _CACHED_TOKENS,
    _CUDA_GRAPH_PASSES,
    _GAUGES,
    _HISTOGRAM_FAMILIES,
    _HISTOGRAMS,
    _RANK_LABELS,
    _RATES,
    _RETRACTED_COUNTER,
    _RETRACTED_CUMULATIVE,
    _RETRACTED_INTERVAL,
    _SAMPLE_NAMES,
    _TTFT_SUM,
    _ratios,
)

_TTFT_FAMILY = "time_to_first_token_seconds"

_LE_RE = re.compile(rb',le="([^"]*)"')  # starts with a literal: a fast search
_STRICT_LE_RE = re.compile(rb'(?:^|,)\s*le="([^"]*)"')
_USED_LABELS = frozenset((*_RANK_LABELS, "le", "priority", "mode"))  # all the mapper reads

_COMBINE: dict[str, Callable[[list[float]], float]] = {
    "sum": sum,
    "max": max,
    "min": min,
    "mean": lambda values: sum(values) / len(values),
}


_NO_SGLANG = "no samples on this page (a just-started SGLang emits none before its first log point)"
_OWN_EXPORTER = (
    "this page is sglang-tuner's own /metrics, not an SGLang server: point the target at the "
    "SGLang server's port"
)
_OWN_PREFIX = b"sglang_tuner_"
# The name of each sample line (comments and blank lines never match), for a page that gave the
# mapper nothing: read only then, so an SGLang page costs nothing more.
_SAMPLE_NAME_RE = re.compile(rb"^[ \t]*([a-zA-Z_:][a-zA-Z0-9_:]*)", re.MULTILINE)
_FAMILIES_SHOWN = 4


class NoSglangMetricsError(ValueError):
    """The page parsed but carried no SGLang sample; `reason` says what it was instead:
    `no_sglang_metrics` (no sample at all), `not_sglang` (another exporter's samples) or
    `own_exporter` (sglang-tuner's own /metrics)."""

    def __init__(self, message: str, reason: str = "no_sglang_metrics") -> None:
        super().__init__(message)
        self.reason = reason


class SignalMapper:
    """Per-target state: parses a page, maps it to signals, and turns counters into rates."""

    def __init__(self) -> None:
        self._labels = LabelCache(keep=_USED_LABELS, key=_RANK_LABELS)
        self._prev_ts: float | None = None
        self._prev: dict[str, float] = {}  # cumulative totals of the previous scrape
        self._prev_buckets: dict[str, Packed] = {}  # each histogram's previous buckets
        self.duplicates = 0  # samples the last page repeated (the first of each was read)
        # quantile signal -> the bucket bounds it was read from (one shared tuple per layout):
        # how finely the page can tell a latency at all
        self.resolution: dict[str, tuple[float, ...]] = {}

    @property
    def label_cache_bytes(self) -> int:
        """Roughly what the cache of parsed label strings holds now."""
        return self._labels.size_bytes

    def update(
        self, body: bytes | str, ts: float, limits: ScrapeLimits | None = None
    ) -> dict[str, float]:
        """Parse one `/metrics` body scraped at `ts`; ValueError if it is not exposition text
        (LimitExceededError, a ValueError, past one of `limits`)."""
        raw = body.encode() if isinstance(body, str) else body
        page = scan_exposition(raw, _SAMPLE_NAMES, limits=limits, histograms=_HISTOGRAM_FAMILIES)
        self.duplicates = page.duplicates
        if not page.samples and not page.buckets and (error := _not_sglang(raw)) is not None:
            raise error  # nothing read: whose page is it? (an SGLang page never gets here)
        samples = page.samples
        values = self._gauges(samples)
        totals = self._totals(samples)
        buckets = {fam: from_text(les, counts) for fam, (les, counts) in page.buckets.items()}
        for family in _HISTOGRAM_FAMILIES - buckets.keys():
            if read := self._buckets(samples, family):  # lines read one by one
                buckets[family] = from_dict(read)
        dt = None if self._prev_ts is None else ts - self._prev_ts
        if dt is not None and dt > 0:
            values |= self._rates(totals, buckets, dt)
            values |= self._interval_retractions(samples, dt, totals)
        self._prev_ts, self._prev = ts, totals
        self._prev_buckets = {family: pack(b) for family, b in buckets.items()}
        return values

    def _by_rank(
        self,
        series: Iterable[tuple[bytes, float]],
        keep: Callable[[dict[str, str]], bool] | None = None,
    ) -> dict[str, float]:
        """dp_rank -> value: summed over non-rank labels, then max over the TP/PP/EP ranks."""
        per_rank: dict[tuple[str, ...], float] = {}
        entry = self._labels.entry
        for raw, value in series:
            labels, key = entry(raw)  # key: the values of _RANK_LABELS
            if keep is None or keep(labels):
                per_rank[key] = per_rank.get(key, 0.0) + value
        per_dp: dict[str, float] = {}
        for (dp, *_), value in per_rank.items():
            per_dp[dp] = max(per_dp.get(dp, value), value)
        return per_dp

    def _gauges(self, samples: RawSamples) -> dict[str, float]:
        """Scheduler gauges combined over DP ranks; priority-split series are skipped."""
        values: dict[str, float] = {}
        for signal, (family, how) in _GAUGES.items():
            per_dp = self._by_rank(samples.get(family, ()), _is_total_priority)
            if per_dp:
                values[signal] = _COMBINE[how](list(per_dp.values()))
                if family == "num_running_reqs":
                    values[s.NUM_DP_RANKS] = float(len(per_dp))
        return values

    def _total(
        self, samples: RawSamples, family: str, label: str = "", want: str = ""
    ) -> float | None:
        """A counter's total over all series (optionally only where label == value)."""
        keep = (lambda labels: labels.get(label) == want) if label else None
        per_dp = self._by_rank(samples.get(family, ()), keep)
        return sum(per_dp.values()) if per_dp else None

    def _totals(self, samples: RawSamples) -> dict[str, float]:
        """Every cumulative value whose rate we want, keyed by family (and mode)."""
        totals: dict[str, float | None] = {f: self._total(samples, f) for f in _RATES.values()}
        # per request SGLang reports either the per-source breakdown or the legacy "total"
        # (disjoint), so all `cache_source` series are summed. Labelled series appear only once
        # incremented: no cached-token series while prompts were counted means no hit yet.
        cached = self._total(samples, _CACHED_TOKENS)
        if cached is None and totals["prompt_tokens_total"] is not None:
            cached = 0.0
        totals[_CACHED_TOKENS] = cached
        for mode in ("decode_cuda_graph", "decode_none"):
            totals[mode] = self._total(samples, _CUDA_GRAPH_PASSES, "mode", mode)
        retracted = self._total(samples, _RETRACTED_COUNTER)
        if retracted is None and _CUDA_GRAPH_PASSES in samples:
            retracted = 0.0  # >= v0.5.7 server whose counter was never incremented (no series yet)
        if retracted is None:
            retracted = self._total(samples, _RETRACTED_CUMULATIVE)
        totals["retracted"] = retracted
        totals[_TTFT_SUM] = self._total(samples, _TTFT_SUM)
        return {key: value for key, value in totals.items() if value is not None}

    def _buckets(self, samples: RawSamples, family: str) -> dict[float, float]:
        """le -> cumulative count, summed over every non-`le` label, from bucket lines read one
        by one (the parser sums plainly written runs itself: `bucket_runs.py`)."""
        rows = samples.get(family + "_bucket", ())
        counts: dict[bytes, float] = {}
        for le, (_, value) in zip(_bucket_bounds([raw for raw, _ in rows]), rows, strict=True):
            counts[le] = counts.get(le, 0.0) + value
        return {float(le): count for le, count in counts.items()}

    def _rates(
        self, totals: dict[str, float], buckets: dict[str, Buckets], dt: float
    ) -> dict[str, float]:
        """Counter increases over `dt` turned into signals; a decrease means a restart."""
        inc: dict[str, float] = {}
        reset = False
        for key, value in totals.items():
            before = self._prev.get(key, 0.0)  # a series born since the last scrape started at 0
            reset |= value < before
            inc[key] = value if value < before else value - before
        reset |= any(key not in totals for key in self._prev)
        if reset:
            # A new process (a restart, an upgrade, another server at this address): what its
            # counters hold accumulated since it started, over a time nobody knows. Prometheus's
            # rate() reads it all as this interval's increase; the rates start again from the
            # next scrape.
            return {s.RESTARTS: 1.0}
        values = {sig: inc[fam] / dt for sig, fam in _RATES.items() if fam in inc}
        values[s.RESTARTS] = 0.0
        if "retracted" in inc:
            values[s.RETRACTIONS_PER_MINUTE] = inc["retracted"] * 60.0 / dt
        values |= _ratios(inc)
        values |= self._quantiles(buckets)
        values |= self._ttft_mean(inc.get(_TTFT_SUM), buckets)
        return values

    def _ttft_mean(self, total: float | None, buckets: dict[str, Buckets]) -> dict[str, float]:
        """The interval's mean TTFT: the _sum's increase over the count's (the +Inf bucket's)."""
        now, before = buckets.get(_TTFT_FAMILY), self._prev_buckets.get(_TTFT_FAMILY)
        if total is None or now is None or before is None or not now[1] or not before[1]:
            return {}
        if now[0][-1] != math.inf or before[0][-1] != math.inf:
            return {}
        count = now[1][-1] - before[1][-1]
        return {s.TTFT_MEAN_SECONDS: total / count} if count > 0 and total >= 0 else {}

    def _quantiles(self, buckets: dict[str, Buckets]) -> dict[str, float]:
        """p50/p99 of each latency histogram from the bucket increases over the interval."""
        values: dict[str, float] = {}
        for (p50, p99), names in _HISTOGRAMS.items():
            family = next((n for n in names if n in buckets), None)
            if family is None:
                continue
            before = self._prev_buckets.get(family)
            delta = deltas(before, buckets[family])
            for signal, q in ((p50, 0.5), (p99, 0.99)):
                estimate = quantile_of(q, delta)
                if estimate is not None:
                    values[signal] = estimate
                    if self.resolution.get(signal) is not delta[0]:
                        self.resolution[signal] = delta[0]
            prefix = PREFIX_OF.get(p99)
            if prefix is not None and before is not None and p99 in values:
                values |= bucket_signals(prefix, *delta)  # the window's histogram, carried
        return values

    def _interval_retractions(
        self, samples: RawSamples, dt: float, totals: dict[str, float]
    ) -> dict[str, float]:
        """v0.5.2-v0.5.6: the per-log-interval gauge, as a lower-bound rate over the interval.

        The gauge holds only the retractions since SGLang's last log point, so a scrape misses
        events of earlier log intervals (sgl-project/sglang#10672): the rate is a lower bound.
        """
        if "retracted" in totals:
            return {}
        per_dp = self._by_rank(samples.get(_RETRACTED_INTERVAL, ()))
        if not per_dp:
            return {}
        return {s.RETRACTIONS_PER_MINUTE: sum(per_dp.values()) * 60.0 / dt}


def _not_sglang(body: bytes) -> NoSglangMetricsError | None:
    """Why a page that gave the mapper nothing is not SGLang's (None: it is, with nothing read
    yet). Only such pages are read again, so this costs a normal scrape nothing."""
    groups: dict[bytes, int] = {}  # a family group (`node_*`, `vllm:*`) -> its samples
    sglang = own = False
    for name in _SAMPLE_NAME_RE.findall(body):
        if name.startswith(_OWN_PREFIX):
            own = True
        elif name.startswith((b"sglang:", b"sglang_")):
            sglang = True
            break
        else:
            group = _family_group(name)
            groups[group] = groups.get(group, 0) + 1
    if sglang:
        return None
    if own:
        return NoSglangMetricsError(_OWN_EXPORTER, "own_exporter")
    if not groups:
        return NoSglangMetricsError(_NO_SGLANG)
    ranked = sorted(groups, key=lambda g: (-groups[g], g))
    found = ", ".join(g.decode() for g in ranked[:_FAMILIES_SHOWN])
    if len(ranked) > _FAMILIES_SHOWN:
        found += f" and {len(ranked) - _FAMILIES_SHOWN} more"
    message = f"no SGLang metric families on this page (found {found}): not an SGLang server?"
    return NoSglangMetricsError(message, "not_sglang")


def _family_group(name: bytes) -> bytes:
    """`node_cpu_seconds_total` -> `node_*`, `vllm:num_requests` -> `vllm:*`, `up` -> `up`."""
    for sep in (b":", b"_"):
        head, found, _ = name.partition(sep)
        if found and head:
            return head[:40] + sep + b"*"
    return name[:40]


def _bucket_bounds(raws: list[bytes]) -> list[bytes]:
    """The `le` text of each bucket label set, in order ("NaN" where it has none).

    Bucket label sets are most of a page's distinct ones: caching them would cost ~50 KiB per
    target, so `le` is found afresh, by one search over them all. When that finds one per set
    only by chance (a set without `le` and a value holding `,le="`), the result is as wrong as
    the page; otherwise each set is searched on its own.
    """
    bounds: list[bytes] = _LE_RE.findall(b"," + b",".join(raws))
    if len(bounds) == len(raws):
        return bounds
    matches = [_STRICT_LE_RE.search(raw) for raw in raws]
    return [b"NaN" if match is None else match.group(1) for match in matches]


def _is_total_priority(labels: dict[str, str]) -> bool:
    """Keep the all-priorities series (no `priority` label, or `priority=""`)."""
    return not labels.get("priority")
