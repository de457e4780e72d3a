"""The randomized matrix's report: every objective of every applied change, predicted beside
measured, and the issue's Done-when figures.

Objectives: tokens/s, TTFT p99, ITL p50, ITL p99 (relative change of the metric itself: +0.1 =
10 % more tokens/s or a 10 % slower latency) and crashes (restarts in 10 simulated minutes,
after minus before). A prediction covers its own objective (its gain, turned into the metric's
change) and the objectives in its `effects`. Harm: tokens/s down > 10 %, TTFT p99 up > 50 %,
ITL p50 up > 25 %, crashes where there were none, or a service level met before and missed after
(SERVICE_LEVELS); `stated` when the prediction gave a cost past the same guard in advance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

OBJECTIVES = ("tok/s", "TTFT p99", "ITL p50", "ITL p99", "crashes")
FIELD = {
    "tok/s": "gen_throughput", "TTFT p99": "ttft_p99", "ITL p50": "itl_p50",
    "ITL p99": "itl_p99", "crashes": "restarts",
}  # fmt: skip
GUARDS = {"tok/s": 0.10, "TTFT p99": 0.50, "ITL p50": 0.25}
AGREE = 0.05  # within ±5 percentage points
CEILING_SEEDS = (2, 4, 8)  # traffic seeds a change's measurement is taken on (`ceiling`)
WARN_GAIN = 0.05
# The longest TTFT a measurement can count: `closed_loop.measured_runs` reads 600 simulated
# seconds after a 60-s warm-up, and a request counts its TTFT only once its first token comes,
# so none past 660 s is ever seen. A p99 within a tenth of that on both sides of a change says
# that more than 1 % of the requests waited about the whole measurement, not by how much.
TTFT_HORIZON = 0.9 * (600.0 + 60.0)
# The matrix's own service levels (the daemon's per-target ones are not read here): online
# TTFT p99 <= 10 s and ITL p50 <= 100 ms; offline none beyond the tokens/s guard.
SERVICE_LEVELS: Mapping[str, Mapping[str, float]] = {
    "online": {"ttft_p99": 10.0, "itl_p50": 0.100},
    "offline": {},
}


def measured(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Each objective's measured change (objectives a crash-looping start cannot give: absent;
    so are the latencies of a start that crashed and restarted less after the change: before,
    only the requests that finished between crashes had a latency at all; and TTFT p99 where
    both sides reach the measurement's horizon, `TTFT_HORIZON`: censored, the change unknown)."""
    out: dict[str, float] = {}
    looped = _looped(before, after)
    for objective, name in FIELD.items():
        b, a = before[name], after[name]
        if objective == "crashes":
            out[objective] = a - b
        elif looped and objective != "tok/s":
            continue
        elif objective == "TTFT p99" and censored(b) and censored(a):
            continue
        elif b and not math.isnan(b) and not math.isnan(a):
            out[objective] = (a - b) / b
    return out


def censored(ttft_p99: float) -> bool:
    """A TTFT p99 at the measurement's horizon (`TTFT_HORIZON`): a bound, not a figure."""
    return not math.isnan(ttft_p99) and ttft_p99 >= TTFT_HORIZON


def _looped(before: Mapping[str, float], after: Mapping[str, float]) -> bool:
    """The start crashed and the change made it crash less: its latencies before are those of
    the few requests that finished between crashes."""
    return before["restarts"] > 0 and after["restarts"] < before["restarts"]


def predicted(change: Mapping[str, Any]) -> dict[str, tuple[float, float | None, float | None]]:
    """objective -> (metric change, low, high) the advice predicted, its own objective first."""
    out: dict[str, tuple[float, float | None, float | None]] = {}
    gain, objective = change.get("predicted"), change.get("objective") or "tok/s"
    if gain is not None and objective != "crashes":
        sign = 1.0 if objective == "tok/s" else -1.0
        low, high = change.get("low"), change.get("high")
        bounds = sorted(sign * x for x in (low, high)) if None not in (low, high) else [None, None]
        out[objective] = (sign * gain, bounds[0], bounds[1])
    for name, value in (change.get("effects") or {}).items():
        if name != objective and name in FIELD and name != "crashes":
            out[name] = (float(value[0]), float(value[1]), float(value[2]))
    return out


