"""Histogram buckets read a run at a time give what reading every line gives, or the same error."""

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_tuner.model.scrape import ScrapeLimits
from sglang_tuner.sources.exposition import LimitExceededError, scan_exposition
from sglang_tuner.sources.exposition_labels import parse_labels
from sglang_tuner.sources.sglang import SignalMapper
from sglang_tuner.sources.sglang_names import _HISTOGRAM_FAMILIES, _SAMPLE_NAMES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sglang"
TTFT = "time_to_first_token_seconds"
LIMITS = ScrapeLimits(label_value_length_limit=64, label_limit=6)


def line_by_line(body: bytes, limits: ScrapeLimits | None = None) -> dict[str, dict[str, float]]:
    """Each histogram's buckets (`le` text -> count summed over series) read line by line."""
    page = scan_exposition(body, _SAMPLE_NAMES, limits=limits)
    summed: dict[str, dict[str, float]] = {}
    for family in _HISTOGRAM_FAMILIES:
        for raw, value in page.samples.get(family + "_bucket", ()):
            le = parse_labels(raw.decode()).get("le", "NaN")
            counts = summed.setdefault(family, {})
            counts[le] = counts.get(le, 0.0) + value
    return summed


def by_runs(body: bytes, limits: ScrapeLimits | None = None) -> dict[str, dict[str, float]]:
    """The same read by runs where they are plain, line by line where not."""
    page = scan_exposition(body, _SAMPLE_NAMES, limits=limits, histograms=_HISTOGRAM_FAMILIES)
    summed = {f: dict(zip((le.decode() for le in les), counts, strict=True))
              for f, (les, counts) in page.buckets.items()}  # fmt: skip
    for family in _HISTOGRAM_FAMILIES - summed.keys():
        for raw, value in page.samples.get(family + "_bucket", ()):
            le = parse_labels(raw.decode()).get("le", "NaN")
            counts = summed.setdefault(family, {})
            counts[le] = counts.get(le, 0.0) + value
    return summed


def outcome(read: object, body: bytes, limits: ScrapeLimits | None = None) -> object:
    """What `read` returns, or the error it raises (type and message)."""
    try:
        return read(body, limits)  # type: ignore[operator]
    except ValueError as exc:
        return type(exc).__name__, str(exc)


def bucket(labels: str, le: str, value: str) -> str:
    return f'sglang:{TTFT}_bucket{{{labels}le="{le}"}} {value}\n'


def series(
    labels: str, counts: tuple[int, int, int], les: tuple[str, ...] = ("0.1", "1.0", "+Inf")
) -> str:
    return "".join(bucket(labels, le, str(c)) for le, c in zip(les, counts, strict=True))


PLAIN = series('dp_rank="0",', (1, 3, 4)) + "sglang:x_count 4\n" + series('dp_rank="1",', (0, 2, 2))


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.prom")), ids=lambda p: p.name)
def test_every_fixture_page_sums_the_same_by_runs(path: Path) -> None:
    body = path.read_bytes()
    page = scan_exposition(body, _SAMPLE_NAMES, histograms=_HISTOGRAM_FAMILIES)
    assert by_runs(body) == line_by_line(body)
    if line_by_line(body):
        assert page.buckets  # SGLang's own pages take the run path


@pytest.mark.parametrize(
    "body",
    [
        PLAIN,
        PLAIN + series('dp_rank="0",', (1, 3, 4)),  # a series repeated: its first lines kept
        PLAIN + bucket('dp_rank="0",', "1.0", "9"),  # one line repeated, alone
        series('dp_rank="0",', (1, 3, 4)).replace("\n", " 1700000000000\n"),  # timestamps
        series('dp_rank="0",', (1, 3, 4)).replace("\n", ' # {trace_id="a"} 0.5\n', 1),
        series('dp_rank="0",', (1, 3, 4)).replace("\n", "\r\n"),  # CRLF
        series('path="/a}b",handle="x",', (1, 3, 4)),  # a brace in a value, a name ending in le
        series('dp_rank="0",', (1, 3, 4)) + series('dp_rank="1",', (1, 3), ("0.5", "+Inf")),
        series('dp_rank="0",', (1, 3, 4)).replace('dp_rank="0",', "", 1),  # two series, one run
        series("", (1, 3, 4)).replace('le="1.0"', 'a="b"'),  # a bucket without le
        series('dp_rank="0",', (1, 3, 4)).replace(" 3\n", " three\n"),  # a bad value
        series('dp_rank="0",', (1, 3, 4)).replace(" 3\n", " 3 garbage here\n"),
        series(f'model="{"m" * 100}",', (1, 3, 4)),  # a label value past the limit
        series('a="1",b="2",c="3",d="4",e="5",f="6",', (1, 3, 4)),  # more labels than the limit
        series('dp_rank="0",', (1, 3, 4)).replace(f"sglang:{TTFT}", f"sglang_{TTFT}", 1),
        # a series' line repeated at the end of another series' run, its bounds made whole
        series('dp_rank="0",', (0, 0, 0))
        + bucket('dp_rank="0",', "0.5", "0")
        + f"sglang:{TTFT}_count 1\n"
        + series('dp_rank="1",', (0, 0, 0))
        + bucket('dp_rank="0",', "0.5", "1"),
    ],
    ids=lambda body: body[:0] or None,
)
@pytest.mark.parametrize("limits", [None, LIMITS], ids=["no-limits", "limits"])
def test_odd_bucket_lines_read_as_line_by_line_reads_them(
    body: str, limits: ScrapeLimits | None
) -> None:
    data = body.encode()
    assert outcome(by_runs, data, limits) == outcome(line_by_line, data, limits)


