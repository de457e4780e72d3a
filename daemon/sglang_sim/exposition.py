"""The /metrics page of a simulated server, in the exact shape of one SGLang version."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from .catalogue import STREAMING_LABELLED, STREAMING_SINCE, Family, Version, families_for
from .model import ServerModel
from .scheduler import Rank
from .stats import Histogram

Pairs = list[tuple[str, str]]
PREFILL_MODES_SINCE: Version = (0, 5, 10)
# RadixCacheMetricsCollector's labels: `cache_type` only up to 0.5.20, so the multiprocess
# registry sums every scheduler process into one series; rank labels from 0.5.21
# (`radix_cache_metric_labels`: dp_rank 0 unless attention is data-parallel).
CACHE_RANK_LABELS_SINCE: Version = (0, 5, 21)
BASE_PID = 4100


def go_float(value: float) -> str:
    """Format like prometheus_client's floatToGoString."""
    value = float(value)
    if value.is_integer() and -1e6 < value < 1e6:
        return f"{int(value)}.0"  # the common case, without repr()
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def label_text(pairs: Pairs) -> str:
    """Render label pairs sorted by name, as the multiprocess exposition does."""
    return ",".join(f'{k}="{v}"' for k, v in sorted(pairs))


class Page:
    """Builds one scrape's text for one server."""

    def __init__(self, model: ServerModel) -> None:
        self.model = model
        self.version = model.version
        self.lines: list[str] = []
        self.model_name = model.config.llm.path

    def render(self) -> str:
        """The whole page."""
        for family in families_for(self.version):
            samples = list(self._samples(family))
            if not samples:
                continue  # a labelled metric never touched emits nothing, not even HELP
            name = f"sglang:{family.name}"
            if family.kind == "counter":  # the 0.0.4 format re-adds _total to HELP and TYPE
                name = f"sglang:{family.name.removesuffix('_total')}_total"
            help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
            self.lines.append(f"# HELP {name} {help_text}")
            self.lines.append(f"# TYPE {name} {family.kind}")
            self.lines.extend(samples)
        return "\n".join(self.lines) + "\n"

    # -- label sets -----------------------------------------------------------------------
    def _sched_pairs(self, index: int, tp_rank: int = 0) -> Pairs:
        pairs = [
            ("engine_type", "unified"),
            ("model_name", self.model_name),
            ("pp_rank", "0"),
            ("tp_rank", str(tp_rank)),
        ]
        if self.version >= (0, 5, 7):
            pairs.append(("moe_ep_rank", "0"))
        if self.model.config.knobs.dp_size > 1:
            pairs.append(("dp_rank", str(index)))
        return pairs

    def _tok_pairs(self) -> Pairs:
        pairs = [("model_name", self.model_name)]
        if self.version >= (0, 5, 11):
            pairs.append(("engine_type", "unified"))
        return pairs

    # -- samples --------------------------------------------------------------------------
    def _samples(self, family: Family) -> Iterator[str]:
        name = f"sglang:{family.name.removesuffix('_total')}"
        scope = family.scope
        if scope in ("sched", "pid", "tp"):
            for index, rank in enumerate(self.model.ranks):
                yield from self._rank_samples(family, name, index, rank)
        elif scope == "cache":
            yield from self._cache_samples(family, name)
        elif scope == "tok":
            yield from self._tok_samples(family, name)
        else:
            yield from self._process_samples(family, name)

    def _rank_samples(self, family: Family, name: str, index: int, rank: Rank) -> Iterator[str]:
        pairs = self._sched_pairs(index)
        if family.kind == "histogram":
            for extra, hist in sorted(rank.stats.hists.get(family.name, {}).items()):
                yield from histogram_lines(
                    name, pairs + list(zip(family.extra, extra, strict=True)), hist, family
                )
        elif family.kind == "counter":
            series = rank.stats.counters.get(family.name, {})
            tp_ranks = range(self.model.config.knobs.tp_size) if family.scope == "tp" else [0]
            for extra, value in sorted(series.items()):
                if extra[:1] == ("prefill_none",) and self.version < PREFILL_MODES_SINCE:
                    continue
                for tp in tp_ranks:
                    labels = self._sched_pairs(index, tp) + list(
                        zip(family.extra, extra, strict=True)
                    )
                    yield f"{name}_total{{{label_text(labels)}}} {go_float(value)}"
        elif family.scope == "pid":
            pid = BASE_PID + 7 * self.model.boots + index
            value = rank.gauges.get(family.name, 0.0)
            yield f"{name}{{{label_text(pairs + [('pid', str(pid))])}}} {go_float(value)}"
        else:
            yield from self._gauge_samples(family, name, pairs, rank)

    def _gauge_samples(self, family: Family, name: str, pairs: Pairs, rank: Rank) -> Iterator[str]:
        plan = self.model.plan
        constants = {
            "max_total_num_tokens": plan.max_total_num_tokens,
            "num_pages": plan.max_total_num_tokens,
            "weight_memory_usage_gb": plan.weight_gb,
            "kv_cache_memory_usage_gb": plan.kv_cache_gb,
            "page_size": 1,
            "context_len": self.model.config.llm.context_len,
            "startup_available_gpu_memory_gb": round(plan.available_gb, 2),
        }
        if family.name == "graph_memory_usage_gb":
            yield f"{name}{{{label_text(pairs + [('phase', 'decode')])}}} {go_float(plan.graph_gb)}"
            return
        value = constants.get(family.name, rank.gauges.get(family.name, 0.0))
        yield f"{name}{{{label_text(pairs)}}} {go_float(value)}"

    def _cache_samples(self, family: Family, name: str) -> Iterator[str]:
        """A radix-cache counter: every TP rank's tree evicts what its DP rank's does; series
        with equal labels are summed, as the multiprocess registry does."""
        knobs = self.model.config.knobs
        ranked = self.version >= CACHE_RANK_LABELS_SINCE
        attention_dp = knobs.enable_dp_attention
        tp_ranks = knobs.tp_size // knobs.dp_size if attention_dp else knobs.tp_size
        series: dict[str, float] = {}
        for index, rank in enumerate(self.model.ranks):
            value = rank.stats.counters.get(family.name, {}).get(())
            if value is None:
                continue
            dp = str(index) if attention_dp else "0"
            for tp in range(tp_ranks):
                pairs = [("cache_type", "RadixCache")]
                if ranked:
                    pairs += [("dp_rank", dp), ("pp_rank", "0"), ("tp_rank", str(tp))]
                key = label_text(pairs)
                series[key] = series.get(key, 0.0) + value
        for labels, total in sorted(series.items()):
            yield f"{name}_total{{{labels}}} {go_float(total)}"

    def _tok_samples(self, family: Family, name: str) -> Iterator[str]:
        streaming = family.name in STREAMING_LABELLED and self.version >= STREAMING_SINCE
        extra_names = ("is_streaming",) if streaming else family.extra
        store = self.model.tok.hists if family.kind == "histogram" else self.model.tok.counters
        series = merge(store.get(family.name, {}), streaming or bool(family.extra))
        for extra, item in sorted(series.items()):
            pairs = self._tok_pairs() + list(zip(extra_names, extra, strict=False))
            if isinstance(item, Histogram):
                yield from histogram_lines(name, pairs, item, family)
            else:
                yield f"{name}_total{{{label_text(pairs)}}} {go_float(item)}"

    def _process_samples(self, family: Family, name: str) -> Iterator[str]:
        if family.scope == "plain":
            yield f"{name} 0.0"
        elif family.scope == "info":
            tokens = str(self.model.plan.max_total_num_tokens)
            yield f'{name}{{num_pages="{tokens}",page_size="1"}} 1.0'
        elif family.scope == "component":
            up = max(self.model.now - self.model.booted_at, 0.0)
            for component, share in (("detokenizer", 0.012), ("tokenizer", 0.05)):
                yield f'{name}_total{{component="{component}"}} {go_float(round(up * share, 2))}'
        else:
            yield from self._http_samples(family, name)

    def _http_samples(self, family: Family, name: str) -> Iterator[str]:
        http = self.model.http
        key = family.name.removesuffix("_total")
        if family.kind == "gauge":
            for (endpoint, method), _ in sorted(http.counters.get("http_requests", {}).items()):
                active = 1.0 if endpoint == "/metrics" else 0.0
                yield (
                    f"{name}{{{label_text([('endpoint', endpoint), ('method', method)])}}} "
                    f"{go_float(active)}"
                )
            return
        for extra, value in sorted(http.counters.get(key, {}).items()):
            pairs = list(zip(family.extra, extra, strict=True))
            yield f"{name}_total{{{label_text(pairs)}}} {go_float(value)}"


