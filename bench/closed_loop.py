"""The closed loop: the daemon advises, an operator applies the advice, the server gets better.

For each simulator scenario (and a few starts no scenario uses), on each SGLang version: the real
daemon (`Tuner`, its HTTP client, mapper, log follower, judge, planner and change log) watches a
simulated server over 127.0.0.1. Each time a warning or critical flag change is the plan's next
change and its advice is firing, it is applied as an operator would, `POST /_sim/restart` with
the action's flags as they are, up to four changes. Client-side advice is reported, not applied.

Time is simulated: the daemon and the server share a clock that the loop advances one scrape
interval at a time, so a run of an hour of server time takes seconds. Each change is measured
apart from the loop with `sglang_sim.measure` (10 simulated minutes, seeds 1-3, mean) before and
after, beside the daemon's own verdict on it.

    PYTHONPATH=daemon python bench/closed_loop.py [--version 0.5.23 --version 0.4.10]
                                                  [--scenario NAME ...] [--json FILE]
"""

import argparse
import asyncio
import functools
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from sglang_physics import Perturbation, gpu_named
from sglang_sim import SCENARIOS, Measurement, ServerSpec, SimFleet, measure
from sglang_sim.model import ServerConfig as SimConfig
from sglang_tuner.changes.record import FLAGS, Change, flag_values
from sglang_tuner.config.loading import load_settings
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.model.advice import AlertState, Severity

EPOCH = 1_790_000_000.0
STEP_SECONDS = 5.0
APPLIED = (Severity.WARNING, Severity.CRITICAL)
MAX_CHANGES = 4
ONLINE = frozenset({"online_batch_too_large"})
# Starts no scenario uses: the rules must not be tuned to the scenario list.
UNSCRIPTED: dict[str, tuple[str, dict[str, str]]] = {
    "busy+conservativeness=2.2": ("healthy", {"schedule_conservativeness": "2.2"}),
    "busy+mem_fraction=0.7": ("healthy", {"mem_fraction_static": "0.7"}),
    "busy+cuda_graph_max_bs=48": ("healthy", {"cuda_graph_max_bs": "48"}),
}
SEEDS = (1, 2, 3)
UNJUDGED = "none: flags before unknown"  # a server never up before the change


@dataclass
class Figures:
    """The mean of `measure` over SEEDS: what a change is judged by."""

    gen_throughput: float
    token_usage: float
    retractions_per_min: float
    ttft_p50: float
    ttft_p99: float
    itl_p50: float
    itl_p99: float
    restarts: float

    @classmethod
    def of(cls, config: SimConfig) -> "Figures":
        runs = measured_runs(config, SEEDS)
        mean = {f: statistics.fmean(getattr(m, f) for m in runs) for f in cls.__dataclass_fields__}
        return cls(**mean)


@functools.lru_cache(maxsize=128)
def measured_runs(config: SimConfig, seeds: tuple[int, ...]) -> tuple[Measurement, ...]:
    """`measure` of `config` on each traffic seed (configs are frozen; one process per cell)."""
    return tuple(measure(config, seconds=600.0, seed=s) for s in seeds)


@dataclass
class Applied:
    """One change the loop made, and what it did."""

    at_seconds: float
    rule: str
    action: str
    expected: str
    flags: dict[str, str]
    before: Figures
    after: Figures
    verdict: str | None = None  # the daemon's own, from its change log
    verdict_detail: str = ""  # its per-metric ratios
    attributed: str | None = None  # the rule the daemon says asked for it
    severity: str = ""  # the advice's severity when applied
    objective: str = ""  # what the prediction is about: tok/s, TTFT p99, ITL p50, crashes
    predicted: float | None = None  # the server model's gain on it (None: no prediction)
    predicted_low: float | None = None
    predicted_high: float | None = None
    prediction: str = ""  # its text
    # the other objectives the prediction moves: objective -> (metric change, low, high)
    effects: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    # the simulator's configurations before and after, to measure the change again on more
    # traffic seeds (the matrix's agreement with the measurement's own spread)
    configs: tuple[SimConfig, SimConfig] | None = field(default=None, repr=False)

    @property
    def measured(self) -> float | None:
        """The measured gain on the prediction's objective (a fall, for a latency)."""
        metric = {
            "tok/s": "gen_throughput", "TTFT p99": "ttft_p99", "ITL p50": "itl_p50",
            "crashes": "restarts",
        }  # fmt: skip
        name = metric.get(self.objective or "tok/s", "gen_throughput")
        before: float = getattr(self.before, name)
        after: float = getattr(self.after, name)
        if not before or math.isnan(before) or math.isnan(after):
            return None
        change = (after - before) / before
        return change if name == "gen_throughput" else -change


