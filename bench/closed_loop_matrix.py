"""The closed loop over randomly drawn servers in a perturbed world: every objective of every
applied change, predicted beside measured.

Each run draws one case from its seed (`matrix_cases.draw`: model x GPU layout x SGLang version
x workload x profile x one mis-set flag, with the simulator's hardware and kernel constants each
drawn within ±`--perturb` of sglang_physics's; the daemon keeps its own). `closed_loop.run_one`
lets the daemon advise and applies its warnings; each applied change is measured before and
after (`sglang_sim.measure`, 10 simulated minutes, traffic seeds 1-2, mean) on tokens/s, TTFT
p99, ITL p50 and p99 and crashes, beside what its advice predicted, and again on traffic seeds
1-4 with their spread (twice the standard error of the measured difference: how many changes
the measurement cannot show to miss by more than 5 pp). A mis-set start also
measures the best single change (the flag set back, traffic seeds 1-4) to say whether the daemon
should have warned.

Run i of `--seed S` has seed S + i: `--seed S+i --runs 1` replays it (same case, same world).

    PYTHONPATH=daemon python bench/closed_loop_matrix.py [--seed S] [--runs N] [--perturb 0.25]
                                                         [--jobs 2] [--out PREFIX]
    PYTHONPATH=daemon python bench/closed_loop_matrix.py --merge A.json B.jsonl --out PREFIX

With --out, each finished run is appended to PREFIX.jsonl at once; the same command again skips
the seeds already there (a run stopped part-way resumes).
"""

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import closed_loop  # noqa: E402
import sglang_sim.decode as decode  # noqa: E402
from closed_loop import APPLIED, Applied, Figures, World, measured_runs, run_one  # noqa: E402
from matrix_cases import Case, draw  # noqa: E402
from matrix_report import (  # noqa: E402
    FIELD,
    GUARDS,
    change_table,
    harms,
    measured,
    objective_table,
    predicted,
    summary,
)
from sglang_sim.fleet import config_for  # noqa: E402
from sglang_tuner.rules import RULES_BY_ID  # noqa: E402

LIMIT_SECONDS = 5400.0
# Two traffic seeds per measurement here (closed_loop.py's report: three); a third costs half as
# much again over hundreds of runs.
closed_loop.SEEDS = (1, 2)
# Whether a start is owed a warning rests on its best single change gaining 5 %, a step inside
# the noise of two traffic seeds (one start measured +8.9, +2.0 and -0.8 % on three pairs):
# that change is measured on two more.
OWED_SEEDS = (3, 4)


def run_case(seed: int, spread: float) -> dict[str, Any]:
    """Draw the case of `seed`, run the loop on it, measure every applied change."""
    case = draw(seed, spread)
    cell: dict[str, Any] = {
        "seed": seed, "name": case.name, "kind": case.kind, "version": case.version,
        "profile": case.profile, "start": case.start, "defaults": case.defaults,
        "load": dict(case.load), "spread": spread, "perturbation": case.perturbation.as_dict(),
        "changes": [], "best_gain": None, "warned": False, "error": "",
    }  # fmt: skip
    try:
        world = World(case.profile, case.load, case.defaults, case.perturbation)
        run = asyncio.run(
            run_one(f"{case.name}:{seed}", "healthy", case.version, case.flags, LIMIT_SECONDS,
                    gpu=case.gpu, model=case.model, seed=seed, world=world)
        )  # fmt: skip
    except Exception:  # noqa: BLE001 - a run that fails is reported, the matrix goes on
        cell["error"] = traceback.format_exc(limit=4)
        return cell
    cell["changes"] = [_change(c, case.profile) for c in run.changes]
    cell["still_advised"] = run.still_advised
    cell["held"] = run.held
    if case.misset:
        best = best_single(case)
        (
            cell["best_gain"], cell["best_harms"], cell["start_restarts"],
            cell["best_gain_two"], cell["best_gain_raw"],
        ) = best  # fmt: skip
        flag = "--" + case.misset[0].replace("_", "-")
        applied = [ch for ch in cell["changes"] if ch["severity"] in {str(s) for s in APPLIED}]
        cell["warned"] = any(
            any(f.startswith(flag) or f == case.misset[0] for f in ch["flags"]) for ch in applied
        ) or any(flag in line for line in run.still_advised)  # fmt: skip
        # a start that crashed, stopped by a warning on another lever (a crash's other fix)
        cell["crash_fixed"] = (
            not cell["warned"]
            and cell["start_restarts"] > 0
            and any(ch["before"]["restarts"] > 0 and ch["after"]["restarts"] == 0 for ch in applied)
        )
        cell["warned"] = cell["warned"] or cell["crash_fixed"]
        # a warning the plan held back, saying the trade (a service level it would break)
        cell["warned_held"] = not cell["warned"] and any(
            line.split(" — ")[0].find(flag) >= 0 for line in run.held
        )
    return cell


