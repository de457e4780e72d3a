"""A latency histogram over a whole window: each scrape interval's bucket increases carried as
signals, summed over the window's samples and read as Prometheus reads
`histogram_quantile(q, sum(increase(..._bucket[window])))`.

Each interval's p50 and p99 (`model/signals.py`) cannot give a window's p99: a latency that is
bimodal (ITL: a decode step, or a step that waited for a prefill) has intervals whose p99 is a
multi-second stall that a tenth of a percent of their tokens saw, and any rule for pooling
quantiles reads that as a tail falling from the interval's p50. On the simulator's
`online_batch_too_large`, a 300 s window's ITL p99 pooled from its intervals was 1.92 s, its
histogram's 0.20 s (`bench/window_p99.py`).

The carried form is sparse: an interval's count in each bucket `(lower, le]` that counted
anything, under `<prefix><le>` (`ttft_bucket:0.4`), and the bucket just below each of them at
0, so that the window knows every counted bucket's lower bound. A sample that lacks a bucket's
signal counted nothing in it. Pure: no I/O, no clock.
"""

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from sglang_tuner.model.signals import (
    ITL_P50_SECONDS,
    ITL_P99_SECONDS,
    TTFT_P50_SECONDS,
    TTFT_P99_SECONDS,
)

if TYPE_CHECKING:  # the window imports this module (which of its columns rules read)
    from sglang_tuner.model.window import WindowView

TTFT_BUCKETS: Final = "ttft_bucket:"
ITL_BUCKETS: Final = "itl_bucket:"
BUCKET_PREFIXES: Final = (TTFT_BUCKETS, ITL_BUCKETS)
# The per-interval quantile signals each carried histogram stands beside.
QUANTILES_OF: Final = {
    TTFT_BUCKETS: (TTFT_P50_SECONDS, TTFT_P99_SECONDS),
    ITL_BUCKETS: (ITL_P50_SECONDS, ITL_P99_SECONDS),
}
PREFIX_OF: Final = {p99: prefix for prefix, (_, p99) in QUANTILES_OF.items()}
# The families whose top buckets the predictor reads as a tail (`quantile_sorted`): ITL's, a
# decode step and the stalls of prefills it waited for, thinning out as a tail does. Not
# TTFT's: a closed loop of clients waits its turn like a conveyor, its waits packed together
# (online_batch_too_large: p99 17.5 s in the bucket (10, 20]; read as a tail 15.6 s, evenly
# 19.7 s), and the queue model fits its residual on that figure.
READ_AS_TAIL: Final = frozenset({ITL_BUCKETS})
# Of the samples with the family's p99, the share that must carry its buckets (samples stored
# before the buckets were carried, or read from a source without them, have none).
COVERAGE: Final = 0.9
MIN_SAMPLES: Final = 3
_INF = math.inf
_NAMES: dict[tuple[str, tuple[float, ...]], tuple[str, ...]] = {}  # per layout, built once
_NAMES_MAX = 256
_BOUND_OF: dict[str, float] = {}


def is_bucket_signal(name: str) -> bool:
    """Whether `name` is one bucket of a carried histogram (not a signal rules read)."""
    return name.startswith(BUCKET_PREFIXES)


def bucket_signals(
    prefix: str, bounds: Sequence[float], cumulative: Sequence[float]
) -> dict[str, float]:
    """One interval's buckets as signals: `cumulative` counts gained per `le` (ascending
    `bounds`, ending in +Inf) to each bucket that counted anything, and the one below it at 0.
    Empty for bounds that do not ascend or do not end in +Inf."""
    if not bounds or bounds[-1] != _INF or len(bounds) != len(cumulative):
        return {}
    names = _names(prefix, tuple(bounds))
    if not names:
        return {}
    out: dict[str, float] = {}
    below = 0.0
    for k, count in enumerate(cumulative):
        own = count - below
        below = count
        if own > 0:
            out[names[k]] = own
            if k and names[k - 1] not in out:
                out[names[k - 1]] = 0.0
    return out


def _names(prefix: str, bounds: tuple[float, ...]) -> tuple[str, ...]:
    """The signal names of one layout's buckets (empty when the bounds do not ascend)."""
    key = (prefix, bounds)
    found = _NAMES.get(key)
    if found is None:
        ascending = all(a < b for a, b in zip(bounds, bounds[1:], strict=False))
        found = tuple(f"{prefix}{le!r}" for le in bounds) if ascending else ()
        if len(_NAMES) < _NAMES_MAX:
            _NAMES[key] = found
    return found


