"""Benchmark: reading a busy SGLang log (mostly Decode lines) with `LogScanner`.

Baselines measured in the same run on the same text: splitting the bytes into lines (what the
follower does before any parsing) and the previous line parser (before crash classification: a
fixed chain of regex searches per line, the phase taken from the last batch line).
Run: `PYTHONPATH=daemon python bench/logs.py [--lines N] [--repeat N]`.
"""

import argparse
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from sglang_tuner.sources.log.lines import LogScanner

CRASH = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "sglang" / "logs"
CRASH = CRASH / "crashes" / "v0.5.9_prefill_oom_assembled.log"
DECODE = (
    "[2026-08-08 12:10:{s:02d} TP0] Decode batch, #running-req: {n}, #token: 300000, token usage: "
    "0.73, cuda graph: True, gen throughput (token/s): 2500.00, #queue-req: 12"
)
PREFILL = (
    "[2026-08-08 12:10:{s:02d} TP0] Prefill batch, #new-seq: 2, #new-token: 6000, #cached-token: "
    "9000, token usage: 0.70, #running-req: 90, #queue-req: 12, #pending-token: 30000, cuda graph:"
    " False, input throughput (token/s): 18000.00"
)
HTTP = '[2026-08-08 12:10:{s:02d}] INFO:     127.0.0.1:60028 - "POST /generate HTTP/1.1" 200 OK'
RETRACT = (
    "[2026-08-08 12:10:{s:02d} TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
    "#new_tokens_gained: 512, #new_token_ratio: 0.3000 -> 0.6000"
)


def busy_log(lines: int) -> bytes:
    """A log of `lines` lines: 90% Decode, 5% Prefill, 4% HTTP, retractions, one crash."""
    out = []
    for i in range(lines):
        s = i % 60
        template = DECODE if i % 20 < 18 else PREFILL if i % 20 == 18 else HTTP
        out.append((RETRACT if i % 1000 == 999 else template).format(s=s, n=i % 500))
    out[lines // 2 : lines // 2] = CRASH.read_text().splitlines()
    return ("\n".join(out) + "\n").encode()


_OLD = [
    re.compile(r"(?:KV cache pool is full\. Retract requests\.|Decode out of memory happened\.) "),
    re.compile(r"Prefill batch(?: \[\d+\])?[.,] "),
    re.compile(r"torch\.(?:cuda\.)?OutOfMemoryError: CUDA out of memory"),
    re.compile(r"Decode batch(?: \[\d+\])?[.,] "),
    re.compile(r"Prefill out of memory\. Try to lower"),
    re.compile(r"Decode out of memory\. Try to lower|alloc_req_slots runs out of memory"),
    re.compile(r"\bmax_total_num_tokens=(\d+)"),
]
_OLD_GRAPH = re.compile(r"\b(?:cuda|cpu|npu|musa) graph: (True|False)")


def previous_parser(text: list[str]) -> int:
    """The previous per-line chain (first match wins), with its graph-flag search."""
    found = 0
    for line in text:
        for index, pattern in enumerate(_OLD):
            if pattern.search(line):
                found += 1 if index != 3 else bool(_OLD_GRAPH.search(line))
                break
    return found


def scanner(text: list[str]) -> int:
    """The current scanner over the same lines."""
    scan = LogScanner()
    scan.feed(text)
    scan.finish()
    return scan.take().decode_lines


def median_seconds(funcs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median wall time of each function, round-robin so all share the same noise."""
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(repeat):
        for name, func in funcs.items():
            start = time.perf_counter()
            func()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    """Print µs/line for each and the ratios to both baselines."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    data = busy_log(args.lines)
    text = data.decode().splitlines()
    cases = {
        "bytes -> lines (baseline)": lambda: data.decode("utf-8", errors="replace").splitlines(),
        "previous parser (baseline)": lambda: previous_parser(text),
        "LogScanner.feed": lambda: scanner(text),
    }
    medians = median_seconds(cases, args.repeat)
    split, previous = medians["bytes -> lines (baseline)"], medians["previous parser (baseline)"]
    print(f"{len(text)} lines, {len(data)} bytes; median of {args.repeat}")
    for name, seconds in medians.items():
        per_line = seconds / len(text) * 1e6
        print(
            f"{name:28s} {seconds * 1e3:8.1f} ms  {per_line:6.3f} µs/line  "
            f"x{seconds / split:5.2f} of split  x{seconds / previous:5.2f} of previous"
        )


if __name__ == "__main__":
    main()
