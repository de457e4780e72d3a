"""The simulator's decode blocks against step-exact admission, on the matrix's drawn starts.

The simulator admits after every decode step, as SGLang does (`MIN_DECODE_BLOCK = 1`); earlier
builds ran decode in blocks of at least 8 steps before they tried admission again while requests
waited. This runs each drawn start (`matrix_cases.draw`, the perturbed world) for 10 simulated
minutes both ways, on the same traffic seed, and reports how far each objective moves where
requests queue: what the block costs in fidelity, and what step-exact admission costs in CPU.

    PYTHONPATH=daemon python bench/sim_granularity.py [--seed 31000] [--runs 60] [--spread 0.25]
        [--block 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_sim.decode as decode  # noqa: E402
from closed_loop_matrix import config_for  # noqa: E402
from matrix_cases import draw  # noqa: E402
from sglang_sim import Measurement, measure  # noqa: E402

FIELDS = {
    "tok/s": "gen_throughput", "TTFT p99": "ttft_p99", "ITL p50": "itl_p50",
    "ITL p99": "itl_p99",
}  # fmt: skip


def run(config: object, block: int) -> tuple[Measurement, float]:
    """10 simulated minutes with decode blocks of at least `block` steps, and the CPU seconds."""
    decode.MIN_DECODE_BLOCK = block
    start = time.process_time()
    result = measure(config, seconds=600.0, seed=1)  # type: ignore[arg-type]
    return result, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=31000, help="first drawn case")
    parser.add_argument("--runs", type=int, default=60, help="cases drawn")
    parser.add_argument("--spread", type=float, default=0.25, help="the world's perturbation")
    parser.add_argument("--block", type=int, default=8, help="the blocks compared (default 8)")
    args = parser.parse_args()
    block, exact = args.block, decode.MIN_DECODE_BLOCK
    diffs: dict[str, list[float]] = {name: [] for name in FIELDS}
    cpu = [0.0, 0.0]
    for k, seed in enumerate(range(args.seed, args.seed + args.runs), 1):
        config = config_for(draw(seed, args.spread).spec())
        (coarse, c_cpu), (exact_run, e_cpu) = run(config, block), run(config, 1)
        decode.MIN_DECODE_BLOCK = exact
        print(f"  {k}/{args.runs} seed {seed}", file=sys.stderr, end="\r")
        if coarse.gen_throughput <= 0 or exact_run.gen_throughput <= 0 or coarse.queue_mean < 1:
            continue  # down, or nothing waits: the block changes nothing there
        cpu[0], cpu[1] = cpu[0] + c_cpu, cpu[1] + e_cpu
        for name, field in FIELDS.items():
            before, after = getattr(coarse, field), getattr(exact_run, field)
            if before:
                diffs[name].append((after / before - 1) * 100)
    n = len(diffs["tok/s"])
    print(f"{n} of {args.runs} drawn starts queue requests; step-exact admission against "
          f"blocks of at least {block} steps (10 simulated minutes, traffic seed 1):")  # fmt: skip
    print("| objective | median change | median abs change | largest abs | starts off by > 5 % |")
    print("|---|---:|---:|---:|---:|")
    for name, signed in diffs.items():
        values = [abs(v) for v in signed]
        over = sum(v > 5 for v in values)
        print(f"| {name} | {statistics.median(signed):+.1f} % | {statistics.median(values):.1f} % "
              f"| {max(values):.0f} % | {over} of {len(values)} |")  # fmt: skip
    print(f"CPU: step-exact {cpu[1]:.1f} s, blocks {cpu[0]:.1f} s (x {cpu[1] / cpu[0]:.2f})")


if __name__ == "__main__":
    main()