def window_buckets(view: "WindowView", prefix: str) -> tuple[list[float], list[float]] | None:
    """The window's histogram of one family: ascending bounds (ending in +Inf) and cumulative
    counts, summed over its samples. None where fewer than `COVERAGE` of the samples with the
    family's p99 carry buckets, or fewer than `MIN_SAMPLES` do."""
    found: tuple[list[float], list[float]] | None
    found = view.cached((window_buckets, prefix), lambda: _summed(view, prefix))
    return found


def _summed(view: "WindowView", prefix: str) -> tuple[list[float], list[float]] | None:
    per_bucket: dict[float, float] = {}
    carrying: set[int] = set()
    for name, column in view.columns.items():
        if not name.startswith(prefix):
            continue
        bound = _bound(name, prefix)
        if bound is None:
            continue
        total = 0.0
        for k, value in enumerate(column):
            if value == value:  # noqa: PLR0124 - not NaN
                total += value
                carrying.add(k)
        per_bucket[bound] = per_bucket.get(bound, 0.0) + total
    with_p99 = view.present(QUANTILES_OF[prefix][1])
    if len(carrying) < max(MIN_SAMPLES, COVERAGE * with_p99):
        return None
    per_bucket.setdefault(_INF, 0.0)
    bounds = sorted(per_bucket)
    cumulative, running = [], 0.0
    for le in bounds:
        running += per_bucket[le]
        cumulative.append(running)
    return bounds, cumulative


def _bound(name: str, prefix: str) -> float | None:
    """The `le` a bucket signal's name carries (None for a name that does not parse)."""
    found = _BOUND_OF.get(name)
    if found is None:
        try:
            found = float(name[len(prefix) :])
        except ValueError:
            return None
        if found != found:
            return None
        if len(_BOUND_OF) < _NAMES_MAX * 64:
            _BOUND_OF[name] = found
    return found


def window_quantile(view: "WindowView", prefix: str, q: float, tail: bool = False) -> float | None:
    """The window's `q` quantile of one family from its summed buckets (None as for
    `window_buckets`, or when the window counted nothing); `tail`: interpolated as a tail
    (`quantile_sorted`), else as Prometheus does."""
    found = window_buckets(view, prefix)
    return None if found is None else quantile_sorted(q, *found, tail=tail)


def quantile_sorted(
    q: float, bounds: "Sequence[float]", counts: "Sequence[float]", tail: bool = False
) -> float | None:
    """Prometheus's `histogram_quantile` over ascending bounds (no NaN) and their cumulative
    counts; None if empty or without a +Inf bucket. Linear interpolation inside the bucket; the
    lowest bucket starts at 0 (or at its bound when negative); a quantile in the +Inf bucket
    returns the highest finite bound.

    `tail`: above the median, inside a bucket that some requests pass, the share slower than t
    falls exponentially from the bucket's lower edge to its upper one (log-linear), as a tail
    does, instead of evenly: SGLang's latency buckets are wide (its metrics collector: TTFT
    bounds ..., 8, 10, 20, 40, 60 s; ITL ..., 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4 s), and an even
    spread puts a p99 near the far edge of a bucket whose requests crowd its near one (a
    simulated ITL p99 of 0.277 s read 0.366 s evenly, 0.321 s so)."""
    if not bounds or bounds[-1] != _INF:
        return None
    total = counts[-1]
    if total <= 0 or len(bounds) < 2:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for le, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if le == _INF:
                return bounds[-2]
            if le <= 0 or count == prev_count:
                return le
            lower = prev_bound if prev_bound < le else min(le, 0.0)
            above_low, above_high = total - prev_count, total - count
            if tail and 2 * prev_count >= total and above_high > 0 and lower > 0:
                share = math.log(above_low / (total - rank)) / math.log(above_low / above_high)
                return lower + (le - lower) * share
            return lower + (le - lower) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = le, count
    return bounds[-2]


def share_above(t: float, bounds: "Sequence[float]", counts: "Sequence[float]") -> float | None:
    """The share of a histogram's counts above `t` (ascending bounds ending in +Inf and their
    cumulative counts), spread evenly inside the bucket that holds `t` as Prometheus's
    `histogram_quantile` spreads them; None when empty or without a +Inf bucket."""
    if not bounds or bounds[-1] != _INF or not counts or counts[-1] <= 0:
        return None
    total, lower, below = counts[-1], 0.0, 0.0
    for le, count in zip(bounds, counts, strict=True):
        if t < le:
            if le == _INF or le <= lower:
                return (total - below) / total
            inside = (count - below) * (t - lower) / (le - lower) if t > lower else 0.0
            return (total - below - inside) / total
        lower, below = le, count
    return 0.0
