"""The simulator against published SGLang measurements: each point run in the simulator.

Each point is a public `bench_serving` result (model, GPU, flags, load -> one figure) with its
source. The simulator runs the same load on the same server at the nearest version it serves:
`finite` points send `prompts` requests (Poisson at `rate`, or all at once when rate is inf),
then drain, and divide the output tokens by the time to the last answer, as bench_serving does;
`closed` points keep `concurrency` requests in flight for 10 simulated minutes (bench_serving's
--max-concurrency, in steady state). Prompt lengths are lognormal around the point's mean (the
simulator's only shape); outputs are the fixed length (random-range-ratio 1) or uniform in
[1, 2 x mean] (ShareGPT, ratio 0). Nothing here tunes the physics: the table is what it gives.

    PYTHONPATH=daemon python bench/published.py [--point NAME ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sglang_sim import Load, ServerModel, ServerSpec
from sglang_sim.fleet import config_for
from sglang_sim.stats import GRIDS, Histogram

ITL, TTFT = "inter_token_latency_seconds", "time_to_first_token_seconds"
DRAIN_STEP = 0.1  # simulated seconds between checks that every request has finished
H200_ATTN = (
    "https://github.com/sgl-project/sglang/blob/main/benchmark/attention_backend/NVIDIA_H200.md"
)
VLLM060 = "https://github.com/sgl-project/sglang/blob/main/benchmark/benchmark_vllm_060/README.md"
V045 = "https://github.com/Michaelvll/llm-ie-benchmarks/issues/3"
V045_CMD = "https://github.com/sgl-project/sglang/issues/5514"
INFX = "https://github.com/SemiAnalysisAI/InferenceX/issues/870"
DP8 = {"tp_size": "8", "dp_size": "8", "enable_dp_attention": "true"}


@dataclass(frozen=True)
class Point:
    """One published figure and the load that produced it."""

    name: str
    source: str
    model: str
    gpu: str
    flags: Mapping[str, str]
    version: str  # the release measured
    sim_version: str  # the nearest the simulator serves
    input_len: int
    output_len: int
    fixed_output: bool  # random-range-ratio 1 (else uniform in [1, 2 x output_len])
    metric: str  # "output tok/s", "TPOT mean ms", "ITL median ms", "TTFT median ms"
    published: float
    mode: str = "finite"  # or "closed"
    prompts: int = 0
    rate: float = math.inf
    concurrency: int = 0
    note: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)


def _h200(name: str, model: str, backend: str, inp: int, out: int, value: float) -> Point:
    flags = {"attention_backend": backend, **({"tp_size": "8"} if model == "deepseek-v3" else {})}
    return Point(
        name, H200_ATTN, model, "H200", flags, "unstated (2025)", "0.4.10",
        (inp + 1) // 2, (out + 1) // 2, False, "output tok/s", value, prompts=200, rate=16.0,
        note="bench_serving random, ratio 0: lengths uniform in [1, len]",
    )  # fmt: skip


def _v045(name: str, inp: int, out: int, prompts: int, value: float) -> Point:
    return Point(
        name, V045, "deepseek-v3", "H200", DP8, "0.4.5.post3", "0.4.10", inp, out, True,
        "output tok/s", value, prompts=prompts, rate=10.0,
        note=f"launch and bench commands: {V045_CMD}",
    )  # fmt: skip


def _infx(conc: int, metric: str, value: float) -> Point:
    return Point(
        f"dsr1-h200-tp8-c{conc}-{'tok' if 'tok' in metric else 'tpot'}", INFX, "deepseek-v3",
        "H200", {"tp_size": "8"}, "0.5.7", "0.5.9", 1024, 1024, True, metric, value,
        mode="closed", concurrency=conc, note="DeepSeek-R1-0528 (V3's shape), FP8, EP 1",
    )  # fmt: skip


def _v030(name: str, model: str, gpu: str, flags: Mapping[str, str], metric: str, value: float,
          prompts: int, rate: float = math.inf) -> Point:  # fmt: skip
    return Point(
        name, VLLM060, model, gpu, {"disable_radix_cache": "true", **flags}, "0.3.0", "0.4.10",
        227, 194, False, metric, value, prompts=prompts, rate=rate,
        note="ShareGPT: 227 input tokens on average (sglang#1639), 194 output (this run)",
    )  # fmt: skip


_8B_A100 = {"enable_torch_compile": "true"}
_70B = {"tp_size": "4"}
POINTS: tuple[Point, ...] = (
    _h200("8b-h200-fa3-1k1k", "llama-3.1-8b", "fa3", 1024, 1024, 5355.04),
    _h200("8b-h200-flashinfer-1k1k", "llama-3.1-8b", "flashinfer", 1024, 1024, 4932.05),
    _h200("8b-h200-fa3-8k1k", "llama-3.1-8b", "fa3", 8192, 1024, 2275.40),
    _h200("8b-h200-flashinfer-8k1k", "llama-3.1-8b", "flashinfer", 8192, 1024, 1790.00),
    _h200("8b-h200-fa3-8k8k", "llama-3.1-8b", "fa3", 8192, 8192, 2588.25),
    _h200("dsv3-h200-tp8-fa3-1k1k", "deepseek-v3", "fa3", 1024, 1024, 2268.68),
    _h200("dsv3-h200-tp8-fa3-8k1k", "deepseek-v3", "fa3", 8192, 1024, 1078.81),
    _h200("dsv3-h200-tp8-fa3-8k8k", "deepseek-v3", "fa3", 8192, 8192, 1482.43),
    _v045("dsv3-h200-dp8-1k2k-50", 1000, 2000, 50, 1253.18),
    _v045("dsv3-h200-dp8-5k1k-50", 5000, 1000, 50, 938.40),
    _v045("dsv3-h200-dp8-10k500-50", 10000, 500, 50, 489.97),
    _v045("dsv3-h200-dp8-30k100-50", 30000, 100, 50, 49.71),
    _v045("dsv3-h200-dp8-1k2k-200", 1000, 2000, 200, 3141.22),
    _infx(8, "output tok/s", 74.6 * 8),
    _infx(8, "TPOT mean ms", 12.8),
    _infx(64, "output tok/s", 223.6 * 8),
    _infx(64, "TPOT mean ms", 34.6),
    _v030("8b-a100-offline-5000", "llama-3.1-8b", "A100", _8B_A100, "output tok/s", 4281.51, 5000),
    _v030("8b-a100-rps4-itl", "llama-3.1-8b", "A100", _8B_A100, "ITL median ms", 11.93, 1200, 4.0),
    _v030("8b-a100-rps8-itl", "llama-3.1-8b", "A100", _8B_A100, "ITL median ms", 14.41, 2400, 8.0),
    _v030("8b-a100-rps4-ttft", "llama-3.1-8b", "A100", _8B_A100, "TTFT median ms", 31.98, 1200,
          4.0),
    _v030("70b-h100x4-offline-5000", "llama-3.1-70b", "H100",
          {**_70B, "mem_fraction_static": "0.88"}, "output tok/s", 3856.01, 5000),
    _v030("70b-h100x4-rps4-itl", "llama-3.1-70b", "H100", _70B, "ITL median ms", 21.67, 1200, 4.0),
    _v030("70b-h100x4-rps8-itl", "llama-3.1-70b", "H100", _70B, "ITL median ms", 24.45, 2400, 8.0),
)  # fmt: skip


def server(point: Point, load: Load) -> ServerModel:
    """The point's server at its version's defaults, flags applied, carrying `load`."""
    spec = ServerSpec("healthy", point.sim_version, flags=tuple(point.flags.items()),
                      gpu=point.gpu, model=point.model, defaults=True)  # fmt: skip
    return ServerModel(replace(config_for(spec), load=load), seed=1)


def load_of(point: Point, clients: int = 0, rate: float = 0.0) -> Load:
    """The point's request shape: prompt mean, output fixed or uniform, every one streamed."""
    out = point.output_len
    return Load(
        rate=rate, clients=clients, prompt_mean=point.input_len,
        max_new_tokens=out if point.fixed_output else 2 * out,
        eos_fraction=0.0 if point.fixed_output else 1.0, streaming_fraction=1.0,
    )  # fmt: skip


