"""A fleet's stored history, read at once: every query of a round (but `up`) sent once as
`query_range` for the whole fleet, never once per server, and the answers laid out as one
column of values per target and query part, one value per step.

The daemon in Prometheus mode fills its windows from it at start; `check --prometheus` judges
it and prints the advice. A step is one sample of a target's window, as a scrape would be.
"""

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_tuner.sources.prometheus.promql import FleetQuery, part_name

Columns = dict[str, dict[str, "array[float]"]]  # target -> part -> one value per step


@dataclass(frozen=True, slots=True)
class History:
    """The steps `start`, `start + step`, ... (`steps` of them) of every target with series;
    `error`: why there is none (the first failed query, with its message)."""

    start: float
    step: float
    steps: int
    columns: Columns = field(default_factory=dict)
    queries: int = 0  # range queries sent
    series: int = 0  # answer series, all queries together
    seconds: float = 0.0  # wall time of the queries
    error: str | None = None

    @property
    def end(self) -> float:
        """The last step's timestamp."""
        return self.start + (self.steps - 1) * self.step

    def spans(self) -> dict[str, float]:
        """Per target, how much of the history it has: from its first step with any value to
        the end, one step counted for each sample (a server scraped for 5 of the 60 minutes
        asked has 5 minutes)."""
        out = {}
        for name, cols in self.columns.items():
            first = min(
                (next((k for k, v in enumerate(col) if not math.isnan(v)), self.steps)
                 for col in cols.values()),
                default=self.steps,
            )  # fmt: skip
            if first < self.steps:
                out[name] = (self.steps - first) * self.step
        return out

    def at(self, k: int) -> dict[str, dict[str, float]]:
        """Step `k`: per target with any value there, part -> value (absent values left out)."""
        out: dict[str, dict[str, float]] = {}
        for name, cols in self.columns.items():
            parts = {p: col[k] for p, col in cols.items() if not math.isnan(col[k])}
            if parts:
                out[name] = parts
        return out


def history_steps(end: float, span_seconds: float, step: float) -> tuple[float, int]:
    """(first step, number of steps) of the history covering `span_seconds` up to `end`
    included: a window of that length holds exactly these samples."""
    steps = max(1, math.ceil(span_seconds / step))
    return end - (steps - 1) * step, steps


def columns_of(
    queries: Sequence[FleetQuery],
    results: Sequence[list[dict[str, Any]]],
    name_of: Any,
    start: float,
    step: float,
    steps: int,
) -> Columns:
    """Range answers by target and part, one value per step (NaN where absent); `name_of`
    gives a series' target name from its labels (None: not this replica's)."""
    columns: Columns = {}
    blank = array("d", [math.nan]) * steps
    for query, result in zip(queries, results, strict=True):
        for item in result:
            labels = item["metric"]
            name = name_of(labels)
            if name is None:
                continue
            split = labels.get(query.split_by) if query.split_by else None
            column = array("d", blank)
            for ts, value in item["values"]:
                k = round((ts - start) / step)
                if 0 <= k < steps:
                    column[k] = float(value)
            columns.setdefault(name, {})[part_name(query, split)] = column
    return columns