def harms(change: Mapping[str, Any], profile: str) -> list[str]:
    """The objectives the applied change harmed (see the module docstring)."""
    m, out = change["measured"], []
    for objective, guard in GUARDS.items():
        worse = -m[objective] if objective == "tok/s" and objective in m else m.get(objective, 0.0)
        if worse > guard:
            out.append(objective)
    if change["before"]["restarts"] == 0 and change["after"]["restarts"] > 0:
        out.append("crashes")
    if _looped(change["before"], change["after"]):
        return out  # a crash loop's latencies were no level kept (see `measured`)
    for name, limit in SERVICE_LEVELS[profile].items():
        b, a = change["before"][name], change["after"][name]
        if b <= limit < a:
            out.append(f"SLO {name} <= {limit:g}")
    return out


def stated(change: Mapping[str, Any], objective: str, central: bool = False) -> bool:
    """The prediction gave this cost (past its guard, or past the matrix's service level from
    where the metric stood) before the change was applied: its central value past the guard,
    or its stated range reaching past it with the measured cost inside that range (the advice
    said "tok/s -10 % (-13 to -7 %)" and -11.5 % came). `central`: the central value alone."""
    if objective.startswith("SLO "):
        return _level_crossing_stated(change, objective)
    p = change["predicted_by"].get(objective)
    if p is None or objective not in GUARDS:
        return False  # crashes and service levels: no prediction states them
    sign = -1.0 if objective == "tok/s" else 1.0
    if sign * p[0] > GUARDS[objective]:
        return True
    measured = change["measured"].get(objective)
    if central or measured is None or len(p) < 3:
        return False
    low, high = min(p[1], p[2]), max(p[1], p[2])
    return max(sign * low, sign * high) > GUARDS[objective] and low <= measured <= high


def _level_crossing_stated(change: Mapping[str, Any], harm: str) -> bool:
    """'SLO itl_p50 <= 0.1': the metric's predicted change, applied to its value before the
    change, passes the level (crashes and unpredicted metrics: never stated)."""
    name, _, limit = harm[4:].partition(" <= ")
    objective = next((o for o, field in FIELD.items() if field == name), None)
    p = change["predicted_by"].get(objective) if objective else None
    before = change["before"].get(name)
    if p is None or before is None:
        return False
    return before * (1 + p[0]) > float(limit)


def agrees(change: Mapping[str, Any], four: bool = False) -> bool | None:
    """Within ±5 pp on every objective it predicts and that was measured (None: none);
    `four`: against the change measured on four traffic seeds (`measured_four`)."""
    key = "measured_four" if four else "measured"
    seen = [o for o in change["predicted_by"] if o in change.get(key, {})]
    if not seen:
        return None
    return all(within(change, o, four) for o in seen)


def not_shown_off(change: Mapping[str, Any]) -> bool | None:
    """On every objective it predicts, the change measured on four traffic seeds is not shown
    to differ from the prediction by more than 5 pp: the miss past ±5 pp lies inside twice the
    standard error of the measured difference (`noise_four`), the traffic's own spread. None
    where the change was not measured on four seeds or on nothing it predicts."""
    measured_four = change.get("measured_four")
    if measured_four is None:
        return None
    seen = [o for o in change["predicted_by"] if o in measured_four]
    if not seen:
        return None
    return all(near(change, o) for o in seen)


def near(change: Mapping[str, Any], objective: str) -> bool:
    """`objective`'s prediction within ±5 pp of the change measured on four traffic seeds, or
    off by no more than 5 pp plus twice the standard error of that measured difference."""
    if within(change, objective, four=True):
        return True
    noise = (change.get("noise_four") or {}).get(objective, 0.0)
    miss = abs(change["predicted_by"][objective][0] - change["measured_four"][objective])
    return miss <= AGREE + noise