def _hist(model: ServerModel, name: str) -> Histogram:
    total = Histogram(GRIDS[name])
    for hist in model.tok.hists.get(name, {}).values():
        total.counts = [a + b for a, b in zip(total.counts, hist.counts, strict=True)]
        total.total, total.count = total.total + hist.total, total.count + hist.count
    return total


def _decode_tokens(model: ServerModel) -> float:
    return sum(r.stats.counters.get("realtime_tokens_total", {}).get(("decode",), 0.0)
               for r in model.ranks)  # fmt: skip


def run_finite(point: Point) -> tuple[ServerModel, float]:
    """Send the prompts, drain; the model and the time to the last answer."""
    if math.isinf(point.rate):  # all at once: as many one-shot clients, who then leave
        load = load_of(point, clients=point.prompts)
        model = server(point, load)
        model.set_load(replace(load, clients=0), point.prompts * 0.002 + 0.01)
    else:
        load = load_of(point, rate=point.rate)
        model = server(point, load)
        model.set_load(replace(load, rate=0.0), point.prompts / point.rate)
    t = 0.0
    while t < 36000.0:
        t += DRAIN_STEP
        model.advance_to(t)
        if all(not r.running and not r.waiting for r in model.ranks) and t > 1.0:
            break
    return model, t


def simulate(point: Point) -> float:
    """The simulator's figure for the point's metric."""
    if point.mode == "closed":
        model, seconds = server(point, load_of(point, clients=point.concurrency)), 660.0
        model.advance_to(60.0)
        start_tokens = _decode_tokens(model)
        model.tok.hists.clear()
        model.advance_to(seconds)
        tokens, seconds = _decode_tokens(model) - start_tokens, 600.0
    else:
        model, seconds = run_finite(point)
        tokens = _decode_tokens(model)
    if point.metric == "output tok/s":
        return tokens / seconds
    if point.metric == "TPOT mean ms":
        itl = _hist(model, ITL)
        return 1e3 * itl.total / max(itl.count, 1)
    name = ITL if point.metric.startswith("ITL") else TTFT
    return 1e3 * _median(_hist(model, name))


