"""Prometheus histograms read from their cumulative buckets (`le` -> count): the counts gained
between two scrapes, `histogram_quantile` over them, and the buckets kept packed in between.
"""

from array import array


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
    if not bounds or bounds[-1] != float("inf"):
        return None
    total = buckets[bounds[-1]]
    if total <= 0 or len(bounds) < 2:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if le == float("inf"):
                return bounds[-2]
            if le <= 0 or count == prev_count:
                return le
            lower = prev_bound if prev_bound < le else min(le, 0.0)
            return lower + (le - lower) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = le, count
    return bounds[-2]


# A histogram's buckets between two scrapes, packed: the bounds (one tuple shared by every
# target with the same buckets) and the counts in an array. As dicts of floats they were a
# tenth of the daemon's memory per target.
Packed = tuple[tuple[float, ...], "array[float]"]
_SHARED_BOUNDS: dict[tuple[float, ...], tuple[float, ...]] = {}
_SHARED_BOUNDS_MAX = 256  # distinct bucket layouts shared; a page inventing more keeps its own


def pack(buckets: dict[float, float]) -> Packed:
    """A histogram's buckets to keep until the next scrape (bounds shared when seen before)."""
    bounds = tuple(buckets)
    shared = _SHARED_BOUNDS.get(bounds)
    if shared is None and len(_SHARED_BOUNDS) < _SHARED_BOUNDS_MAX:
        shared = _SHARED_BOUNDS[bounds] = bounds
    return shared or bounds, array("d", buckets.values())


def unpack(packed: Packed | None) -> dict[float, float]:
    """The buckets `pack` kept (none: empty)."""
    return {} if packed is None else dict(zip(packed[0], packed[1], strict=True))
