"""Our exposition parser against prometheus_client's parser (the oracle) and by hand."""

import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sglang_tuner.model.scrape import ScrapeLimits
from sglang_tuner.sources.exposition import LimitExceededError, parse_exposition, scan_exposition
from sglang_tuner.sources.exposition_labels import LabelCache, parse_labels
from sglang_tuner.sources.histograms import (
    bucket_deltas,
    deltas,
    from_dict,
    from_text,
    pack,
    quantile,
    quantile_of,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sglang"


def oracle(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sglang sample as prometheus_client parses it, name without the prefix."""
    rows = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(("sglang:", "sglang_")):
                rows.append((sample.name[7:], dict(sample.labels), sample.value))
    return rows


def ours(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sglang sample as our parser returns it."""
    page = parse_exposition(text)
    return [(n, parse_labels(raw), v) for n, rows in page.samples.items() for raw, v in rows]


def canonical(rows: list[tuple[str, dict[str, str], float]]) -> list[tuple[str, str, str]]:
    """Order-free comparable form (NaN compares equal to NaN)."""
    return sorted((n, repr(sorted(lb.items())), repr(v)) for n, lb, v in rows)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.prom")), ids=lambda p: p.name)
def test_parse_exposition_matches_oracle_on_fixture_pages(path: Path) -> None:
    text = path.read_text()
    assert canonical(ours(text)) == canonical(oracle(text))


def test_parse_exposition_maps_colon_and_underscore_to_same_name() -> None:
    colon = parse_exposition('sglang:num_running_reqs{tp_rank="0"} 5\n').samples
    underscore = parse_exposition('sglang_num_running_reqs{tp_rank="0"} 5\n').samples
    assert colon == underscore == {"num_running_reqs": [('tp_rank="0"', 5.0)]}


def test_parse_exposition_keeps_only_wanted_sample_names() -> None:
    text = (
        "sglang:cache_hit_rate 0.0\n"
        'sglang:time_to_first_token_seconds_bucket{le="+Inf"} 3\n'
        "sglang:time_to_first_token_seconds_count 3\n"
        "process_cpu_seconds_total 1\n"
    )
    page = parse_exposition(text, ["time_to_first_token_seconds_bucket"])
    assert set(page.samples) == {"time_to_first_token_seconds_bucket"}
    assert page.has_prefixed_lines


def test_parse_exposition_reads_nan_inf_and_timestamps() -> None:
    text = "sglang:a NaN\nsglang:b +Inf 1700000000000\nsglang:c -Inf\nsglang:d 1e3 17\n"
    values = {n: rows[0][1] for n, rows in parse_exposition(text).samples.items()}
    assert math.isnan(values["a"])
    assert values["b"] == math.inf and values["c"] == -math.inf and values["d"] == 1000.0


def test_parse_exposition_tolerates_openmetrics_eof_and_exemplars() -> None:
    text = '# TYPE sglang:x counter\nsglang:x_total{a="1"} 4.0 # {trace_id="abc"} 1.0\n# EOF\n'
    assert parse_exposition(text).samples == {"x_total": [('a="1"', 4.0)]}


@pytest.mark.parametrize(
    "body",
    [
        "<html><body>Bad gateway</body></html>",
        '{"error": "nope"}',
        "sglang:x{a=1} 1",
        "sglang:y 1 2 3",
    ],
)
def test_parse_exposition_raises_value_error_on_garbage(body: str) -> None:
    with pytest.raises(ValueError):
        ours(body)  # label sets are checked when parsed (lazily, by the mapper)


def test_parse_exposition_reports_no_prefixed_lines_on_foreign_page() -> None:
    page = parse_exposition("# HELP up x\nup 1\nnode_load1 0.5\n")
    assert not page.has_prefixed_lines and page.samples == {}


def _limit_reason(body: bytes, limits: ScrapeLimits, names: list[str] | None = None) -> str | None:
    """The scrape failure reason `scan_exposition` gives `body` under `limits` (None: within)."""
    try:
        scan_exposition(body, names, limits=limits)
    except LimitExceededError as exc:
        return exc.reason
    return None


def test_scan_exposition_sample_limit_counts_every_sample_line_but_not_comments() -> None:
    page = b"# HELP sglang:a x\n# TYPE sglang:a gauge\nsglang:a 1\n\nnode_load1 2\n  up 1\n"
    assert _limit_reason(page, ScrapeLimits(sample_limit=3), ["a"]) is None
    assert _limit_reason(page, ScrapeLimits(sample_limit=2), ["a"]) == "sample_limit_exceeded"
    assert _limit_reason(page, ScrapeLimits(sample_limit=0), ["a"]) is None  # 0: no limit


def test_scan_exposition_sample_limit_stops_a_huge_page_before_parsing_it() -> None:
    # every line is garbage past the first: a parse would fail, the limit answers first
    page = b"sglang:a 1\n" + b"sglang:a{x=1} 1\n" * 100_000
    assert _limit_reason(page, ScrapeLimits(sample_limit=50_000)) == "sample_limit_exceeded"


def test_scan_exposition_label_value_length_limit_in_bytes_of_the_value() -> None:
    page = 'sglang:a{{x="{}",y="1"}} 1\n'
    at_limit = page.format("é" * 10).encode()  # 20 bytes
    limits = ScrapeLimits(label_value_length_limit=20)
    assert _limit_reason(at_limit, limits) is None
    reason = _limit_reason(page.format("é" * 10 + "z").encode(), limits)
    assert reason == "label_value_length_limit_exceeded"
    many_short = ",".join(f'l{i}="abcdefghij"' for i in range(10))
    assert _limit_reason(f"sglang:a{{{many_short}}} 1\n".encode(), limits) is None


def test_scan_exposition_label_limit_counts_labels_not_equal_signs() -> None:
    limits = ScrapeLimits(label_limit=2)
    assert _limit_reason(b'sglang:a{x="=",y="a=b"} 1\n', limits) is None
    assert _limit_reason(b'sglang:a{x="1",y="2",z="3"} 1\n', limits) == "label_limit_exceeded"


def test_scan_exposition_label_limits_skip_series_not_read() -> None:
    page = b'sglang:a 1\nother{x="' + b"v" * 5000 + b'",a="1",b="2",c="3"} 1\n'
    limits = ScrapeLimits(label_limit=1, label_value_length_limit=10)
    assert _limit_reason(page, limits, ["a"]) is None
    assert _limit_reason(page, limits, None) is None  # `other` carries no sglang prefix


def test_parse_labels_unescapes_quotes_backslashes_and_newlines() -> None:
    raw = r'a="x\"y",b="c:\\dir",c="line\nnext",d="{},="'
    assert parse_labels(raw) == {"a": 'x"y', "b": "c:\\dir", "c": "line\nnext", "d": "{},="}


def test_label_cache_returns_same_labels_as_parse_labels() -> None:
    cache = LabelCache(max_bytes=400)  # room for one entry
    assert cache('a="1"') == {"a": "1"} and cache('b="2"') == {"b": "2"}
    assert cache('a="1"') == {"a": "1"} and 0 < cache.size_bytes <= 400


def test_quantile_interpolates_like_histogram_quantile() -> None:
    buckets = {0.2: 0.0, 0.4: 50.0, 0.6: 99.0, 1.0: 99.0, 2.0: 100.0, math.inf: 100.0}
    assert quantile(0.5, buckets) == pytest.approx(0.4)
    assert quantile(0.99, buckets) == pytest.approx(0.6)
    assert quantile(0.25, buckets) == pytest.approx(0.3)


def test_quantile_returns_none_without_observations() -> None:
    assert quantile(0.5, {1.0: 0.0, math.inf: 0.0}) is None


def test_bucket_deltas_restart_from_zero_after_reset() -> None:
    assert bucket_deltas({1.0: 10.0, math.inf: 12.0}, {1.0: 2.0, math.inf: 3.0}) == {
        1.0: 2.0,
        math.inf: 3.0,
    }


label_values = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
)
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**12), max_value=10**12).map(float),
)


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["gauge", "counter", "histogram"]),
    label_value=label_values,
    value=values,
    name=st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True),
)
def test_parse_exposition_matches_oracle_on_generated_families(
    kind: str, label_value: str, value: float, name: str
) -> None:
    registry = CollectorRegistry()
    labels = ["model_name", "tp_rank"]
    if kind == "gauge":
        Gauge(f"sglang:{name}", "h", labels, registry=registry).labels(label_value, "0").set(value)
    elif kind == "counter" and value >= 0 and not math.isinf(value):
        Counter(f"sglang:{name}", "h", labels, registry=registry).labels(label_value, "1").inc(
            value
        )
    elif kind == "histogram" and not math.isnan(value):
        hist = Histogram(f"sglang:{name}", "h", labels, registry=registry, buckets=(0.1, 1, 10))
        hist.labels(label_value, "0").observe(value)
    text = generate_latest(registry).decode()
    assert canonical(ours(text)) == canonical(oracle(text))


