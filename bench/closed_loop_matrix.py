"""The closed loop over model x GPU pairs: the server model's predicted effect of each applied
change beside its measured effect.

For each pair (a `sglang_physics` model on a GPU, with its parallel layout), each scenario that
applies and each mis-set start, and each seed of the simulated traffic, `closed_loop.run_one`
lets the daemon advise and applies its warnings. Each applied change carries the server model's
prediction (gain on the profile's objective, with a range) and the measured effect (the mean of
`sglang_sim.measure` over seeds 1-3, before and after). Mis-set starts also measure the best
single change (the flag set back to the scenario's value) to say whether the daemon should have
warned.

    PYTHONPATH=daemon python bench/closed_loop_matrix.py [--quick] [--pair 8b/L40S ...]
                                                         [--jobs 2] [--json FILE]
"""

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from closed_loop import APPLIED, Applied, Figures, Run, run_one  # noqa: E402
from sglang_physics import GPUS, MODELS, Deployment, memory_split  # noqa: E402
from sglang_sim import SCENARIOS, ServerSpec  # noqa: E402
from sglang_sim.fleet import check_spec, config_for  # noqa: E402
from sglang_tuner.rules import RULES_BY_ID  # noqa: E402

AGREE = 0.05  # predicted and measured within 5 percentage points
HURT = -0.02  # an applied change that costs its objective more than 2 %
WARN_GAIN = 0.05  # a mis-set start whose best single change gains this much needs a warning
VERSION = "0.5.23"
LIMIT_SECONDS = 5400.0

# name -> (GPU, model, flags of its layout)
PAIRS: Mapping[str, tuple[str, str, dict[str, str]]] = {
    "8b/H100": ("H100", "llama-3.1-8b", {}),
    "8b/L40S": ("L40S", "llama-3.1-8b", {}),
    "1b/L4": ("L4", "llama-3.2-1b", {}),
    "qwen3-30b-a3b/H100": ("H100", "qwen3-30b-a3b", {}),
    "70b/H100x4": ("H100", "llama-3.1-70b", {"tp_size": "4"}),
    "dsv3/H200x8-dpattn": (
        "H200", "deepseek-v3",
        {"tp_size": "8", "dp_size": "8", "enable_dp_attention": "true", "ep_size": "8"},
    ),
}  # fmt: skip
LOW = "low"  # a third of the usual KV pool: 0.5 for the 8B on an L40S (low_fraction)
# Starts no scenario uses, each with the flag the best single change sets back.
MISSET: Mapping[str, tuple[str, dict[str, str]]] = {
    "busy+mem_fraction=low": ("healthy", {"mem_fraction_static": LOW}),
    "busy+conservativeness=2.2": ("healthy", {"schedule_conservativeness": "2.2"}),
    "busy+cuda_graph_max_bs=48": ("healthy", {"cuda_graph_max_bs": "48"}),
}
# Layout scenarios of the 8B (tp 4 where dp fits) only mean something for the 8B.
ONLY_8B = frozenset({"tp_where_dp_fits"})
QUICK_PAIRS = ("8b/L40S", "1b/L4", "qwen3-30b-a3b/H100")
QUICK_SERVERS = ("healthy", "busy+mem_fraction=low", "busy+conservativeness=2.2")


@dataclass
class Cell:
    """One pair x server x seed: the run, and for a mis-set start its best single change."""

    pair: str
    server: str
    seed: int
    run: Run | None = None
    skipped: str = ""
    best_gain: float | None = None  # mis-set starts: the flag set back, measured
    best_flag: str = ""
    changes: list[dict[str, Any]] = field(default_factory=list)


def servers(quick: bool) -> dict[str, tuple[str, dict[str, str]]]:
    every: dict[str, tuple[str, dict[str, str]]] = {
        s: (s, {}) for s in SCENARIOS if s not in ("metrics_disabled", "idle")
    }
    every.update(MISSET)
    return {k: every[k] for k in QUICK_SERVERS} if quick else every


def spec_flags(pair: str, flags: Mapping[str, str]) -> dict[str, str]:
    merged = {**PAIRS[pair][2], **flags}
    if merged.get("mem_fraction_static") == LOW:
        merged["mem_fraction_static"] = f"{low_fraction(pair):.2f}"
    return merged


def low_fraction(pair: str) -> float:
    """The weights' share of GPU memory plus a third of what 0.89 leaves the KV pool."""
    gpu, model, flags = PAIRS[pair]
    layout = Deployment(
        tp=int(flags.get("tp_size", 1)), dp=int(flags.get("dp_size", 1)),
        dp_attention=flags.get("enable_dp_attention") == "true", ep=int(flags.get("ep_size", 1)),
    )  # fmt: skip
    split = memory_split(GPUS[gpu], MODELS[model], layout, 0.89)
    weights = split.weight_gib / split.total_gib
    return round(weights + (0.89 - weights) / 3, 2)


