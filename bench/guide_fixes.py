"""What the tuning guide's fixes do in the simulator: each scenario before and after its fix.

For every scenario with a server-side fix, measures the scenario as is and with the guide's
recommended value plus a few alternatives, over the same simulated window and seed, and prints
a Markdown table (docs/simulator.md, "Effect of the guide's fixes").

    PYTHONPATH=daemon python bench/guide_fixes.py [--seconds 600] [--seed 1] [--seeds 3]
        [--version 0.5.23] [--only A,B] [--load FIELD=VALUE ...]
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from sglang_sim import SCENARIOS, apply_flags, apply_load, measure

# scenario -> (flag, [values]); the first value is the guide's recommendation
FIXES: dict[str, tuple[str, list[str]]] = {
    "scheduler_too_conservative": ("--schedule-conservativeness", ["0.3", "2.7", "1.0", "0.1"]),
    "retraction_storm": ("--schedule-conservativeness", ["1.3", "0.6", "1.0", "2.0"]),
    "mem_fraction_too_low": ("--mem-fraction-static", ["0.89", "0.8", "0.85", "0.92"]),
    "mem_fraction_too_high": ("--mem-fraction-static", ["0.89", "0.85", "0.8"]),
    "prefill_oom": ("--chunked-prefill-size", ["4096", "2048", "8192", "16384"]),
    "crash_loop": ("--mem-fraction-static", ["0.8", "0.7", "0.9"]),
    "cuda_graph_not_covering": ("--cuda-graph-max-bs-decode", ["256", "160", "512"]),
    "lpm_no_prefix_reuse": ("--schedule-policy", ["fcfs"]),
    "fcfs_heavy_prefix_reuse": ("--schedule-policy", ["lpm"]),
    "tp_where_dp_fits": ("tp/dp", ["dp 4", "dp 2 tp 2"]),
    "online_batch_too_large": ("--max-running-requests", ["256", "128", "512"]),
    "healthy": ("other options", ["--kv-cache-dtype fp8_e4m3", "--quantization fp8",
                                  "--enable-torch-compile"]),
}  # fmt: skip
TP_DP = {
    "dp 4": {"--tp-size": "1", "--dp-size": "4"},
    "dp 2 tp 2": {"--tp-size": "2", "--dp-size": "2"},
}


def flags_for(flag: str, value: str, version: str) -> dict[str, str]:
    """The flag change a row applies, in the version's spelling."""
    if flag == "tp/dp":
        return TP_DP[value]
    if flag == "other options":
        name, _, arg = value.partition(" ")
        return {name: arg or "true"}
    if flag == "--cuda-graph-max-bs-decode" and version < "0.5.14":
        return {"--cuda-graph-max-bs": value}
    return {flag: value}


def row(label: str, config, seconds: float, seeds: list[int]) -> str:
    """One table row: means over the seeds (gen tok/s also with its spread)."""
    runs = [measure(config, seconds=seconds, seed=seed, warmup=60.0) for seed in seeds]

    def mean(name: str) -> float:
        values = [getattr(m, name) for m in runs if not math.isnan(getattr(m, name))]
        return sum(values) / len(values) if values else math.nan

    def ms(x: float) -> str:
        return "-" if math.isnan(x) else f"{x * 1000:,.0f}"

    gen = [m.gen_throughput for m in runs]
    spread = (max(gen) - min(gen)) / 2
    return (
        f"| {label} | {mean('gen_throughput'):,.0f} ± {spread:,.0f} | {mean('token_usage'):.2f} | "
        f"{mean('retractions_per_min'):.1f} | {ms(mean('ttft_p99'))} | {ms(mean('itl_p99'))} | "
        f"{mean('restarts'):.1f} | {mean('requests_finished'):,.0f} |"
    )


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3, help="runs per row (seed, seed+1, ...)")
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--only", help="comma-separated scenarios")
    parser.add_argument("--load", action="append", default=[], help="FIELD=VALUE over each load")
    args = parser.parse_args()
    load = dict(item.split("=", 1) for item in args.load)
    seeds = list(range(args.seed, args.seed + args.seeds))
    print(
        "| scenario / change | gen tok/s (± half range) | token usage | retractions/min | "
        "TTFT p99 ms | ITL p99 ms | crashes | requests |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    wanted = args.only.split(",") if args.only else list(FIXES)
    for scenario in wanted:
        flag, values = FIXES[scenario]
        base = SCENARIOS[scenario].for_version(args.version)
        base = replace(base, load=apply_load(base.load, load))
        print(row(f"**{scenario}** (as is)", base, args.seconds, seeds), flush=True)
        for i, value in enumerate(values):
            changed = apply_flags(base, flags_for(flag, value, args.version))
            note = " (guide)" if i == 0 and flag not in ("tp/dp", "other options") else ""
            label = f"{flag} {value}{note}" if flag not in ("other options",) else value
            print(row(label, changed, args.seconds, seeds), flush=True)


if __name__ == "__main__":
    main()