@settings(max_examples=60, deadline=None)
# a label value holding "} " and a number: the fast line regex once ended the labels there and
# read the rest as a value and a timestamp ("bad sample" where the page was valid)
@example(labels={"A": "} "}, value=0.0, timestamp=None, prefix="sglang:")
@example(labels={"A": "} 1"}, value=2.0, timestamp=5, prefix="sglang_")
@given(
    labels=st.dictionaries(
        st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,8}", fullmatch=True), label_values, max_size=4
    ),
    value=values,
    timestamp=st.one_of(st.none(), st.integers(min_value=0, max_value=2**41)),
    prefix=st.sampled_from(["sglang:", "sglang_"]),
)
def test_parse_exposition_matches_oracle_on_hand_rendered_lines(
    labels: dict[str, str], value: float, timestamp: int | None, prefix: str
) -> None:
    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    rendered = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    stamp = "" if timestamp is None else f" {timestamp}"
    text = f"# TYPE {prefix}x gauge\n{prefix}x{{{rendered}}} {value!r}{stamp}\n".replace(
        "inf", "Inf"
    )
    assert canonical(ours(text)) == canonical(oracle(text))


def test_deltas_subtract_one_layout_in_place_and_match_another_by_bound() -> None:
    before = from_dict({0.1: 1.0, 1.0: 3.0, math.inf: 4.0})
    now = from_dict({0.1: 2.0, 1.0: 5.0, math.inf: 9.0})
    assert now[0] is before[0]  # one bounds tuple per layout
    assert deltas(pack(before), now) == (now[0], [1.0, 2.0, 5.0])
    assert deltas(None, now) == now
    assert deltas(pack(now), before) == before  # a count went down: restarted at 0
    other = from_dict({0.1: 3.0, 0.5: 4.0, 1.0: 6.0, math.inf: 10.0})  # a bound added
    gained = {0.1: 1.0, 0.5: 4.0, 1.0: 1.0, math.inf: 1.0}  # matched by bound, the new one from 0
    assert dict(zip(*deltas(pack(now), other), strict=True)) == gained


def test_quantile_of_buckets_in_any_order_equals_quantile_of_the_dict() -> None:
    buckets = {0.5: 4.0, 0.1: 1.0, math.inf: 10.0, 1.0: 8.0}
    for q in (0.05, 0.5, 0.9, 0.99):
        assert quantile_of(q, from_dict(buckets)) == quantile(q, buckets)
        ordered = dict(sorted(buckets.items()))
        assert quantile_of(
            q, from_text([str(b).encode() for b in ordered], [*ordered.values()])
        ) == quantile(q, buckets)