def test_repeated_series_are_counted_as_duplicates_either_way() -> None:
    body = (PLAIN + series('dp_rank="0",', (5, 6, 7))).encode()
    runs = scan_exposition(body, _SAMPLE_NAMES, histograms=_HISTOGRAM_FAMILIES)
    lines = scan_exposition(body, _SAMPLE_NAMES)
    assert runs.duplicates == lines.duplicates == 3
    assert by_runs(body)[TTFT] == {"0.1": 1.0, "1.0": 5.0, "+Inf": 6.0}  # the first one kept


def test_limits_are_enforced_inside_bucket_runs() -> None:
    body = series(f'model="{"m" * 100}",', (1, 3, 4)).encode()
    with pytest.raises(LimitExceededError) as raised:
        scan_exposition(body, _SAMPLE_NAMES, limits=LIMITS, histograms=_HISTOGRAM_FAMILIES)
    assert raised.value.reason == "label_value_length_limit_exceeded"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ['dp_rank="0",', 'dp_rank="1",', 'tp_rank="1",', "", 'x="a,le=\\"1\\"",']
            ),
            st.lists(st.integers(0, 50), min_size=1, max_size=4),
            st.sampled_from([("0.1", "1.0", "+Inf"), ("0.5", "+Inf"), ("1.0", "0.1", "+Inf")]),
            st.booleans(),  # a _count line after the series (ends the run)
        ),
        max_size=5,
    )
)
def test_generated_bucket_pages_sum_the_same_by_runs(
    parts: list[tuple[str, list[int], tuple[str, ...], bool]],
) -> None:
    text = ""
    for labels, counts, les, ends in parts:
        text += "".join(bucket(labels, le, str(c)) for le, c in zip(les, counts, strict=False))
        text += f"sglang:{TTFT}_count 1\n" if ends else ""
    body = text.encode()
    assert outcome(by_runs, body) == outcome(line_by_line, body)


def test_the_mapper_reads_the_same_quantiles_from_runs_as_from_lines() -> None:
    # p50/p99 of every latency histogram, two scrapes of a real two-rank page apart
    a = (FIXTURES / "v0.5.23_dp2_full_a.prom").read_bytes()
    b = (FIXTURES / "v0.5.23_dp2_full_b.prom").read_bytes()
    by_lines = SignalMapper()
    by_lines.update(_unplain(a), 0.0)
    expected = by_lines.update(_unplain(b), 5.0)
    mapper = SignalMapper()
    mapper.update(a, 0.0)
    values = mapper.update(b, 5.0)
    quantiles = {k: v for k, v in values.items() if "_p50_" in k or "_p99_" in k}
    assert len(quantiles) == 8
    assert quantiles == {k: v for k, v in expected.items() if k in quantiles}
    assert all(not math.isnan(v) for v in quantiles.values())


def _unplain(body: bytes) -> bytes:
    """The page with a timestamp on every bucket line: no run is plain, all read line by line."""
    lines = body.split(b"\n")
    stamped = [line + b" 1700000000000" if b"_bucket{" in line else line for line in lines]
    unplain = b"\n".join(stamped)
    assert not scan_exposition(unplain, _SAMPLE_NAMES, histograms=_HISTOGRAM_FAMILIES).buckets
    return unplain
