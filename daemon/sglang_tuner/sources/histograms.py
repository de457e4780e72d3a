"""Prometheus histograms read from their cumulative buckets (`le` -> count): the counts gained
between two scrapes, and `histogram_quantile` over them.
"""


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
