"""A histogram's bucket lines read a run at a time: the counts summed by `le` over its series.

Bucket lines are most of an SGLang page's wanted lines (214 of 249 on a v0.5.23 two-rank page),
and only their `le` and value are used. `exposition.py` hands over each run of consecutive
bucket lines of a family as one slice of the page; here each run costs a few C-level scans (its
`le` values, its values, its line lengths) instead of Python work per line. A run is read this
way only when it is plainly one series written the usual way: every line one `le` label and a
value at its end (no timestamp, no exemplar), its first and last lines of the same series, no
`le` twice, the same bounds in the same order as the family's other runs, a series not seen
before, no line that could break a label limit.
Anything else returns None, and the caller reads the family's lines one by one as before (exact
errors, limits, duplicates).
"""

import operator
import re
from collections.abc import Sequence

# `le` as a whole label: `{` is read as `,` before this search (see `sum_runs`); taken out,
# a line's other labels are its series.
_LE_RE = re.compile(rb',le="([^"\n]*)"')
# The value at a line's end, after the closing brace (a timestamp: no match).
_VALUE_RE = re.compile(rb"\}[ \t]+(\S+)[ \t]*\r?$", re.MULTILINE)

# (the `le` texts in page order, the counts summed over the family's series)
Summed = tuple[list[bytes], list[float]]


def sum_runs(runs: Sequence[bytes], longest: int, most: int) -> Summed | None:
    """The family's bucket counts summed over its runs (one series each), or None for the slow
    path: a run that is not one plainly written series, or a line that might break a limit
    (`longest` bytes of a label value, `most` labels; 0: no limit)."""
    bounds: list[bytes] | None = None
    counts: list[float] = []
    series: set[bytes] = set()
    for run in runs:
        lines = run.split(b"\n")
        if max(map(len, lines)) > longest or b"#" in run:
            return None  # a long line may break a limit; `#`: an exemplar after the value
        if most and max(line.count(b"=") for line in lines) > most:
            return None
        les = _LE_RE.findall(run.replace(b"{", b","))
        values = _VALUE_RE.findall(run)
        if len(les) != len(lines) or len(values) != len(lines):
            return None
        try:
            read = list(map(float, values))
        except ValueError:
            return None  # the slow path says which sample is bad
        # One series: the first and last lines' labels, `le` taken out, are the same (a
        # run's series are written one after the other).
        labels = _series_labels(lines[0])
        if len(lines) > 1 and _series_labels(lines[-1]) != labels:
            return None  # two series in one run: the slow path sums them line by line
        if labels in series:
            return None  # a series repeated: the slow path keeps its first lines only
        series.add(labels)
        if bounds is None:
            if len(set(les)) != len(les):
                return None  # a bound twice: two series in one run, or a repeated line
            bounds, counts = les, read
        elif les != bounds:
            return None
        else:
            counts = list(map(operator.add, counts, read))
    return None if bounds is None else (bounds, counts)


def _series_labels(line: bytes) -> bytes:
    """A bucket line's labels without its name, value and `le`: its series."""
    head = line.rpartition(b"}")[0].replace(b"{", b",")
    return _LE_RE.sub(b"", head[head.find(b",") :])
