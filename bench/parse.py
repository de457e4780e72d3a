"""Benchmark: our exposition parser vs prometheus_client's, on a ~650-line current SGLang page.

Both run in the same process on the same page; medians over repetitions; the ratio is what counts.
Run: `PYTHONPATH=daemon python bench/parse.py [--repeat N]`.
"""

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from sglang_tuner.sources.exposition import parse_exposition, scan_exposition
from sglang_tuner.sources.exposition_labels import LabelCache
from sglang_tuner.sources.sglang import SignalMapper

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "sglang"
PAGE_A = FIXTURES / "v0.5.23_dp2_full_a.prom"
PAGE_B = FIXTURES / "v0.5.23_dp2_full_b.prom"
BASELINE = "prometheus_client.parser (baseline)"


def median_seconds(funcs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median wall time of each function, measured round-robin so all share the same noise."""
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for func in funcs.values():
        func()  # warm-up
    for _ in range(repeat):
        for name, func in funcs.items():
            start = time.perf_counter()
            func()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def prometheus_client_parse(text: str) -> int:
    """The baseline: prometheus_client's text parser, generator fully consumed."""
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def our_parse_all(text: str) -> int:
    """Our parser keeping every sglang family, with label dicts built (cold cache each call)."""
    labels = LabelCache()
    page = parse_exposition(text)
    return sum(len(labels(raw)) for rows in page.samples.values() for raw, _ in rows)


def mapper_update(texts: tuple[bytes, bytes]) -> Callable[[], object]:
    """A steady-state SignalMapper.update: alternate two scrapes of the same target."""
    mapper = SignalMapper()
    state = {"ts": 0.0, "i": 0}

    def run() -> object:
        state["ts"] += 5.0
        state["i"] ^= 1
        return mapper.update(texts[state["i"]], state["ts"])

    return run


def main() -> None:
    """Print µs/page, µs/line and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    body, body_b = PAGE_A.read_bytes(), PAGE_B.read_bytes()
    text = body.decode()  # the baseline reads text; ours reads the bytes as received
    lines = len(text.splitlines())
    cases = {
        BASELINE: lambda: prometheus_client_parse(text),
        "ours: parse, all sglang families": lambda: parse_exposition(body),
        "ours: parse all + label dicts (no cache)": lambda: our_parse_all(text),
        "ours: scan, mapper's families only, line by line": lambda: scan_exposition(
            body, _families()
        ),
        "ours: scan, mapper's families only, bucket runs summed (hot path)": lambda: (
            scan_exposition(body, _families(), histograms=_histograms())
        ),
        "ours: SignalMapper.update, steady state": mapper_update((body, body_b)),
        "ours: SignalMapper.update, new mapper": lambda: SignalMapper().update(body, 0.0),
    }
    medians = median_seconds(cases, args.repeat)
    print(f"page: {PAGE_A.name}, {lines} lines, {len(text)} bytes; median of {args.repeat}")
    for name, seconds in medians.items():
        _row(name, seconds, lines, medians[BASELINE])


def _families() -> frozenset[str]:
    """The families the mapper keeps."""
    from sglang_tuner.sources import sglang_names

    return sglang_names._SAMPLE_NAMES


def _histograms() -> frozenset[str]:
    """The histogram families whose bucket runs the mapper has summed."""
    from sglang_tuner.sources import sglang_names

    return sglang_names._HISTOGRAM_FAMILIES


def _row(name: str, seconds: float, lines: int, baseline: float) -> None:
    """One result line."""
    us = seconds * 1e6
    print(f"{name:42s} {us:9.1f} µs/page {us / lines:6.2f} µs/line  {baseline / seconds:5.1f}x")


if __name__ == "__main__":
    main()
