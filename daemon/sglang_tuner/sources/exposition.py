"""Fast parser for the Prometheus text exposition format (0.0.4, and OpenMetrics bodies).

A regex scan that keeps only the wanted samples (the prefix is a literal the regex engine
searches for, so unwanted lines cost no Python), maps
`sglang:x` and `sglang_x` to one canonical name `x`, and leaves label parsing to the caller
(`parse_labels`, cached per label string by `LabelCache`: both in `exposition_labels.py`).
prometheus_client's parser is about 15x slower and is used only as a test oracle.
"""

import functools
import itertools
import operator
import os
import re
import sys
from collections.abc import Collection
from dataclasses import dataclass, field

from sglang_tuner.model.scrape import ScrapeLimits
from sglang_tuner.sources.bucket_runs import Summed, sum_runs
from sglang_tuner.sources.exposition_labels import parse_labels

SGLANG_PREFIXES: tuple[str, ...] = ("sglang:", "sglang_")

# What follows a sample name, read slowly but exactly (quoted `}`, OpenMetrics exemplars
# `name{labels} value [ts] # {exemplar labels} value`), when the fast regex could not.
_SLOW_LINE_RE = re.compile(
    rb'(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+(?:\.\d*)?)?'
    rb"(?:[ \t]+# .*)?[ \t]*\r?$"
)
# A line that cannot start a sample or comment (blank lines and leading blanks are fine).
_BAD_LINE_RE = re.compile(rb"\n[^#a-zA-Z_:\n \t\r]")
# The start of a sample line: not blank, not a comment (the body is framed by newlines).
_SAMPLE_START_RE = re.compile(rb"\n[ \t]*[^#\s]")
_label_string = operator.itemgetter(0)  # of a (raw label string, value) row

# canonical sample name -> [(raw label string, value), ...] in page order
RawSamples = dict[str, list[tuple[bytes, float]]]
Samples = dict[str, list[tuple[str, float]]]


@dataclass(frozen=True, slots=True)
class RawPage:
    """The kept samples of one page (label strings undecoded), and whether any line carried
    one of the prefixes."""

    samples: RawSamples
    has_prefixed_lines: bool
    duplicates: int = 0  # samples dropped for repeating a kept series' name and labels
    buckets: dict[str, Summed] = field(default_factory=dict)  # histogram family -> summed