@dataclass(frozen=True)
class World:
    """What a drawn case sets beyond the scenario: the target's profile (None: by scenario),
    load fields over the scenario's, every knob at the version's defaults, the world's constants.
    """

    profile: str | None = None
    load: Mapping[str, str] = field(default_factory=dict)
    defaults: bool = False
    perturbation: Perturbation | None = None


@dataclass
class Run:
    """One scenario on one version, from first scrape to quiet (or the time limit)."""

    name: str
    version: str
    profile: str
    changes: list[Applied] = field(default_factory=list)
    client_advice: list[str] = field(default_factory=list)  # reported, not applied
    still_advised: list[str] = field(default_factory=list)  # warning/critical left at the end
    info_advice: list[str] = field(default_factory=list)
    # advice the plan held back at the end, with why (e.g. the service level it would break)
    held: list[str] = field(default_factory=list)
    seconds: float = 0.0


async def run_one(
    name: str,
    scenario: str,
    version: str,
    flags: Mapping[str, str],
    limit_seconds: float,
    gpu: str | None = None,
    model: str | None = None,
    seed: int = 0,
    world: "World | None" = None,
) -> Run:
    """Drive one server and the daemon until the advice is quiet for a window, or the limit.

    gpu, model: a `sglang_physics` GPU and model key (default: the scenario's 8B on an H100);
    seed: the simulated traffic's; world: profile, load, defaults and perturbation of a drawn
    case (the randomized matrix)."""
    world = world or World()
    profile = world.profile or ("online" if scenario in ONLINE else "offline")
    clock = [0.0]
    gpu_model = gpu_named(gpu).name if gpu else "NVIDIA H100 80GB HBM3"
    with tempfile.TemporaryDirectory() as tmp:
        log = str(Path(tmp) / "sglang.log")
        spec = ServerSpec(
            scenario, version, log_file=log, flags=tuple(flags.items()), gpu=gpu, model=model,
            load=tuple(world.load.items()), perturbation=world.perturbation,
            defaults=world.defaults,
        )  # fmt: skip
        fleet = SimFleet([spec], warmup_seconds=60.0, clock=lambda: clock[0], seed=seed)
        await fleet.start()
        url = fleet.urls[0]
        settings = load_settings(None, {
            "targets": [{"url": url, "name": name, "profile": profile, "log_file": log,
                         "gpu_model": gpu_model}],
            "database": str(Path(tmp) / "tuner.db"),
            "scrape_interval_seconds": STEP_SECONDS,
        })  # fmt: skip
        tuner = Tuner(settings, clock=lambda: EPOCH + clock[0])
        await tuner.start(scheduled=False)
        run = Run(name, version, profile)
        # Advice can fire only after a full window and the hold: wait that long past the start
        # and past each change, then for ten quiet minutes.
        settle = settings.window_seconds + settings.hold_for_seconds + 600.0
        last_change = 0.0
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                while clock[0] < limit_seconds:
                    clock[0] += STEP_SECONDS
                    await tuner.tick()
                    if run.changes and not _running(tuner, name, run.changes[-1].flags):
                        if clock[0] - last_change < settle:
                            continue  # the restart is not seen yet: advice about the old flags
                    if await _maybe_apply(tuner, fleet, http, url, name, clock[0], run):
                        last_change = clock[0]
                    elif _advised(tuner, name):
                        last_change = max(last_change, clock[0] - settle + 600.0)
                    if clock[0] - last_change >= settle:
                        break
        finally:
            _finish(tuner, name, run)
            run.seconds = clock[0]
            await tuner.stop()
            await fleet.stop()
    return run


def _awaiting_verdict(changes: Sequence[Change]) -> bool:
    """A change of flags the daemon has not judged yet (plain restarts are never judged)."""
    return any(c.kind == FLAGS and c.verdict is None for c in changes)