def best_single(case: Case) -> tuple[float | None, list[str], float, float | None, float | None]:
    """(gain, harms, restarts of the start, gain on SEEDS alone, gain without the noise test)
    of setting the mis-set flag back, measured on SEEDS and OWED_SEEDS. The gain: tokens/s
    offline; online the larger fall of TTFT p99 and ITL p50 (or the tokens/s gain), none where
    tokens/s falls past its guard. A change of an objective inside the traffic seeds' own
    spread (`_noise`) counts as none: TTFT p99 is the slowest 1 % of requests, and on a server
    with nobody waiting it moves by half between two seeds of the same configuration.
    Its harms by the same guards an applied change is held to (`matrix_report.harms`): a fix
    that only gains by breaking one is no warning the daemon owes (`matrix_report.owed`)."""
    assert case.misset
    right = {k: v for k, v in case.flags.items() if k != case.misset[0]}
    configs = config_for(case.spec()), config_for(case.spec(right))
    two = _gain(*(Figures.of(c) for c in configs), case.profile)[0]
    runs = [measured_runs(c, (*closed_loop.SEEDS, *OWED_SEEDS)) for c in configs]
    bad, good = (_mean(r) for r in runs)
    raw, _ = _gain(bad, good, case.profile)
    gain, costs = _gain(bad, good, case.profile, _noise(*runs))
    return gain, costs, bad.restarts, two, raw


def _mean(runs: Sequence[Any]) -> Figures:
    fields = Figures.__dataclass_fields__
    return Figures(**{f: statistics.fmean(getattr(m, f) for m in runs) for f in fields})


def _noise(bad: Sequence[Any], good: Sequence[Any]) -> dict[str, float]:
    """Per objective, twice the standard error of the difference of the two means, relative to
    the first: a measured change inside it is not told apart from the traffic's spread."""
    out = {}
    for objective, name in FIELD.items():
        a, b = [getattr(m, name) for m in bad], [getattr(m, name) for m in good]
        base = statistics.fmean(a)
        if len(a) < 2 or len(b) < 2 or not base or any(math.isnan(x) for x in (*a, *b)):
            continue
        se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
        out[objective] = 2 * se / abs(base)
    return out


def _paired_noise(bad: Sequence[Any], good: Sequence[Any]) -> dict[str, float]:
    """Per objective, twice the standard error of the mean of each traffic seed's difference,
    relative to the first's mean: the two sides ran the same traffic, so what a seed's traffic
    does to both cancels in its difference (`_noise` counts it twice)."""
    out = {}
    for objective, name in FIELD.items():
        a, b = [getattr(m, name) for m in bad], [getattr(m, name) for m in good]
        base = statistics.fmean(a) if a else 0.0
        if len(a) < 2 or len(a) != len(b) or not base or any(math.isnan(x) for x in (*a, *b)):
            continue
        diffs = [(y - x) / abs(base) for x, y in zip(a, b, strict=True)]
        out[objective] = 2 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return out


