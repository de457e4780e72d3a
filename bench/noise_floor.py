"""The matrix's measurement noise: the same server measured twice, A/A.

The closed-loop matrix (`closed_loop_matrix.py`) judges a change by `closed_loop.Figures.of`:
the mean of `sglang_sim.measure` over traffic seeds 1 and 2, 10 simulated minutes each. This
measures each drawn start (no change at all) under seeds 1-2 and again under seeds 3-4 and
reports how often the two agree within ±5 points on each objective: no prediction can agree with
a measurement more often than the measurement agrees with itself.

`--paired MATRIX.json` measures what the matrix compares instead: the effect of each applied
change (before and after under the same traffic seeds), under seeds 1-2 as the matrix did and
again under seeds 3-4. The daemon's run does not depend on the judging seeds, so the same
changes are applied; how often the two effects agree within ±5 points on every objective the
change predicted is the most a perfect predictor of the expected effect could score.

    PYTHONPATH=daemon python bench/noise_floor.py --seed 31000 --runs 60 [--perturb 0.25]
    PYTHONPATH=daemon python bench/noise_floor.py --paired docs/matrix/perturbed-31000-slots.json
                                                  [--per-side 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import closed_loop  # noqa: E402
import closed_loop_matrix  # noqa: E402
from matrix_cases import draw  # noqa: E402
from matrix_report import AGREE, measured  # noqa: E402
from sglang_sim.fleet import config_for  # noqa: E402
from sglang_sim.measure import measure  # noqa: E402

OBJECTIVES = ("tok/s", "TTFT p99", "ITL p50", "ITL p99")
FIGURES = ("gen_throughput", "ttft_p99", "itl_p50", "itl_p99", "restarts")


def twice(seed: int, spread: float) -> dict[str, float]:
    """The start of case `seed` measured under traffic seeds (1, 2) and (3, 4): the relative
    change between the two means on each objective, as the matrix computes a change."""
    case = draw(seed, spread)
    config = config_for(case.spec())
    means = []
    for seeds in ((1, 2), (3, 4)):
        runs = [measure(config, seconds=600.0, seed=s) for s in seeds]
        means.append({f: statistics.fmean(getattr(m, f) for m in runs) for f in FIGURES})
    return measured(means[0], means[1])


def rerun(seed: int, spread: float, traffic: tuple[int, ...]) -> dict[str, Any]:
    """Cell `seed` run again with the changes judged under the `traffic` seeds."""
    closed_loop.SEEDS = traffic
    return closed_loop_matrix.run_case(seed, spread)


def paired(path: Path, jobs: int, per_side: int = 2) -> None:
    """Each applied change's effect under two disjoint sets of `per_side` traffic seeds: the
    matrix's own (1-2, read from `path`) beside 3-4; with more per side, both sets run again
    (1..n beside n+1..2n): what a longer measurement would make of the same changes."""
    cells = json.loads(path.read_text())["cells"]
    seeds = [c["seed"] for c in cells if any(not ch["stability"] for ch in c["changes"])]
    spread = cells[0]["spread"] if cells else 0.0
    sides = [tuple(range(1, per_side + 1)), tuple(range(per_side + 1, 2 * per_side + 1))]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        runs = [
            list(pool.map(rerun, seeds, [spread] * len(seeds), [side] * len(seeds)))
            for side in (sides if per_side != 2 else sides[1:])
        ]  # fmt: skip
    if per_side == 2:  # the matrix's own measurement is the first side
        runs.insert(0, [next(c for c in cells if c["seed"] == s) for s in seeds])
    first, again = (dict(zip(seeds, r, strict=True)) for r in runs)
    pairs = []
    for seed in seeds:
        a, b = first[seed]["changes"], again[seed]["changes"]
        for x, y in zip(a, b, strict=False):
            if x["action"] != y["action"] or x["stability"]:
                continue  # a run that went another way (none expected): not a pair
            objectives = [o for o in x["predicted_by"] if o in x["measured"] and o in y["measured"]]
            pairs.append({o: abs(x["measured"][o] - y["measured"][o]) for o in objectives})
    print(f"{len(pairs)} throughput/latency changes of {path.name} measured under traffic seeds "
          f"{sides[0][0]}-{sides[0][-1]} and {sides[1][0]}-{sides[1][-1]} (each before and after "
          "under the same seeds):")  # fmt: skip
    print(f"| objective | effect agrees within ±{AGREE * 100:.0f} pp | median abs difference pp |")
    print("|---|---:|---:|")
    for o in OBJECTIVES:
        diffs = [p[o] for p in pairs if o in p]
        within = sum(d <= AGREE for d in diffs)
        median = statistics.median(diffs) * 100 if diffs else float("nan")
        print(f"| {o} | {within} of {len(diffs)} | {median:.1f} |")
    every = sum(all(d <= AGREE for d in p.values()) for p in pairs if p)
    print(f"| every objective predicted | {every} of {sum(1 for p in pairs if p)} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=31000)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--perturb", type=float, default=0.25)
    parser.add_argument("--paired", type=Path, help="a matrix report's JSON: its changes' effects")
    parser.add_argument("--jobs", type=int, default=2, help="processes for --paired (default 2)")
    parser.add_argument(
        "--per-side", type=int, default=2, help="traffic seeds per measurement, --paired (2)"
    )
    args = parser.parse_args()
    if args.paired:
        paired(args.paired, args.jobs, args.per_side)
        return
    rows = []
    for seed in range(args.seed, args.seed + args.runs):
        try:
            rows.append(twice(seed, args.perturb))
        except Exception as error:  # noqa: BLE001 - a start that cannot run is skipped, said
            print(f"seed {seed}: {error}", file=sys.stderr)
    print(f"{len(rows)} starts measured twice (seeds {args.seed}..{args.seed + args.runs - 1}, "
          f"perturb {args.perturb}):")  # fmt: skip
    every = sum(all(abs(r.get(o, 0.0)) <= AGREE for o in OBJECTIVES) for r in rows)
    print(f"| objective | A/A within ±{AGREE * 100:.0f} pp | median abs difference pp |")
    print("|---|---:|---:|")
    for o in OBJECTIVES:
        diffs = [abs(r[o]) for r in rows if o in r]
        within = sum(d <= AGREE for d in diffs)
        median = statistics.median(diffs) * 100 if diffs else float("nan")
        print(f"| {o} | {within} of {len(diffs)} | {median:.1f} |")
    print(f"| every objective | {every} of {len(rows)} | |")


if __name__ == "__main__":
    main()