def _running(tuner: Tuner, name: str, flags: Mapping[str, str]) -> bool:
    """The daemon has read the applied flag values back from /server_info."""
    server = tuner.watch.servers.get(name)
    config = server.state.config if server is not None else None
    current = flag_values(config) if config else {}
    return all(current.get(flag) == value for flag, value in flags.items())


def _advised(tuner: Tuner, name: str) -> bool:
    """A warning or critical flag change is planned and firing, or a change awaits its verdict."""
    ev = tuner.state.latest()
    plan = ev.plans.get(name)
    firing = {a.rule for a in ev.advice if a.target == name and a.state == AlertState.FIRING}
    step = plan.next if plan else None
    pending_verdict = _awaiting_verdict(ev.changes.get(name, ()))
    planned = step is not None and step.severity in APPLIED and step.action.flag is not None
    return pending_verdict or (planned and step is not None and step.rule in firing)


async def _maybe_apply(
    tuner: Tuner, fleet: SimFleet, http: httpx.AsyncClient, url: str, name: str, now: float,
    run: Run,
) -> bool:  # fmt: skip
    """Apply the plan's next change if it is a firing warning/critical flag change."""
    ev = tuner.state.latest()
    target = ev.targets.get(name)
    plan = ev.plans.get(name)
    if target is None or plan is None or plan.next is None:
        return False  # (a crash-looping server is changed while down, as an operator would)
    if len(run.changes) >= MAX_CHANGES or _awaiting_verdict(ev.changes.get(name, ())):
        return False  # an operator waits for the verdict on the last change
    recorded = sum(1 for c in ev.changes.get(name, ()) if c.kind == FLAGS)
    settle = tuner.settings.window_seconds + tuner.settings.hold_for_seconds
    if recorded < len(run.changes) and now - run.changes[-1].at_seconds < settle:
        return False  # no verdict possible (flags unknown before): a window of new evidence
    if not run.changes and now < tuner.settings.verify_window_seconds + STEP_SECONDS:
        return False  # a server in service for a while: a full window before the first change
    step = plan.next
    firing = {a.rule for a in ev.advice if a.target == name and a.state == AlertState.FIRING}
    if step.rule not in firing or step.severity not in APPLIED:
        return False
    flags = step.action.flags()
    if not flags:
        line = f"{step.rule}: {step.action.text}"
        if line not in run.client_advice:
            run.client_advice.append(line)
        return False
    before = fleet.servers[0].model.config
    response = await http.post(f"{url}/_sim/restart", json={"flags": flags})
    response.raise_for_status()
    after = fleet.servers[0].model.config
    applied = Applied(
        now, step.rule, step.action.text, step.action.expected, flags,
        Figures.of(before), Figures.of(after), severity=str(step.severity),
        configs=(before, after),
    )  # fmt: skip
    p = step.action.prediction
    if p is not None:
        applied.objective, applied.predicted, applied.prediction = p.objective, p.gain, p.text()
        applied.predicted_low, applied.predicted_high = p.low, p.high
        applied.effects = {str(o): tuple(v) for o, v in getattr(p, "effects", {}).items()}
    run.changes.append(applied)
    return True


def _finish(tuner: Tuner, name: str, run: Run) -> None:
    """The daemon's verdicts on the changes, and the advice left standing."""
    ev = tuner.state.latest()
    judged = [c for c in ev.changes.get(name, ()) if c.kind == FLAGS]
    for applied in run.changes:  # the daemon's record of it: the first with these values
        change = next(
            (
                c
                for c in judged
                if c.at >= EPOCH + applied.at_seconds
                and all(c.after.get(f) == v for f, v in applied.flags.items())
            ),
            None,
        )
        if change is None:
            continue
        judged.remove(change)
        applied.attributed = change.rule
        if change.verdict is not None:
            applied.verdict = change.verdict.verdict
            applied.verdict_detail = "; ".join(
                f"{m.metric} {m.verdict} x{m.effect_ratio:.3f} [{m.low:.3f}, {m.high:.3f}]"
                if m.effect_ratio and m.low and m.high
                else f"{m.metric} {m.verdict}"
                for m in change.verdict.metrics
            )
    for advice in ev.advice:
        if advice.target != name or advice.state != AlertState.FIRING:
            continue
        line = f"{advice.rule}: {advice.action.text}"
        if advice.severity in APPLIED:
            run.still_advised.append(line)
        elif advice.action.flag:
            run.info_advice.append(line)
    plan = ev.plans.get(name)
    run.held = [
        f"{h.rule}: {h.action.text} — {h.reason}"
        for h in (plan.held if plan else ()) if h.severity in APPLIED and h.action.flag
    ]  # fmt: skip