def applies(pair: str, scenario: str, flags: Mapping[str, str]) -> str:
    """'' when the scenario runs on the pair, else why not."""
    gpu, model, _ = PAIRS[pair]
    if scenario in ONLY_8B and model != "llama-3.1-8b":
        return "an 8B-on-tp-4 layout scenario"
    try:
        check_spec(ServerSpec(scenario, VERSION, flags=tuple(flags.items()), gpu=gpu, model=model))
    except ValueError as exc:
        return str(exc)
    return ""


def best_single(pair: str, scenario: str, flags: Mapping[str, str], misset: str) -> float | None:
    """Gain on tokens/s of setting the mis-set flag back to the scenario's value."""
    gpu, model, _ = PAIRS[pair]
    spec = ServerSpec(scenario, VERSION, flags=tuple(flags.items()), gpu=gpu, model=model)
    bad = config_for(spec)
    good_flags = {k: v for k, v in flags.items() if k != misset}
    good = config_for(replace(spec, flags=tuple(good_flags.items())))
    before, after = Figures.of(bad).gen_throughput, Figures.of(good).gen_throughput
    return None if before <= 0 else after / before - 1


def run_cell(args: tuple[str, str, int]) -> Cell:
    pair, server, seed = args
    scenario, start = {**servers(False)}[server]
    flags = spec_flags(pair, start)
    cell = Cell(pair, server, seed)
    cell.skipped = applies(pair, scenario, flags)
    if cell.skipped:
        return cell
    gpu, model, _ = PAIRS[pair]
    name = f"{pair}:{server}:{seed}"
    cell.run = asyncio.run(
        run_one(name, scenario, VERSION, flags, LIMIT_SECONDS, gpu=gpu, model=model, seed=seed)
    )
    cell.changes = [_change(c) for c in cell.run.changes]
    if server in MISSET and seed == 1:
        (misset,) = start
        cell.best_flag = misset
        cell.best_gain = best_single(pair, scenario, flags, misset)
    return cell


def _change(c: Applied) -> dict[str, Any]:
    return {
        "rule": c.rule, "action": c.action, "severity": c.severity, "objective": c.objective,
        "predicted": c.predicted, "low": c.predicted_low, "high": c.predicted_high,
        "measured": c.measured, "prediction": c.prediction, "flags": c.flags,
        "tok_s": (c.before.gen_throughput, c.after.gen_throughput), "verdict": c.verdict,
    }  # fmt: skip


# -- report ------------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f} %"


def report(cells: Sequence[Cell]) -> str:
    """Per applied change, predicted beside measured; then the summary figures."""
    rows = [
        "| pair | server | seed | rule | change | severity | predicted | range | measured | "
        "within ±5 pp |\n|---|---|---|---|---|---|---|---|---|---|"
    ]
    ran = [c for c in cells if c.run is not None]
    for cell in ran:
        for c in cell.changes:
            ok = _agrees(c)
            rng = (
                f"{_pct(c['low'])} … {_pct(c['high'])}"
                if c["low"] is not None and c["high"] is not None
                else "-"
            )
            rows.append(
                f"| {cell.pair} | {cell.server} | {cell.seed} | {c['rule']} | `{c['action']}` | "
                f"{c['severity']} | {_pct(c['predicted'])} {c['objective']} | {rng} | "
                f"{_pct(c['measured'])} | {'yes' if ok else 'no' if ok is False else '-'} |"
            )
    rows += ["", *summary(cells)]
    return "\n".join(rows)


def _server_side(cell: Cell) -> list[str]:
    """Warning or critical advice left at the end that an operator applies to the server (not
    client-side advice: fewer requests, more replicas)."""
    left = cell.run.still_advised if cell.run else []
    return [line for line in left if "client:" not in line]


def _safety(change: Mapping[str, Any]) -> bool:
    """A crash or OOM-margin change: judged by crashes, its throughput cost is the price."""
    rule = RULES_BY_ID.get(change["rule"])
    return rule is not None and rule.stability


def _agrees(c: Mapping[str, Any]) -> bool | None:
    if c["predicted"] is None or c["measured"] is None:
        return None
    return bool(abs(c["predicted"] - c["measured"]) <= AGREE)


