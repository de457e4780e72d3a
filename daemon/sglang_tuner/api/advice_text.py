"""/advice as a text report: per target the order of its changes, then each advice block once
(the next change first); the one-shot commands (`check`, `demo`) print it too, every server
judged listed, a clean one included."""

from collections.abc import Collection, Iterable

from sglang_tuner.api.schemas.advice_response import (
    AdviceList,
    AdviceOut,
    NoDataOut,
    PlanOut,
    ServiceLevelOut,
    StepOut,
)

CLEAN = "no advice: every rule that could judge it passed"
# A one-shot command has no target settings: what the daemon's setting does, said as the
# command that does it (or where the daemon takes it).
_ONE_SHOT_HINTS = (
    ("set the target's log_file", "give its log (check --log FILE; the daemon: log_file)"),
    (
        "set the target's gpu_model or dcgm_url",
        "give it as check --gpu-model NAME (the daemon: gpu_model or dcgm_url)",
    ),
)


def advice_text(out: AdviceList, servers: Iterable[str] = (), one_shot: bool = False) -> str:
    """`/advice` as a fixed-width text report: per target its next change, then its advice
    blocks; then what has no data. `servers`: every server judged, so a clean one is listed
    too; `one_shot`: a command's final report (no "retry in": nothing retries)."""
    when = out.evaluated_at or "never (no evaluation has finished yet)"
    no_data = sum(out.no_data_counts.values()) or len(out.no_data)
    servers = set(servers)
    plans = {p.target: p for p in out.plans}
    targets = sorted({a.target for a in out.data} | out.last_change.keys())
    targets = sorted({*targets, *(t for t, p in plans.items() if p.next or p.after or p.held)})
    every = sorted(servers | set(targets))
    counted = f"{len(every)} server(s), " if servers else ""
    head = f"{counted}{out.count} advice, {no_data} no data, {len(out.errors)} error(s)"
    lines = [f"sglang-tuner advice, evaluated {when}: {head}", ""]
    for target in every:
        if target not in targets:
            lines += [f"== {target}", CLEAN, ""]
            continue
        own = [a for a in out.data if a.target == target]
        lines += _target_block(
            target, plans.get(target), own, out.last_change.get(target),
            out.inferred_profiles.get(target),
        )  # fmt: skip
    if not every:
        lines += ["No advice is pending or firing.", ""]
    rows = [(n.target, n.rule or "(target)", _why(n, one_shot)) for n in out.no_data]
    if not rows:  # the compact answer: a count per target, the reasons one request away
        rows = [
            (name, f"{n} rule(s)", f"why: /advice/{name}")
            for name, n in sorted(out.no_data_counts.items())
        ]
    lines += _no_data(rows)
    lines += _table("errors:", [(e.target, e.rule, e.error) for e in out.errors])
    return "\n".join(lines).rstrip() + "\n"


def _target_block(
    target: str,
    plan: PlanOut | None,
    advice: list[AdviceOut],
    change: str | None,
    profile: str | None = None,
) -> list[str]:
    """The target's plan (its advice named by rule), then each advice block once, in the
    plan's order."""
    last = [f"last change: {change}"] if change else []
    inferred = [f"profile: {profile}"] if profile else []
    shown = {a.rule for a in advice}
    lines = [f"== {target}", *inferred, *_plan_lines(plan, shown), *last, ""]
    order = [] if plan is None or plan.next is None else [plan.next.rule]
    order += [s.rule for s in plan.after] if plan is not None else []
    for a in sorted(advice, key=lambda a: order.index(a.rule) if a.rule in order else len(order)):
        lines += [
            f"{a.target}  {a.rule}",
            f"  {a.severity.upper()} {a.state} since {a.since}, {a.confidence} confidence",
            f"  summary:  {a.summary}",
            f"  evidence: {a.evidence}",
            f"  action:   {a.action.text}",
            *([f"  expected: {a.action.expected}"] if a.action.expected else []),
            *([f"  note:     {a.action.note}"] if a.action.note else []),
            f"  source:   {a.source}",
            "",
        ]
    return lines