def _gain(
    bad: Figures, good: Figures, profile: str, noise: Mapping[str, float] | None = None
) -> tuple[float | None, list[str]]:
    change = measured(asdict(bad), asdict(good))
    costs = harms({"measured": change, "before": asdict(bad), "after": asdict(good)}, profile)
    if noise:
        change = {o: 0.0 if abs(c) < noise.get(o, 0.0) else c for o, c in change.items()}
    tokens = change.get("tok/s")
    if bad.gen_throughput <= 0:
        return (1.0 if good.gen_throughput > 0 else None), costs  # never served
    if profile == "offline" or tokens is None or tokens < -GUARDS["tok/s"]:
        return tokens, costs
    return max(tokens, -change.get("TTFT p99", 0.0), -change.get("ITL p50", 0.0)), costs


def _change(c: Applied, profile: str) -> dict[str, Any]:
    rule = RULES_BY_ID.get(c.rule)
    out: dict[str, Any] = {
        "rule": c.rule, "action": c.action, "severity": c.severity, "objective": c.objective,
        "predicted": c.predicted, "low": c.predicted_low, "high": c.predicted_high,
        "effects": c.effects, "prediction": c.prediction, "flags": c.flags,
        "verdict": c.verdict, "stability": bool(rule is not None and rule.stability),
        "before": asdict(c.before), "after": asdict(c.after),
    }  # fmt: skip
    out["measured"] = measured(out["before"], out["after"])
    out["predicted_by"] = predicted(out)
    if c.configs is not None:  # the same change on four traffic seeds, and their spread
        runs = [measured_runs(cfg, (*closed_loop.SEEDS, *OWED_SEEDS)) for cfg in c.configs]
        bad, good = (_mean(r) for r in runs)
        out["before_four"], out["after_four"] = asdict(bad), asdict(good)
        out["measured_four"] = measured(out["before_four"], out["after_four"])
        out["noise_four"] = _noise(*runs)
        out["noise_paired_four"] = _paired_noise(*runs)
    out["harms"] = harms(out, profile)
    return out


def report(cells: Sequence[Mapping[str, Any]], wall: float | None, title: str) -> str:
    """The markdown file: the figures, the per-objective table, every applied change."""
    return "\n".join([
        f"# {title}", "", *summary(cells, wall), "", "## Per objective (throughput/latency "
        "changes; crash and OOM-margin changes apart)", "", *objective_table(cells), "",
        "## Every applied change (predicted [range] / measured, % change of the metric)", "",
        *change_table(cells), "",
    ])  # fmt: skip


def run_all(
    seeds: Sequence[int], spread: float, jobs: int, log: Path | None = None
) -> list[dict[str, Any]]:
    """Run every seed; each finished cell is appended to `log` (JSON lines) as it comes, and
    seeds already there for this spread are not run again (a run stopped part-way resumes)."""
    done = [c for c in read_cells(log) if c["spread"] == spread and c["seed"] in set(seeds)]
    cells = list({c["seed"]: c for c in done}.values())
    todo = [s for s in seeds if s not in {c["seed"] for c in cells}]
    if cells:
        print(f"  {len(cells)} seeds already in {log}; running {len(todo)}", file=sys.stderr)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_case, s, spread): s for s in todo}
        for future in as_completed(futures):
            cell = future.result()
            if log is not None:
                with log.open("a") as out:
                    out.write(json.dumps(cell, default=str) + "\n")
            n = len(cell["changes"])
            note = cell["error"].strip().splitlines()[-1] if cell["error"] else f"{n} change(s)"
            print(
                f"  seed {cell['seed']}: {cell['name']} {cell['version']} {cell['kind']} "
                f"{cell['profile']} {cell['start']}: {note}",
                file=sys.stderr,
                flush=True,
            )
            cells.append(cell)
    return sorted(cells, key=lambda c: c["seed"])


