"""tuning_regression: a change that made the server worse is undone first; no ping-pong."""

from helpers import evaluate, window_from
from sglang_tuner.changes.record import Change
from sglang_tuner.changes.verdict import MetricVerdict, Verdict, WindowSummary
from sglang_tuner.judge import Judgement, TargetJudgement
from sglang_tuner.model.advice import Action, Confidence, Finding, Health, Pass
from sglang_tuner.model.flags import FlagHistory
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.plan import plan_target
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.rules.scheduling import SCHEDULER_TOO_CONSERVATIVE
from sglang_tuner.rules.verification import TUNING_REGRESSION

EMPTY = WindowSummary(0.0, 0.0, {}, {})
WORSE = MetricVerdict("gen_throughput", "hurt", 0.88, 0.85, 0.91, 4000.0, 3520.0)


def _change(verdict: str = "hurt", rule: str | None = "scheduler_too_conservative") -> Change:
    return Change(
        target="t", at=1_795_000_000.0, kind="flags",
        before={"--schedule-conservativeness": "1"}, after={"--schedule-conservativeness": "0.3"},
        rule=rule, profile="offline", before_window=EMPTY, due=0.0, asked_ratio=0.7,
        verdict=Verdict(verdict, "worse: gen_throughput", (WORSE,)),
    )  # fmt: skip


def test_tuning_regression_reverts_a_change_that_hurt():
    out = evaluate(
        TUNING_REGRESSION, window_from(), config=ServerConfig(schedule_conservativeness=0.3),
        changes=(_change(),),
    )  # fmt: skip
    assert isinstance(out, Finding)
    assert out.action.text == "revert: --schedule-conservativeness 0.3 -> 1"
    assert out.action.flags() == {"--schedule-conservativeness": "1"}
    assert out.evidence == (
        "after --schedule-conservativeness 1 -> 0.3 (2026-11-18 11:06 UTC, asked by "
        "scheduler_too_conservative): gen_throughput -12% [-15%, -9%]"
    )


def test_tuning_regression_silent_once_reverted_or_when_it_helped():
    reverted = ServerConfig(schedule_conservativeness=1.0)
    assert isinstance(evaluate(TUNING_REGRESSION, window_from(), config=reverted,
                               changes=(_change(),)), Pass)  # fmt: skip
    current = ServerConfig(schedule_conservativeness=0.3)
    assert isinstance(evaluate(TUNING_REGRESSION, window_from(), config=current,
                               changes=(_change("helped"),)), Pass)  # fmt: skip


def _finding(ratio: float) -> TargetJudgement:
    action = Action(
        "--schedule-conservativeness 1 -> 0.3", "--schedule-conservativeness", "1", "0.3"
    )
    finding = Finding("usage low", action, Confidence.HIGH, ratio, 60)
    rule = SCHEDULER_TOO_CONSERVATIVE
    judgement = Judgement(rule, Health.OK, rule.severity, finding)
    return TargetJudgement(0.0, True, 60, (judgement,))


ORDER = {rule.id: i for i, rule in enumerate(ALL_RULES)}


def test_advice_that_hurt_is_held_until_its_evidence_is_clearly_stronger():
    plan = plan_target("t", _finding(0.75), FlagHistory(), ORDER, (_change(),))
    assert plan.next is None
    (held,) = plan.held
    assert held.reason.startswith(
        "it asked for --schedule-conservativeness 1 -> 0.3, which hurt (worse: gen_throughput)"
    )
    assert "condition held in 75% of samples, 70% then" in held.reason
    stronger = plan_target("t", _finding(0.95), FlagHistory(), ORDER, (_change(),))
    assert stronger.next is not None and stronger.next.rule == "scheduler_too_conservative"


def test_advice_that_did_not_ask_for_the_change_is_not_held():
    plan = plan_target("t", _finding(0.75), FlagHistory(), ORDER, (_change(rule=None),))
    assert plan.next is not None


def _policy_change(verdict: str | None) -> Change:
    """fcfs -> lpm, asked by fcfs_with_prefix_reuse; judged `verdict` (None: not yet)."""
    judged = None if verdict is None else Verdict(verdict, "tokens/s", (WORSE,))
    return Change(
        target="t", at=1_795_000_000.0, kind="flags", before={"--schedule-policy": "fcfs"},
        after={"--schedule-policy": "lpm"}, rule="fcfs_with_prefix_reuse", profile="offline",
        before_window=EMPTY, due=0.0, asked_ratio=1.0, verdict=judged,
    )  # fmt: skip


def _back_to_fcfs() -> TargetJudgement:
    from sglang_tuner.rules.scheduling_policy import LPM_WITHOUT_PREFIX_REUSE

    action = Action("--schedule-policy lpm -> fcfs", "--schedule-policy", "lpm", "fcfs")
    finding = Finding("hits 0.05", action, Confidence.HIGH, 0.9, 60)
    judgement = Judgement(LPM_WITHOUT_PREFIX_REUSE, Health.OK, LPM_WITHOUT_PREFIX_REUSE.severity,
                          finding)  # fmt: skip
    return TargetJudgement(0.0, True, 60, (judgement,))


def test_plan_holds_the_reverse_of_the_latest_change_no_lpm_fcfs_flip_flop():
    for verdict in (None, "helped", "no_change", "inconclusive"):
        plan = plan_target("t", _back_to_fcfs(), FlagHistory(), ORDER, (_policy_change(verdict),))
        assert plan.next is None, verdict
        assert plan.held[0].reason.startswith("it would undo the latest change")
    # once the change is judged to hurt, undoing it is what tuning_regression asks for
    plan = plan_target("t", _back_to_fcfs(), FlagHistory(), ORDER, (_policy_change("hurt"),))
    assert plan.next is not None and plan.next.action.suggested == "fcfs"


def test_tuning_regression_reverts_a_request_cap_in_the_flags_units_under_dp_attention():
    # the change record keeps --max-running-requests per DP rank; the flag counts all 8 ranks
    change = Change(
        target="t", at=1_795_000_000.0, kind="flags",
        before={"--max-running-requests": "128"}, after={"--max-running-requests": "116"},
        rule="batch_too_large_for_latency", profile="online", before_window=EMPTY, due=0.0,
        verdict=Verdict("hurt", "worse: gen_throughput", (WORSE,)),
    )  # fmt: skip
    config = ServerConfig(
        max_running_requests=928, max_running_requests_per_dp=116, dp_size=8, tp_size=8,
        enable_dp_attention=True,
    )  # fmt: skip
    out = evaluate(TUNING_REGRESSION, window_from(), config=config, changes=(change,))
    assert isinstance(out, Finding)
    assert out.action.flags() == {"--max-running-requests": "1024"}
    assert out.action.text == "revert: --max-running-requests 928 -> 1024"


def test_an_unattributed_revert_that_hurt_is_not_reverted_again():
    first = _change()  # 1 -> 0.3, hurt
    back = Change(
        target="t", at=1_795_000_900.0, kind="flags",
        before={"--schedule-conservativeness": "0.3"}, after={"--schedule-conservativeness": "1"},
        rule=None, profile="offline", before_window=EMPTY, due=0.0,
        verdict=Verdict("hurt", "worse: ttft_p99_seconds", (WORSE,)),
    )  # fmt: skip
    config = ServerConfig(schedule_conservativeness=1.0)
    out = evaluate(TUNING_REGRESSION, window_from(), config=config, changes=(first, back))
    assert isinstance(out, Pass) and "each setting costs something" in out.detail