def _median(hist: Histogram) -> float:
    total, acc = sum(hist.counts), 0.0
    for i, count in enumerate(hist.counts):
        if count and acc + count >= total / 2:
            low = hist.bounds[i - 1] if i > 0 else 0.0
            high = hist.bounds[i] if i < len(hist.bounds) else low
            return low + (high - low) * (total / 2 - acc) / count
        acc += count
    return float("nan")


def table(rows: Sequence[tuple[Point, float]]) -> str:
    """Markdown: each point, published beside simulated, and the error."""
    out = [
        "| point | model | GPU × flags | SGLang (sim) | load | metric | published | simulator "
        "| error |",
        "|---|---|---|---|---|---|---:|---:|---:|",
    ]
    for p, sim in rows:
        err = (sim - p.published) / p.published
        flags = " ".join(f"{k}={v}" for k, v in p.flags.items()) or "defaults"
        load = (f"{p.prompts} prompts at {p.rate:g}/s" if p.mode == "finite"
                else f"concurrency {p.concurrency}")  # fmt: skip
        shape = f"{p.input_len}→{p.output_len}{'' if p.fixed_output else ' (means)'}"
        out.append(
            f"| [{p.name}]({p.source}) | {p.model} | {p.gpu} {flags} | {p.version} "
            f"({p.sim_version}) | {load}, {shape} | {p.metric} | {p.published:,.2f} | "
            f"{sim:,.2f} | {err * 100:+.1f} % |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--point", action="append", help="one point by name (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    names = {p.name for p in POINTS}
    unknown = sorted(set(args.point or ()) - names)
    if unknown:
        parser.error(f"unknown point {', '.join(unknown)}; choose from {', '.join(sorted(names))}")
    points = [p for p in POINTS if not args.point or p.name in args.point]
    rows = []
    for p in points:
        rows.append((p, simulate(p)))
        print(f"  {p.name}: {rows[-1][1]:,.2f} ({p.published:,.2f} published)", file=sys.stderr)
    print(table(rows))
    if args.json:
        payload = [{**asdict(p), "rate": str(p.rate), "simulator": s} for p, s in rows]
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