def _plan_lines(plan: PlanOut | None, shown: Collection[str] = ()) -> list[str]:
    """`next change: ...`, then what follows it and what is held back; an advice whose block
    follows is named by its rule (its action and expectation are said there, once)."""
    if plan is not None and plan.next is None and plan.after:
        # only hints conditioned on a profile the traffic suggests stand (`plan.py`)
        hints = [f"  hint:     {_step(then, shown)}" for then in plan.after]
        head = "next change: none: only hints that hold on a guessed profile"
        head += " (set the profile to act)"
        return [head, *hints, *_held_lines(plan)]
    if plan is None or plan.next is None:
        return ["next change: none", *_held_lines(plan)]
    step = plan.next
    lines = [f"next change: {_step(step, shown)}"]
    if step.rule not in shown and step.action.expected:
        lines.append(f"  expected: {step.action.expected}")
    lines += [f"  trade:    {step.trade}"] if step.trade else []
    for then in plan.after:
        lines += [f"  then:     {_step(then, shown)}"]
        lines += [f"            {then.trade}"] if then.trade else []
    return lines + _held_lines(plan)


def _held_lines(plan: PlanOut | None) -> list[str]:
    """What the plan holds back, and the service levels it held its changes to."""
    if plan is None:
        return []
    lines = [f"  held:     {h.rule}: {h.reason}" for h in plan.held]
    levels = [_level(s) for s in plan.service_levels]
    return lines + ([f"  levels:   {', '.join(levels)}"] if levels else [])


def _level(s: ServiceLevelOut) -> str:
    """'ITL p50 ≤ 30 ms (default; 42 ms now, not met)'."""
    if s.now is None:
        return f"{s.level} ({s.source})"
    now = f"{s.now:.0f} tok/s" if s.objective == "tok/s" else _seconds(s.now)
    return f"{s.level} ({s.source}; {now} now{'' if s.met else ', not met'})"


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _step(step: StepOut, shown: Collection[str]) -> str:
    """A plan step: its rule where its advice block follows, else its action and rule."""
    if step.rule in shown:
        return f"{step.rule} (below)"
    return f"{step.action.text}   ({step.rule})"


def _why(n: NoDataOut, one_shot: bool) -> str:
    if one_shot:
        reason = n.reason
        for daemon, command in _ONE_SHOT_HINTS:
            reason = reason.replace(daemon, command)
        return reason
    return f"{n.reason} (retry in {n.retry_after_seconds:g}s)"


def _no_data(rows: list[tuple[str, str, str]]) -> list[str]:
    """The rules without data: one line each, except that a reason shared by several (every
    crash rule of every target without a log, say) is said once, under the targets and rules
    it holds for."""
    by_reason: dict[str, list[tuple[str, str]]] = {}
    for target, rule, reason in rows:
        by_reason.setdefault(reason, []).append((target, rule))
    single = [
        (t, r, reason) for reason, pairs in by_reason.items() if len(pairs) == 1 for t, r in pairs
    ]
    lines = _table("no data (why nothing could be judged yet):", single)
    shared = {reason: pairs for reason, pairs in by_reason.items() if len(pairs) > 1}
    if shared and not lines:
        lines = ["no data (why nothing could be judged yet):", ""]
    grouped = []
    for reason, pairs in shared.items():
        targets = sorted({t for t, _ in pairs})
        who = targets[0] if len(targets) == 1 else f"{len(targets)} targets"
        rules = ", ".join(sorted({r for _, r in pairs}))
        grouped += [f"  {who}: {rules}", f"      {reason}"]
    return [*lines[:-1], *grouped, ""] if grouped else lines


def _table(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    """A titled three-column block whose first two columns are padded to a common width."""
    if not rows:
        return []
    w1, w2 = (max(len(r[i]) for r in rows) for i in (0, 1))
    return [title, *(f"  {a:<{w1}}  {b:<{w2}}  {c}" for a, b, c in rows), ""]