def ceiling(change: Mapping[str, Any], seeds: int) -> float | None:
    """The chance that a prediction naming each objective's true change lands within ±5 pp on
    every objective it predicts, of the change measured on `seeds` traffic seeds: the bar's own
    measurement, with no error of the predictor's. Each objective's measured change scatters
    about the true one with the traffic seeds' spread: twice the standard error of the
    difference over four seeds is one seed's scatter, and `seeds`' is that over sqrt(seeds)
    (normal; the objectives taken as independent). The spread of each seed's own difference
    (`noise_paired_four`: both sides ran the same traffic) where the run kept it, else the
    spread of the two sides' means (`noise_four`, which counts the traffic's share twice: a
    floor on the chance). None where the change was not measured on four seeds or on nothing
    it predicts."""
    noise = change.get("noise_paired_four") or change.get("noise_four")
    measured_four = change.get("measured_four")
    if noise is None or measured_four is None:
        return None
    seen = [o for o in change["predicted_by"] if o in measured_four]
    if not seen:
        return None
    chance = 1.0
    for objective in seen:
        spread = noise.get(objective, 0.0) / math.sqrt(seeds)
        if spread > 0:
            chance *= math.erf(AGREE / (spread * math.sqrt(2)))  # P(|N(0, spread)| <= 5 pp)
    return chance


def in_range(change: Mapping[str, Any], objective: str) -> bool:
    """The change measured on four traffic seeds lies inside the range its prediction stated
    for `objective`, widened by the measurement's own spread (`noise_four`)."""
    p, m = change["predicted_by"][objective], change["measured_four"][objective]
    if p[1] is None or p[2] is None:
        return False
    noise = (change.get("noise_four") or {}).get(objective, 0.0)
    return min(p[1], p[2]) - noise <= m <= max(p[1], p[2]) + noise


def within(change: Mapping[str, Any], objective: str, four: bool = False) -> bool:
    """The prediction of `objective` within ±5 pp of the measured change (`four`: the change
    measured on four traffic seeds); where one side's TTFT p99 is censored (`censored`), the
    measured change is a bound, and a prediction past it the way the bound allows agrees:
    before at the horizon, the true change is at most the measured one (the true p99 before
    was longer); after at the horizon, at least."""
    tag = "_four" if four else ""
    p, m = change["predicted_by"][objective][0], change["measured" + tag][objective]
    if abs(p - m) <= AGREE:
        return True
    if objective != "TTFT p99":
        return False
    before, after = change["before" + tag]["ttft_p99"], change["after" + tag]["ttft_p99"]
    if censored(before) and not censored(after):
        return p <= m
    if censored(after) and not censored(before):
        return p >= m
    return False


def _pct(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x * 100:+.1f}"


def _cell(change: Mapping[str, Any], objective: str) -> str:
    m = change["measured"].get(objective)
    if objective == "crashes":
        b, a = change["before"]["restarts"], change["after"]["restarts"]
        return f"{b:.1f}→{a:.1f}"
    p = change["predicted_by"].get(objective)
    meas = _pct(m)
    if p is None:
        return f"– / {meas}"
    rng = f" [{_pct(p[1])}, {_pct(p[2])}]" if p[1] is not None and p[2] is not None else ""
    return f"{_pct(p[0])}{rng} / {meas}"