Series = dict[tuple[str, ...], Any]


def merge(series: Series, keep_labels: bool) -> Series:
    """Sum series over the is_streaming split when the version has no such label."""
    if keep_labels or len(series) <= 1 and all(k == () for k in series):
        return series
    merged: Series = {}
    for item in series.values():
        if isinstance(item, Histogram):
            target = merged.setdefault((), Histogram(item.bounds))
            target.counts = [a + b for a, b in zip(target.counts, item.counts, strict=True)]
            target.total += item.total
            target.count += item.count
        else:
            merged[()] = merged.get((), 0.0) + item
    return merged


@lru_cache(maxsize=64)
def _le_values(bounds: tuple[float, ...]) -> tuple[str, ...]:
    return tuple(go_float(float(b)) for b in bounds)


def histogram_lines(name: str, pairs: Pairs, hist: Histogram, family: Family) -> Iterator[str]:
    """_sum first, then cumulative _bucket lines and _count, as the multiprocess collector does."""
    ordered = sorted(pairs)
    plain = label_text(ordered)
    head = ",".join(f'{k}="{v}"' for k, v in ordered if k < "le")
    tail = ",".join(f'{k}="{v}"' for k, v in ordered if k > "le")
    head, tail = (head + "," if head else ""), ("," + tail if tail else "")
    yield f"{name}_sum{{{plain}}} {go_float(hist.total)}"
    counts = hist.cumulative(family.buckets)
    for le, count in zip(_le_values(family.buckets), counts, strict=True):
        yield f'{name}_bucket{{{head}le="{le}"{tail}}} {go_float(count)}'
    yield f'{name}_bucket{{{head}le="+Inf"{tail}}} {go_float(hist.count)}'
    yield f"{name}_count{{{plain}}} {go_float(hist.count)}"


def render_metrics(model: ServerModel) -> str:
    """The /metrics body for this server at its current simulated time."""
    return Page(model).render()
