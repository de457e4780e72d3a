"""Fast parser for the Prometheus text exposition format (0.0.4, and OpenMetrics bodies).

A regex scan that keeps only the wanted samples (the prefix is a literal the regex engine
searches for, so unwanted lines cost no Python), maps
`sglang:x` and `sglang_x` to one canonical name `x`, and leaves label parsing to the caller
(`parse_labels`, cached per label string by `LabelCache`). prometheus_client's parser is about 15x
slower and is used only as a test oracle.
"""

import functools
import os
import re
import sys
from collections.abc import Collection
from dataclasses import dataclass

SGLANG_PREFIXES: tuple[str, ...] = ("sglang:", "sglang_")

_EXEMPLAR_RE = re.compile(  # OpenMetrics: `name{labels} value [ts] # {exemplar labels} value`
    r'(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+(?:\.\d*)?)?[ \t]+# .*$'
)
# A line that cannot start a sample or comment (blank lines and leading blanks are fine).
_BAD_LINE_RE = re.compile(r"\n[^#a-zA-Z_:\n \t\r]")
_LABEL_RE = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,|$)')
_UNESCAPE_RE = re.compile(r"\\(.)")
_UNESCAPES = {"n": "\n", "\\": "\\", '"': '"'}

# canonical sample name -> [(raw label string, value), ...] in page order
Samples = dict[str, list[tuple[str, float]]]


@dataclass(frozen=True, slots=True)
class Page:
    """The kept samples of one page, and whether any line carried one of the prefixes."""

    samples: Samples
    has_prefixed_lines: bool


def parse_exposition(
    text: str,
    names: Collection[str] | None = None,
    *,
    prefixes: tuple[str, ...] = SGLANG_PREFIXES,
) -> Page:
    """Parse `text`, keeping the samples named in `names` (without the prefix; None keeps all).

    Names are sample names: a histogram's are `<family>_bucket`, `_sum`, `_count`. One regex scan
    over the whole body finds the wanted lines, so skipped lines cost no Python.
    Raises ValueError with a short reason when the body is not exposition text.
    """
    body = "\n" + text + "\n"
    bad = _BAD_LINE_RE.search(body)
    if bad is not None:
        line = body[bad.start() + 1 :].split("\n", 1)[0]
        raise ValueError(f"not exposition text: {line[:60]!r}")
    samples: Samples = {}
    pattern = _sample_regex(None if names is None else frozenset(names), prefixes)
    for match in pattern.finditer(body):
        name, raw, value, bad_line = match.groups()
        if bad_line is not None or (raw is not None and " # " in raw):
            raw, value = _exemplar_line(match.group(0)[1:], name)
        entry = samples.get(name)
        if entry is None:
            samples[name] = entry = []
        entry.append((raw or "", _float(value)))
    has_prefixed = bool(samples) or any(("\n" + prefix) in body for prefix in prefixes)
    return Page(samples, has_prefixed)


@functools.lru_cache(maxsize=32)
def _sample_regex(names: frozenset[str] | None, prefixes: tuple[str, ...]) -> re.Pattern[str]:
    """Regex for the wanted sample lines: `\n<prefix><name>{labels} value [timestamp]`.

    Groups: name, labels, value, and `bad` for a wanted line that does not parse (it raises).
    """
    common = os.path.commonprefix(prefixes)
    rests = "|".join(re.escape(p[len(common) :]) for p in prefixes)
    if names is None:
        alternatives = "[a-zA-Z0-9_:]+"
    else:
        alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(
        rf"\n{re.escape(common)}(?:{rests})({alternatives})(?=[{{ \t])"
        r"(?:(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+(?:\.\d*)?)?[ \t]*\r?(?=\n)|([^\n]*))"
    )


def _float(value: str) -> float:
    """A sample value (Go-style floats, NaN, +Inf, -Inf)."""
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"bad sample value {value[:20]!r}") from None


def _exemplar_line(line: str, name: str) -> tuple[str | None, str]:
    """Re-read a line the fast regex could not: OpenMetrics exemplars, or garbage (raises)."""
    rest = line[line.index(name) + len(name) :]
    exemplar = _EXEMPLAR_RE.match(rest)
    if exemplar is None:
        raise ValueError(f"not a valid sample: {line[:60]!r}")
    return exemplar.group(1), exemplar.group(2)


def parse_labels(raw: str) -> dict[str, str]:
    """Parse a raw label string (`a="1",b="x\\"y"`) into a dict, unescaping values."""
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(raw):
        match = _LABEL_RE.match(raw, pos)
        if match is None:
            if raw[pos:].strip(" \t,") == "":
                break
            raise ValueError(f"bad label set {raw[:60]!r}")
        value = match.group(2)
        if "\\" in value:
            value = _UNESCAPE_RE.sub(lambda m: _UNESCAPES.get(m.group(1), "\\" + m.group(1)), value)
        labels[match.group(1)] = value
        pos = match.end()
    return labels


class LabelCache:
    """Memoised `parse_labels`: a target's label strings repeat on every scrape.

    With `keep`, only those label names are stored (values interned): the cache lives as long
    as its target, so what it holds is paid once per target.
    """

    def __init__(self, max_entries: int = 20_000, keep: frozenset[str] | None = None) -> None:
        self._cache: dict[str, dict[str, str]] = {}
        self._max_entries = max_entries
        self._keep = keep

    def __call__(self, raw: str) -> dict[str, str]:
        """Labels of `raw`, parsed once; the returned dict must not be mutated."""
        labels = self._cache.get(raw)
        if labels is None:
            if len(self._cache) >= self._max_entries:
                self._cache.clear()
            labels = parse_labels(raw)
            if self._keep is not None:
                labels = {k: sys.intern(v) for k, v in labels.items() if k in self._keep}
            self._cache[raw] = labels
        return labels


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