def change_table(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """One row per applied change: predicted [range] / measured % on each objective."""
    rows = [
        "| seed | server | kind | version | profile | start | rule | change | severity | "
        + " | ".join(f"{o} pred / meas %" for o in OBJECTIVES[:-1])
        + " | crashes/10 min | within ±5 pp | harm (stated?) |",
        "|---" * (9 + len(OBJECTIVES)) + "|---|---|",
    ]
    for cell in cells:
        for ch in cell["changes"]:
            ok = agrees(ch)
            harm = ", ".join(f"{h} ({'stated' if stated(ch, h) else 'not stated'})"
                             for h in ch["harms"]) or "-"  # fmt: skip
            rows.append(
                f"| {cell['seed']} | {cell['name']} | {cell['kind']} | {cell['version']} | "
                f"{cell['profile']} | {cell['start']} | {ch['rule']} | `{ch['action']}` | "
                f"{ch['severity']} | "
                + " | ".join(_cell(ch, o) for o in OBJECTIVES)
                + f" | {'-' if ok is None else 'yes' if ok else 'no'} | {harm} |"
            )
    return rows


def objective_table(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per objective: changes measured on it, predicted on it, within ±5 pp, mean errors."""
    changes = [ch for c in cells for ch in c["changes"] if not ch["stability"]]
    rows = [
        "| objective | throughput/latency changes measured | predicted | within ±5 pp | "
        "mean predicted % | mean measured % | mean abs error pp |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for o in OBJECTIVES[:-1]:
        seen = [ch for ch in changes if o in ch["measured"]]
        pred = [ch for ch in seen if o in ch["predicted_by"]]
        ok = [ch for ch in pred if within(ch, o)]
        p = [ch["predicted_by"][o][0] for ch in pred]
        m = [ch["measured"][o] for ch in pred]
        err = [abs(a - b) for a, b in zip(p, m, strict=True)]
        rows.append(
            f"| {o} | {len(seen)} | {len(pred)} | {len(ok)} | {_mean(p)} | {_mean(m)} | "
            f"{_mean(err)} |"
        )
    four = [ch for ch in changes if ch.get("measured_four") is not None]
    if not four:
        return rows
    rows += [
        "",
        "The same changes measured again on four traffic seeds (seeds 1-4; the spread: twice "
        "the standard error of the measured difference):",
        "",
        "| objective | predicted and measured | within ±5 pp | not shown off by more than 5 pp "
        "| inside the stated range (or its spread) | median spread pp | mean abs error pp |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for o in OBJECTIVES[:-1]:
        pred = [ch for ch in four if o in ch["measured_four"] and o in ch["predicted_by"]]
        ok = [ch for ch in pred if within(ch, o, four=True)]
        close = [ch for ch in pred if near(ch, o)]
        spread = [(ch.get("noise_four") or {}).get(o, 0.0) for ch in pred]
        err = [abs(ch["predicted_by"][o][0] - ch["measured_four"][o]) for ch in pred]
        median = f"{statistics.median(spread) * 100:.1f}" if spread else "-"
        covered = sum(1 for ch in pred if in_range(ch, o))
        rows.append(
            f"| {o} | {len(pred)} | {len(ok)} | {len(close)} | {covered} | {median} | "
            f"{_mean(err)} |"
        )
    return rows


def _mean(xs: Sequence[float]) -> str:
    return "-" if not xs else f"{statistics.fmean(xs) * 100:+.1f}"


def figures(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Done-when figures as numbers."""
    ran = [c for c in cells if not c.get("error")]
    changes = [(c, ch) for c in ran for ch in c["changes"]]
    harmful = [(c, ch) for c, ch in changes if ch["harms"]]
    unstated = [(c, ch) for c, ch in harmful if not all(stated(ch, h) for h in ch["harms"])]
    by_central = [
        (c, ch) for c, ch in harmful if not all(stated(ch, h, central=True) for h in ch["harms"])
    ]
    tl = [ch for _c, ch in changes if not ch["stability"]]
    tl_pred = [ch for ch in tl if agrees(ch) is not None]
    margins = [ch for _c, ch in changes if ch["stability"]]
    worth = [c for c in ran if c.get("best_gain") is not None and c["best_gain"] >= WARN_GAIN]
    need = [c for c in worth if owed(c)]
    two = [c for c in ran if (c.get("best_gain_two") or -1.0) >= WARN_GAIN and owed(c)]
    # gains the traffic seeds' spread covers (runs before the noise test carry no raw figure)
    noise = [
        c for c in ran if owed(c) and c not in need
        and (c.get("best_gain_raw") or -1.0) >= WARN_GAIN
    ]  # fmt: skip
    return {
        "runs": len(ran), "errors": len(cells) - len(ran), "applied": len(changes),
        "harmful": len(harmful), "harmful_unstated": len(unstated),
        "harmful_unstated_central": len(by_central),
        "tl_changes": len(tl), "tl_predicted": len(tl_pred),
        "tl_within": sum(1 for ch in tl_pred if agrees(ch)),
        "tl_four": sum(1 for ch in tl if agrees(ch, four=True) is not None),
        "tl_within_four": sum(1 for ch in tl if agrees(ch, four=True)),
        "tl_not_shown_off": sum(1 for ch in tl if not_shown_off(ch)),
        **{
            f"tl_ceiling_{n}": sum(c for ch in tl if (c := ceiling(ch, n)) is not None)
            for n in CEILING_SEEDS
        },
        "margins": len(margins),
        "margins_within": sum(1 for ch in margins if agrees(ch)),
        "need_warning": len(need), "warned": sum(1 for c in need if c["warned"]),
        "warned_held": sum(1 for c in need if c.get("warned_held")),
        "crash_fixed": sum(1 for c in need if c.get("crash_fixed")),
        "not_owed": len(worth) - len(need),
        "need_two": len(two), "warned_two": sum(1 for c in two if c["warned"]),
        "in_noise": len(noise), "in_noise_warned": sum(1 for c in noise if c["warned"]),
        "not_owed_held": sum(1 for c in worth if not owed(c) and c.get("warned_held")),
        "outgained": sum(1 for c in need if not c["warned"] and outgained(c) is not None),
        "no_prediction": sum(1 for _c, ch in changes if ch["predicted"] is None),
        "multi_objective": sum(1 for _c, ch in changes if len(ch["predicted_by"]) > 1),
    }  # fmt: skip


def summary(cells: Sequence[Mapping[str, Any]], wall_seconds: float | None = None) -> list[str]:
    """The Done-when figures, then the harmful changes and the unwarned starts one by one."""
    f = figures(cells)
    share = f["tl_within"] / max(1, f["tl_predicted"])
    lines = [
        f"- runs {f['runs']} (errors {f['errors']}), applied changes {f['applied']}"
        + (f", wall {wall_seconds / 60:.1f} min" if wall_seconds else ""),
        f"- applied changes that break a service level or cost > 10 % tok/s, > 50 % TTFT p99, "
        f"> 25 % ITL p50 or start crashes: {f['harmful']}; not stated in advance: "
        f"{f['harmful_unstated']} (by the central prediction alone, its range not read: "
        f"{f['harmful_unstated_central']})",
        f"- starts whose best single change gains ≥ 5 % within the guards its profile keeps: "
        f"{f['need_warning']}; warned: {f['warned']} ({f['crash_fixed']} of them a crash "
        f"stopped by a warning on another flag); held back with the trade stated (a service "
        f"level of the daemon's it would break): {f['warned_held']} (the gain measured on "
        f"four traffic seeds; on the loop's two alone: {f['warned_two']} of {f['need_two']}); "
        f"not counted: {f['in_noise']} whose gain is inside the four seeds' spread (twice the "
        f"standard error of the difference), {f['in_noise_warned']} of them warned; of the "
        f"unwarned, {f['outgained']} gained more by the daemon's changes on other flags",
        f"- starts whose best single change gains ≥ 5 % only by breaking a guard its profile "
        f"keeps (not counted above): {f['not_owed']}; the daemon held {f['not_owed_held']} "
        f"of them with the trade stated",
        f"- throughput/latency changes within ±5 pp on every objective they predict: "
        f"{f['tl_within']} of {f['tl_predicted']} predicted ({share:.0%}); "
        f"{f['tl_changes']} applied; crash and OOM-margin changes apart: {f['margins']} "
        f"({f['margins_within']} within ±5 pp)",
        *(
            [
                f"- the same changes measured again on four traffic seeds: within ±5 pp on "
                f"every objective {f['tl_within_four']} of {f['tl_four']}; not shown to miss "
                f"by more than 5 pp (the miss inside twice the standard error of the measured "
                f"difference): {f['tl_not_shown_off']} of {f['tl_four']}",
                "- the bar's own measurement: a prediction naming each change's true effect "
                "would land within ±5 pp on every objective in about "
                + ", ".join(
                    f"{f[f'tl_ceiling_{n}']:.0f} ({f[f'tl_ceiling_{n}'] / f['tl_four']:.0%}) "
                    f"measured on {n} traffic seeds"
                    for n in CEILING_SEEDS
                )
                + f" of {f['tl_four']} (each objective scattered by the four seeds' spread)",
            ]
            if f["tl_four"]
            else []
        ),
        f"- predictions covering more than one objective: {f['multi_objective']} of "
        f"{f['applied']}; applied without a prediction: {f['no_prediction']}",
        "- harmful applied changes (seed, server, change: predicted / measured %):",
    ]
    for c in cells:
        for ch in c["changes"]:
            if ch["harms"]:
                lines.append(
                    f"  - seed {c['seed']} {c['name']} {c['version']} {c['profile']} "
                    f"({c['start']}): {ch['rule']} `{ch['action']}` — "
                    + "; ".join(f"{o} {_cell(ch, o)}" for o in OBJECTIVES)
                    + f" — harms {', '.join(ch['harms'])}"
                )
    lines.append("- starts worth ≥ 5 % not warned (seed, server, start, best single change):")
    lines += [
        f"  - seed {c['seed']} {c['name']} {c['version']} {c['profile']}: {c['start']} "
        f"(setting it back: {_pct(c['best_gain'])} %)"
        + (f"; held: {next(h for h in c['held'] if h)}" if c.get("warned_held") else "")
        + (f"; the daemon's changes on other flags gained {_pct(gain)} %"
           if (gain := outgained(c)) is not None else "")
        for c in cells
        if c.get("best_gain") is not None and c["best_gain"] >= WARN_GAIN and not c["warned"]
        and owed(c)
    ]  # fmt: skip
    lines.append("- starts whose fix breaks a guard its profile keeps (seed, server, start):")
    lines += [
        f"  - seed {c['seed']} {c['name']} {c['version']} {c['profile']}: {c['start']} "
        f"(setting it back: {_pct(c['best_gain'])} %, harms {', '.join(c['best_harms'])})"
        for c in cells
        if c.get("best_gain") is not None and c["best_gain"] >= WARN_GAIN and not owed(c)
    ]
    return lines


def outgained(cell: Mapping[str, Any]) -> float | None:
    """What the daemon's applied changes on other flags gained together (from the first one's
    start to the last one's end, measured as the best single change is: tokens/s offline,
    online the most of tokens/s and the falls of TTFT p99 and ITL p50, none where tokens/s
    falls past its guard), where that is at least the mis-set flag's own fix and none of them
    did harm it had not stated; else None. Such a start is still counted unwarned."""
    changes = [ch for ch in cell["changes"] if not ch["stability"]]
    best = cell.get("best_gain")
    if not changes or best is None:
        return None
    if any(not all(stated(ch, h) for h in ch["harms"]) for ch in changes):
        return None
    m = measured(changes[0]["before"], changes[-1]["after"])
    tokens = m.get("tok/s", 0.0)
    if cell["profile"] == "offline" or tokens < -GUARDS["tok/s"]:
        gain = tokens
    else:
        gain = max(tokens, -m.get("TTFT p99", 0.0), -m.get("ITL p50", 0.0))
    return gain if gain >= best else None


def owed(cell: Mapping[str, Any]) -> bool:
    """Whether setting the mis-set flag back is a warning the daemon owes: not where it breaks
    a guard the profile keeps. Online keeps every guard and service level; offline asks for
    throughput, so a latency cost is a trade to state (as an applied change may), while
    tokens/s, crashes and service levels stay guards."""
    costs = cell.get("best_harms") or []
    if cell["profile"] == "online":
        return not costs
    return not [h for h in costs if h in {"tok/s", "crashes"} or h.startswith("SLO ")]
