"""Prometheus histograms read from their cumulative buckets: the counts gained between two
scrapes, `histogram_quantile` over them, and the buckets kept packed in between.

A histogram's buckets are `Buckets`: the bounds (`le`) as one tuple shared by every target with
the same layout, and the cumulative counts in the same order, so that two scrapes of one layout
subtract in one C-level pass. `quantile` and `bucket_deltas` take the `le -> count` dict form.
"""

import operator
from array import array

from sglang_tuner.model.window_histogram import quantile_sorted

Buckets = tuple[tuple[float, ...], list[float]]  # bounds, cumulative counts (same order)
# Between two scrapes: the bounds and the counts in an array (as dicts of floats they were a
# tenth of the daemon's memory per target).
Packed = tuple[tuple[float, ...], "array[float]"]
_SHARED_BOUNDS: dict[tuple[float, ...], tuple[float, ...]] = {}
_BOUNDS_OF_TEXT: dict[tuple[bytes, ...], tuple[float, ...]] = {}
_SHARED_MAX = 256  # distinct bucket layouts shared; a page inventing more keeps its own


def shared_bounds(bounds: tuple[float, ...]) -> tuple[float, ...]:
    """`bounds`, or the equal tuple seen before (one object per layout, not per target)."""
    shared = _SHARED_BOUNDS.get(bounds)
    if shared is None and len(_SHARED_BOUNDS) < _SHARED_MAX:
        shared = _SHARED_BOUNDS[bounds] = bounds
    return shared or bounds


def from_text(les: list[bytes], counts: list[float]) -> Buckets:
    """Buckets from the `le` texts of a page (converted once per layout) and their counts."""
    key = tuple(les)
    bounds = _BOUNDS_OF_TEXT.get(key)
    if bounds is None:
        bounds = shared_bounds(tuple(map(float, les)))
        if len(_BOUNDS_OF_TEXT) < _SHARED_MAX:
            _BOUNDS_OF_TEXT[key] = bounds
    return bounds, counts


def from_dict(buckets: dict[float, float]) -> Buckets:
    """Buckets from the `le -> count` form."""
    return shared_bounds(tuple(buckets)), list(buckets.values())


def pack(buckets: Buckets) -> Packed:
    """A histogram's buckets to keep until the next scrape."""
    return buckets[0], array("d", buckets[1])


def deltas(before: Packed | None, after: Buckets) -> Buckets:
    """Bucket counts gained between two scrapes; a reset (a count went down) restarts at 0."""
    if before is None:
        return after
    bounds, counts = after
    if before[0] is not bounds and before[0] != bounds:  # another layout: match bounds by value
        before_dict = dict(zip(before[0], before[1], strict=True))
        return from_dict(bucket_deltas(before_dict, dict(zip(bounds, counts, strict=True))))
    gained = list(map(operator.sub, counts, before[1]))
    return after if gained and min(gained) < 0 else (bounds, gained)


def bucket_deltas(before: dict[float, float], after: dict[float, float]) -> dict[float, float]:
    """Bucket counts gained between two scrapes (`le` -> cumulative count); reset restarts at 0."""
    if any(after.get(le, 0.0) < count for le, count in before.items()):
        return dict(after)
    return {le: count - before.get(le, 0.0) for le, count in after.items()}


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus `histogram_quantile` over cumulative buckets (`le` -> count); None if empty.

    Linear interpolation inside the bucket; the lowest bucket starts at 0 (or at its bound when
    negative); a quantile in the +Inf bucket returns the highest finite bound.
    """
    bounds = sorted(le for le in buckets if le == le)  # drop NaN
    return quantile_sorted(q, bounds, [buckets[le] for le in bounds])


def quantile_of(q: float, buckets: Buckets) -> float | None:
    """`quantile` over `Buckets` (read in place when the bounds ascend, as pages write them)."""
    bounds, counts = buckets
    if all(map(operator.lt, bounds, bounds[1:])):  # ascending, no NaN
        return quantile_sorted(q, bounds, counts)
    return quantile(q, dict(zip(bounds, counts, strict=True)))