def read_cells(path: Path | None) -> list[dict[str, Any]]:
    """The cells of a JSON-lines log (none when there is no file)."""
    if path is None or not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="first run's seed (default: drawn, printed)")
    parser.add_argument("--runs", type=int, default=20, help="cases to draw (default 20)")
    parser.add_argument(
        "--perturb",
        type=float,
        default=0.25,
        help="spread of the world's constants, 0 = unperturbed (default 0.25)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--out", type=Path, help="write PREFIX.md and PREFIX.json")
    parser.add_argument("--merge", type=Path, nargs="+", help="report on earlier JSON parts")
    parser.add_argument(
        "--decode-block",
        type=int,
        default=decode.MIN_DECODE_BLOCK,
        help="decode steps the simulator runs at least between admissions while requests wait "
        f"(default {decode.MIN_DECODE_BLOCK}: after every step, as SGLang; 8 reproduces the "
        "bunched admission of earlier builds, bench/sim_granularity.py)",
    )
    args = parser.parse_args(argv)
    if args.decode_block < 1:
        parser.error(f"--decode-block must be at least 1, got {args.decode_block}")
    decode.MIN_DECODE_BLOCK = args.decode_block  # forked workers inherit it
    if not 0 <= args.perturb < 1:
        parser.error(f"--perturb must be in [0, 1), got {args.perturb}")
    if args.runs < 1 or args.jobs < 1:
        parser.error("--runs and --jobs must be at least 1")
    if args.merge:
        parts = [_part(p) for p in args.merge]
        merged = {c["seed"]: c for p in parts for c in p["cells"]}
        cells = sorted((rejudged(c) for c in merged.values()), key=lambda c: c["seed"])
        wall = sum(p.get("wall_seconds") or 0.0 for p in parts) or None
        spreads = {c["spread"] for c in cells}
        if len(spreads) > 1:
            parser.error(f"the parts mix worlds (perturb {sorted(spreads)}): merge one at a time")
        spread = spreads.pop() if spreads else args.perturb
    else:
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
        spread = args.perturb
        print(f"seed {seed}, runs {args.runs} (seeds {seed}..{seed + args.runs - 1}), "
              f"perturb {spread}", file=sys.stderr, flush=True)  # fmt: skip
        started = time.monotonic()
        log = args.out.with_suffix(".jsonl") if args.out else None
        cells = run_all(range(seed, seed + args.runs), spread, args.jobs, log)
        wall = time.monotonic() - started
    world = f"perturbed ±{spread:.0%}" if spread else "unperturbed"
    world += f", decode blocks of {args.decode_block}" if args.decode_block > 1 else ""
    seeds = f"seeds {cells[0]['seed']}..{cells[-1]['seed']}" if cells else "no seeds"
    text = report(cells, wall, f"Closed-loop matrix, {world}, {seeds}")
    print(text)
    if args.out:
        args.out.with_suffix(".md").write_text(text)
        payload = {"perturb": spread, "wall_seconds": wall, "cells": cells}
        args.out.with_suffix(".json").write_text(json.dumps(payload, indent=1, default=str))
    return 0


def rejudged(cell: dict[str, Any]) -> dict[str, Any]:
    """A merged cell's applied changes judged again from their before and after figures by
    this build's report (`measured`, `predicted`, `harms`): an earlier run read by today's
    rules. The starts' gains were measured on configurations the cell does not keep."""
    changes = []
    for change in cell.get("changes") or []:
        change = dict(change)
        change["measured"] = measured(change["before"], change["after"])
        if "before_four" in change:
            change["measured_four"] = measured(change["before_four"], change["after_four"])
        change["predicted_by"] = predicted(change)
        change["harms"] = harms(change, cell["profile"])
        changes.append(change)
    return {**cell, "changes": changes}


def _part(path: Path) -> dict[str, Any]:
    """A part to merge: a JSON report ({perturb, wall_seconds, cells}) or a JSON-lines log."""
    if path.suffix == ".jsonl":
        return {"cells": read_cells(path)}
    part: dict[str, Any] = json.loads(path.read_text())
    return part


if __name__ == "__main__":
    sys.exit(main())