def summary(cells: Sequence[Cell]) -> list[str]:
    ran = [c for c in cells if c.run is not None]
    changes = [ch for c in ran for ch in c.changes]
    predicted = [ch for ch in changes if ch["predicted"] is not None]
    agree = [ch for ch in predicted if _agrees(ch)]
    hurts = [
        (c.pair, c.server, c.seed, ch["action"], ch["measured"])
        for c in ran
        for ch in c.changes
        if ch["measured"] is not None and ch["measured"] < HURT and not _safety(ch)
    ]
    margins = [ch for ch in changes if _safety(ch) and (ch["measured"] or 0.0) < HURT]
    quiet = [c for c in ran if not _server_side(c) and len(c.changes) <= 2]
    pairs = sorted({c.pair for c in ran})
    scen = sorted({c.server for c in ran})
    seeds = sorted({c.seed for c in ran})
    lines = [
        f"- pairs {len(pairs)} ({', '.join(pairs)}); servers {len(scen)}; seeds {seeds}; "
        f"runs {len(ran)} (skipped {len(cells) - len(ran)})",
        f"- applied changes {len(changes)}: mean {len(changes) / max(1, len(ran)):.2f} per run; "
        f"runs ending with no server-side warning after <= 2 changes: {len(quiet)} of "
        f"{len(ran)}",
        *(
            f"  - not: {c.pair} {c.server} seed {c.seed}: {len(c.changes)} change(s); left: "
            f"{'; '.join(_server_side(c)) or 'none'}"
            for c in ran
            if c not in quiet
        ),
        f"- with a prediction: {len(predicted)} of {len(changes)}; within ±5 pp: {len(agree)} "
        f"of {len(predicted)} ({len(agree) / max(1, len(predicted)):.0%}), "
        f"{len(agree) / max(1, len(changes)):.0%} of all applied changes",
        f"- applied changes hurting their objective by > 2 %: {len(hurts)}",
        *(f"  - {p} {s} seed {d}: `{a}` {_pct(m)}" for p, s, d, a, m in hurts),
        f"- crash and OOM-margin changes (judged by crashes) costing > 2 % tok/s: {len(margins)}"
        f" ({', '.join(sorted({m['rule'] for m in margins})) or '-'}); predicted as a cost in "
        f"{sum(1 for m in margins if (m['predicted'] or 0.0) < 0)}",
    ]
    lines += _misset_lines(cells)
    lines += ["- predicted and measured apart by more than 5 pp:"]
    lines += [
        f"  - {c.pair} {c.server} seed {c.seed}: {ch['rule']} `{ch['action']}` predicted "
        f"{_pct(ch['predicted'])}, measured {_pct(ch['measured'])}"
        for c in ran
        for ch in c.changes
        if _agrees(ch) is False
    ]
    lines += ["- applied without a prediction:"]
    lines += [
        f"  - {c.pair} {c.server} seed {c.seed}: {ch['rule']} `{ch['action']}` ({ch['prediction']})"
        for c in ran
        for ch in c.changes
        if ch["predicted"] is None
    ]
    return lines


def _misset_lines(cells: Sequence[Cell]) -> list[str]:
    out = ["- mis-set starts (best single change: the flag set back; warned = applied as one):"]
    for cell in cells:
        if cell.best_gain is None:
            continue
        runs = [c for c in cells if (c.pair, c.server) == (cell.pair, cell.server) and c.run]
        flag = "--" + cell.best_flag.replace("_", "-")
        warned = [
            any(ch["severity"] in {str(s) for s in APPLIED} and _sets(ch, flag) for ch in c.changes)
            for c in runs
        ]
        need = cell.best_gain >= WARN_GAIN
        out.append(
            f"  - {cell.pair} {cell.server}: best single change {_pct(cell.best_gain)} tok/s; "
            f"{'needs' if need else 'needs no'} warning; warned in {sum(warned)} of "
            f"{len(warned)} seeds"
        )
    return out


def _sets(change: Mapping[str, Any], flag: str) -> bool:
    return any(f.startswith(flag) for f in change["flags"])


def cells_for(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    pairs = args.pair or (QUICK_PAIRS if args.quick else tuple(PAIRS))
    seeds = (1,) if args.quick else (1, 2, 3)
    return [(p, s, d) for p in pairs for s in servers(args.quick) for d in seeds]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 pairs x 3 servers x 1 seed")
    parser.add_argument("--pair", action="append", choices=list(PAIRS), help="repeatable")
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    parser.add_argument("--json", type=Path, help="also write the cells as JSON")
    args = parser.parse_args(argv)
    todo = cells_for(args)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        cells = []
        for cell in pool.map(run_cell, todo):
            print(f"  {cell.pair} {cell.server} seed {cell.seed}: "
                  f"{cell.skipped or f'{len(cell.changes)} change(s)'}",
                  file=sys.stderr, flush=True)  # fmt: skip
            cells.append(cell)
    print(report(cells))
    if args.json:
        payload = [
            {**asdict(c), "run": None, "still_advised": c.run.still_advised if c.run else []}
            for c in cells
        ]
        args.json.write_text(json.dumps(payload, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