class LimitExceededError(ValueError):
    """The page broke a scrape limit; `reason` is the scrape failure reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Page:
    """The kept samples of one page, and whether any line carried one of the prefixes."""

    samples: Samples
    has_prefixed_lines: bool


def parse_exposition(
    text: str | bytes,
    names: Collection[str] | None = None,
    *,
    prefixes: tuple[str, ...] = SGLANG_PREFIXES,
) -> Page:
    """`scan_exposition` with label strings decoded (for callers off the scrape path)."""
    body = text.encode() if isinstance(text, str) else text
    page = scan_exposition(body, names, prefixes=prefixes)
    samples = {
        name: [(raw.decode(errors="replace"), value) for raw, value in rows]
        for name, rows in page.samples.items()
    }
    return Page(samples, page.has_prefixed_lines)


def scan_exposition(
    body: bytes,
    names: Collection[str] | None = None,
    *,
    prefixes: tuple[str, ...] = SGLANG_PREFIXES,
    limits: ScrapeLimits | None = None,
    histograms: Collection[str] = (),
) -> RawPage:
    """Parse `body`, keeping the samples named in `names` (without the prefix; None keeps all).

    Names are sample names: a histogram's are `<family>_bucket`, `_sum`, `_count`. One regex scan
    over the whole body finds the wanted lines, so skipped lines cost no Python; the body is
    never decoded. The `_bucket` lines of the families in `histograms` come back summed by `le`
    over their series in `RawPage.buckets` (`bucket_runs.py`), or, when they are not plainly
    written, as samples like any other. Raises ValueError with a short reason when the body is
    not exposition text, and LimitExceededError past one of `limits`: the samples are counted
    before any is parsed, the labels of each kept series checked as it is read (skipped series
    are never parsed).
    """
    body = b"\n" + body + b"\n"
    if limits is not None:
        _check_sample_limit(body, limits.sample_limit)
    longest = (limits.label_value_length_limit if limits else 0) or sys.maxsize
    most = limits.label_limit if limits else 0
    wanted = None if names is None else frozenset(names)
    pattern, decoded = _sample_regex(wanted, prefixes, frozenset(histograms))
    samples: RawSamples = {}
    runs: dict[bytes, list[bytes]] = {}
    try:
        for family, run, name_bytes, raw, value, bad_line, bad_start in pattern.findall(body):
            if family:
                (runs.get(family) or runs.setdefault(family, [])).append(run)
                continue
            if bad_start:
                _raise_bad_line(body)
            if bad_line:
                raw, value = _slow_line(bad_line)
            if len(raw) > longest or (most and raw.count(b"=") > most):
                _check_labels(name_bytes, raw, longest, most or sys.maxsize)
            name = decoded.get(name_bytes) or name_bytes.decode()  # never cached: names may churn
            rows = samples.get(name)
            if rows is None:
                samples[name] = rows = []
            rows.append((raw, float(value)))  # Go-style floats, NaN, +Inf, -Inf
    except LimitExceededError:
        raise
    except ValueError as exc:
        raise ValueError(f"bad sample: {str(exc)[:80]}") from None
    buckets, dropped = _histograms(runs, decoded, samples, prefixes, limits, (longest, most))
    has_prefixed = bool(samples or buckets) or any(b"\n" + p.encode() in body for p in prefixes)
    return RawPage(samples, has_prefixed, dropped + _drop_duplicates(samples), buckets)


def _histograms(
    runs: dict[bytes, list[bytes]],
    decoded: dict[bytes, str],
    samples: RawSamples,
    prefixes: tuple[str, ...],
    limits: ScrapeLimits | None,
    longest_most: tuple[int, int],
) -> tuple[dict[str, Summed], int]:
    """Each family's bucket runs summed (`bucket_runs.py`), or else its lines added to `samples`
    one by one, as any other sample's; and the repeated samples those lines dropped.
    `longest_most`: the label value length and label count limits (sys.maxsize, 0: none)."""
    buckets: dict[str, Summed] = {}
    dropped = 0
    for family, family_runs in runs.items():
        name = decoded[family]
        if summed := sum_runs(family_runs, *longest_most):
            buckets[name] = summed
            continue
        lines = b"".join(
            b"\n" + prefixes[0].encode() + family + b"_bucket" + r for r in family_runs
        )
        page = scan_exposition(lines, (name + "_bucket",), prefixes=prefixes, limits=limits)
        samples |= page.samples
        dropped += page.duplicates
    return buckets, dropped


def _check_sample_limit(body: bytes, limit: int) -> None:
    """LimitExceededError when `body` (framed by newlines) holds more than `limit` samples."""
    if limit <= 0 or len(body) < 4 * limit or body.count(b"\n") <= limit:
        return  # a sample line takes 4 bytes at least: the usual page costs nothing
    beyond = itertools.islice(_SAMPLE_START_RE.finditer(body), limit, None)
    if next(beyond, None) is not None:  # stops at the first sample past the limit
        raise LimitExceededError("sample_limit_exceeded", f"more than {limit} samples")


def _check_labels(name: bytes, raw: bytes, longest: int, most: int) -> None:
    """LimitExceededError when a label value is longer than `longest` bytes or there are more
    than `most` labels (the raw string was long enough, or had enough `=`, to need a look)."""
    labels = parse_labels(raw.decode(errors="replace"))
    series = name.decode(errors="replace")[:60]
    if len(labels) > most:
        message = f"{series} with {len(labels)} labels, more than {most}"
        raise LimitExceededError("label_limit_exceeded", message)
    size = max((len(value.encode()) for value in labels.values()), default=0)
    if size > longest:
        message = f"{series} with a label value of {size} bytes, more than {longest}"
        raise LimitExceededError("label_value_length_limit_exceeded", message)


def _drop_duplicates(samples: RawSamples) -> int:
    """Keep the first of each series (name and label string) a page repeats; count the others.

    Prometheus does the same (it rejects the repeat, counted in
    `prometheus_target_scrapes_sample_duplicate_timestamp_total`), so a target read directly and
    one read through Prometheus give the same value; summing the repeats, as the aggregation over
    ranks would, misreads a gauge. Only byte-identical label strings are taken for one series.
    """
    dropped = 0
    for name, rows in samples.items():
        if len(rows) > 1 and len(set(map(_label_string, rows))) < len(rows):
            first: dict[bytes, float] = {}
            for raw, value in rows:
                first.setdefault(raw, value)
            samples[name] = list(first.items())
            dropped += len(rows) - len(first)
    return dropped


def _raise_bad_line(body: bytes) -> None:
    """Raise ValueError quoting the first line that cannot start a sample or comment."""
    bad = _BAD_LINE_RE.search(body)
    line = b"" if bad is None else body[bad.start() + 1 :].split(b"\n", 1)[0]
    raise ValueError(f"not exposition text: {line[:60]!r}")


@functools.lru_cache(maxsize=32)
def _sample_regex(
    names: frozenset[str] | None, prefixes: tuple[str, ...], histograms: frozenset[str]
) -> tuple[re.Pattern[bytes], dict[bytes, str]]:
    """Regex for the wanted sample lines, and the names it can capture (bytes -> str).

    Line: `\n<prefix><name>{labels} value [timestamp]`. Groups: a histogram family and the run
    of its consecutive `_bucket` lines (from its first line's labels on; `[^\n]*` is the engine's
    fastest loop), name, labels, value, the rest of a wanted line that does not parse that way
    (exemplars, a label value holding `} ` before a number, or garbage: it raises), and the
    first character of a line that cannot start a sample or comment (the page is garbage). A
    value holds no quote or brace, so a label value's `} ` never ends the labels there.
    """
    common = os.path.commonprefix(prefixes)
    prefix = f"{re.escape(common)}(?:{'|'.join(re.escape(p[len(common) :]) for p in prefixes)})"
    if names is None:
        alternatives = "[a-zA-Z0-9_:]+"
    else:
        alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    families = "|".join(re.escape(f) for f in sorted(histograms, key=len, reverse=True)) or "(?!)"
    bucket = r"_bucket(?=[{ \t])"
    pattern = re.compile(
        rf"\n(?:{prefix}(?:({families}){bucket}([^\n]*(?:\n{prefix}\1{bucket}[^\n]*)*)|"
        rf"({alternatives})(?=[{{ \t])".encode()
        + rb'(?:(?:\{([^}\n]*)\})?[ \t]+([^\s"{}]+)'  # a value holds no quote or brace
        + rb"(?:[ \t]+-?\d+(?:\.\d*)?)?[ \t]*\r?(?=\n)|([^\n]*)))"
        + rb"|([^#a-zA-Z_:\n \t\r]))"
    )
    return pattern, {n.encode(): n for n in (*(names or ()), *histograms)}


def _slow_line(rest: bytes) -> tuple[bytes, bytes]:
    """(labels, value) of a line the fast regex could not read; ValueError for garbage."""
    line = _SLOW_LINE_RE.match(rest)
    if line is None:
        raise ValueError(f"not a valid sample: {rest[:60]!r}")
    return line.group(1) or b"", line.group(2)