# -- report ------------------------------------------------------------------------------------
def _pct(before: float, after: float) -> str:
    if before <= 0 or math.isnan(before) or math.isnan(after):
        return "n/a"  # e.g. a crash-looping server served nothing before
    return f"{(after - before) / before * 100:+.1f} %"


def _ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1e3:.0f}"


def _predicted(c: Applied) -> str:
    """The server model's gain beside the measured one on the same objective."""
    if c.predicted is None:
        return "none"
    measured = c.measured
    seen = "n/a" if measured is None else f"{measured * 100:+.1f} %"
    return f"{c.predicted * 100:+.1f} % {c.objective} (measured {seen})"


def report(runs: Sequence[Run]) -> str:
    """A markdown table per change, then one line per run."""
    head = (
        "| server | version | # | rule | change | predicted | tok/s | usage | retr/min | "
        "TTFT p99 s | ITL p99 ms | crashes/10 min | daemon's verdict |\n|---|---|---|---|---|"
        "---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for run in runs:
        for i, c in enumerate(run.changes, 1):
            b, a = c.before, c.after
            rows.append(
                f"| {run.name} | {run.version} | {i} | {c.rule} | `{c.action}` | "
                f"{_predicted(c)} | {b.gen_throughput:,.0f} → {a.gen_throughput:,.0f} "
                f"({_pct(b.gen_throughput, a.gen_throughput)}) | "
                f"{b.token_usage:.2f} → {a.token_usage:.2f} | "
                f"{b.retractions_per_min:.1f} → {a.retractions_per_min:.1f} | "
                f"{b.ttft_p99:.1f} → {a.ttft_p99:.1f} ({_pct(b.ttft_p99, a.ttft_p99)}) | "
                f"{_ms(b.itl_p99)} → {_ms(a.itl_p99)} ({_pct(b.itl_p99, a.itl_p99)}) | "
                f"{b.restarts:.1f} → {a.restarts:.1f} | {c.verdict or UNJUDGED} |"
            )
    rows.append("")
    rows.append("| server | version | changes | left at the end (warning/critical) | info | "
                "client-side (not applied) |\n|---|---|---|---|---|---|")  # fmt: skip
    for run in runs:
        rows.append(
            f"| {run.name} | {run.version} | {len(run.changes)} | "
            f"{'; '.join(run.still_advised) or 'none'} | {'; '.join(run.info_advice) or '-'} | "
            f"{'; '.join(run.client_advice) or '-'} |"
        )
    return "\n".join(rows)


def _servers(names: Sequence[str] | None) -> dict[str, tuple[str, dict[str, str]]]:
    every: dict[str, tuple[str, dict[str, str]]] = {
        s: (s, {}) for s in SCENARIOS if s not in ("metrics_disabled",)
    }
    every.update(UNSCRIPTED)
    if not names:
        return every
    unknown = [n for n in names if n not in every]
    if unknown:
        raise SystemExit(f"unknown server {', '.join(unknown)}; choose from {', '.join(every)}")
    return {n: every[n] for n in names}


async def main_async(args: argparse.Namespace) -> list[Run]:
    runs = []
    for version in args.version or ["0.5.23", "0.4.10"]:
        for name, (scenario, flags) in _servers(args.scenario).items():
            print(f"  {name} on {version} ...", file=sys.stderr, flush=True)
            runs.append(await run_one(name, scenario, version, flags, args.limit_minutes * 60))
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="append", help="SGLang version (repeatable)")
    parser.add_argument("--scenario", action="append", help="one server (repeatable)")
    parser.add_argument("--limit-minutes", type=float, default=90.0, help="simulated, per run")
    parser.add_argument("--json", type=Path, help="also write the runs as JSON")
    args = parser.parse_args(argv)
    runs = asyncio.run(main_async(args))
    print(report(runs))
    if args.json:
        payload: list[dict[str, Any]] = [
            asdict(replace(r, changes=[replace(c, configs=None) for c in r.changes])) for r in runs
        ]
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
