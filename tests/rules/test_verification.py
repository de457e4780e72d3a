"""tuning_regression: a change that made the server worse is undone first; no ping-pong."""

import dataclasses

import pytest
from helpers import evaluate, window_from
from sglang_tuner.changes.record import Change, ChangeLog
from sglang_tuner.changes.verdict import MetricVerdict, Verdict, WindowSummary
from sglang_tuner.judge import Judgement, TargetJudgement
from sglang_tuner.model.advice import Action, Confidence, Finding, Health, Pass
from sglang_tuner.model.flags import FlagHistory
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.window import Window
from sglang_tuner.plan import plan_target
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.rules.latency import BATCH_TOO_LARGE_FOR_LATENCY
from sglang_tuner.rules.scheduling import SCHEDULER_TOO_CONSERVATIVE
from sglang_tuner.rules.verification import TUNING_REGRESSION, predict_revert
from sglang_tuner.sources.server_info import parse_server_info

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


MAX_RUNNING = "--max-running-requests"


def _cap_set() -> Change:
    """--max-running-requests 2048 -> 113, asked by retractions_frequent; inconclusive."""
    return Change(
        target="t", at=1_795_000_000.0, kind="flags", before={MAX_RUNNING: "2048"},
        after={MAX_RUNNING: "113"}, rule="retractions_frequent", profile="online",
        before_window=EMPTY, due=0.0, asked_ratio=1.0,
        verdict=Verdict("inconclusive", "tokens/s", ()),
    )  # fmt: skip


def _moving(rule_id: str, current: str, suggested: str) -> TargetJudgement:
    from sglang_tuner.rules import RULES_BY_ID

    rule = RULES_BY_ID[rule_id]
    action = Action(f"{MAX_RUNNING} {current} -> {suggested}", MAX_RUNNING, current, suggested)
    finding = Finding("evidence", action, Confidence.HIGH, 0.9, 60)
    return TargetJudgement(0.0, True, 60, (Judgement(rule, Health.OK, rule.severity, finding),))


def test_plan_holds_a_number_moved_back_the_way_the_latest_change_came_no_cap_raise_cap():
    # a cap that stopped the retractions, then a raise that would fill the pool again: each is
    # right on the window the other leaves, a restart each time
    raise_ = _moving("scheduler_too_conservative", "113", "226")
    plan = plan_target("t", raise_, FlagHistory(), ORDER, (_cap_set(),))
    assert plan.next is None
    assert plan.held[0].reason.startswith(
        "it would move back the way of the latest change, --max-running-requests 2048 -> 113, "
        "asked by retractions_frequent (inconclusive)"
    )
    # the same way as the latest change: planned
    lower = plan_target("t", _moving("batch_too_large_for_latency", "113", "99"), FlagHistory(),
                        ORDER, (_cap_set(),))  # fmt: skip
    assert lower.next is not None
    # a crash's fix is never held by it
    oom = plan_target("t", _moving("decode_oom", "113", "226"), FlagHistory(), ORDER,
                      (_cap_set(),))  # fmt: skip
    assert oom.next is not None and oom.next.rule == "decode_oom"


def _dp_attention(flag: int | None, per_rank: int) -> ServerConfig:
    """`/server_info` of 0.5.23 on DeepSeek-V3 with `--tp-size 8 --dp-size 8
    --enable-dp-attention` (`--max-running-requests flag`; None: left to the server): it says
    `attn_dp_size` 8 and `dp_size` 1, and each scheduler its share of the cap."""
    return parse_server_info({
        "version": "0.5.23", "tp_size": 8, "dp_size": 1, "attn_dp_size": 8,
        "max_running_requests": flag, "schedule_conservativeness": 0.3,
        "internal_states": [{"effective_max_running_requests_per_dp": per_rank}] * 8,
    })  # fmt: skip


def _cap_change(verdict: Verdict, rule: str | None = "batch_too_large_for_latency") -> Change:
    return Change(
        target="t", at=1_795_000_000.0, kind="flags", before={MAX_RUNNING: "1024"},
        after={MAX_RUNNING: "928"}, rule=rule, profile="online", before_window=EMPTY, due=0.0,
        verdict=verdict,
    )  # fmt: skip


def test_tuning_regression_reverts_a_request_cap_in_the_flags_units_under_dp_attention():
    change = _cap_change(Verdict("hurt", "worse: gen_throughput", (WORSE,)))
    out = evaluate(TUNING_REGRESSION, window_from(), config=_dp_attention(928, 116),
                   changes=(change,))  # fmt: skip
    assert isinstance(out, Finding)
    assert out.action.flags() == {MAX_RUNNING: "1024"}
    assert out.action.text == "revert: --max-running-requests 928 -> 1024"


def test_tuning_regression_never_reverts_to_a_per_rank_value_stored_before_flag_units():
    # changes stored by earlier builds kept the cap per DP rank (128 -> 116 for 1024 -> 928)
    legacy = dataclasses.replace(
        _cap_change(Verdict("hurt", "worse: gen_throughput", (WORSE,))),
        before={MAX_RUNNING: "128"}, after={MAX_RUNNING: "116"},
    )  # fmt: skip
    out = evaluate(TUNING_REGRESSION, window_from(), config=_dp_attention(928, 116),
                   changes=(legacy,))  # fmt: skip
    assert isinstance(out, Pass) and out.detail == "the change has been undone since"


def test_tuning_regression_reverts_conservativeness_in_flag_units_under_dp_attention():
    # SGLang reports 0.3 x the flag under DP attention: 0.39 and 0.09 for 1.3 and 0.3
    def config(flag: float) -> ServerConfig:
        return parse_server_info({"version": "0.5.23", "attn_dp_size": 8, "dp_size": 1,
                                  "schedule_conservativeness": 0.3 * flag})  # fmt: skip

    asked = {"--schedule-conservativeness": ("0.3", "scheduler_too_conservative")}
    change = ChangeLog("t", "offline", 300.0, 60.0).record(
        config(1.3), config(0.3), Window(10), 10.0, asked
    )
    assert change.after == {"--schedule-conservativeness": "0.3"}
    assert change.rule == "scheduler_too_conservative"
    hurt = dataclasses.replace(change, verdict=Verdict("hurt", "worse: gen_throughput", (WORSE,)))
    out = evaluate(TUNING_REGRESSION, window_from(), config=config(0.3), changes=(hurt,))
    assert isinstance(out, Finding)
    assert out.action.text == "revert: --schedule-conservativeness 0.3 -> 1.3"


def _serve(window: Window, start: float, end: float, **values: float) -> None:
    for k in range(int((end - start) / 5.0) + 1):
        window.append(Snapshot("t", start + 5.0 * k, dict(values)))


# Before: 128 running per rank at ITL p50 35.6 ms (ITL = 10 ms + 0.2 ms per request, fitted by
# the rule). After the cap: tokens stream faster, requests wait longer for a slot.
SLOW_TOKENS = {"itl_p50_seconds": 0.0356, "itl_p99_seconds": 0.05, "ttft_p99_seconds": 1.0,
               "gen_throughput": 28000.0, "request_rate": 40.0, "num_running_reqs": 1024.0,
               "num_queue_reqs": 0.0}  # fmt: skip
CAPPED = {**SLOW_TOKENS, "itl_p50_seconds": 0.027, "itl_p99_seconds": 0.04,
          "ttft_p99_seconds": 1.6, "gen_throughput": 27000.0, "num_running_reqs": 900.0,
          "num_queue_reqs": 124.0}  # fmt: skip


def test_dp_attention_request_cap_is_credited_to_its_rule_and_not_reverted_no_ping_pong():
    old = _dp_attention(None, 128)  # the server sized it: 128 per rank, 1024 in flag units
    batches = range(90, 130, 2)
    view = window_from(
        itl_p50_seconds=[0.01 + 0.0002 * b for b in batches],
        num_running_reqs_max_rank=[float(b) for b in batches],
        request_rate=[40.0 for _ in batches],
        ttft_p99_seconds=[1.0 for _ in batches],
    )
    asked = evaluate(BATCH_TOO_LARGE_FOR_LATENCY, view, config=old, profile="online")
    assert isinstance(asked, Finding) and asked.action.current == "1024"
    cap = asked.action.suggested
    assert cap is not None and int(cap) % 8 == 0  # 8 ranks share it
    new = _dp_attention(int(cap), int(cap) // 8)  # the operator typed the value asked for
    window = Window(400)
    _serve(window, 5.0, 300.0, **SLOW_TOKENS)
    rule = BATCH_TOO_LARGE_FOR_LATENCY
    log = ChangeLog("t", "online", 300.0, 60.0, verifies={rule.id: rule.verifies})
    assert asked.action.prediction is not None
    stated = {rule.id: tuple(asked.action.prediction.costs())}  # the trade it announced
    assert stated[rule.id] == ("TTFT p99",)  # requests wait for a slot under the cap
    change = log.record(
        old, new, window, 330.0, {MAX_RUNNING: (cap, rule.id)}, {rule.id: 0.9}, stated
    )
    assert (change.before, change.after, change.rule) == (
        {MAX_RUNNING: "1024"},
        {MAX_RUNNING: cap},
        rule.id,
    )
    _serve(window, 335.0, 690.0, **CAPPED)
    judged = log.verify(window, 690.0, 6)
    assert judged is not None and judged.verdict is not None
    # judged on the rule's own metrics (ITL); TTFT p99, which the cap trades away as its
    # advice said, makes it a trade, not a regression
    assert judged.verdict.judged_on == rule.verifies and judged.verdict.verdict == "traded"
    out = evaluate(TUNING_REGRESSION, window_from(), config=new, changes=(judged,))
    assert isinstance(out, Pass) and out.detail == "the latest change: traded"


def test_dp_attention_request_cap_unasked_and_hurt_is_reverted_in_flag_units():
    old, new = _dp_attention(None, 128), _dp_attention(928, 116)
    window = Window(400)
    _serve(window, 5.0, 300.0, **SLOW_TOKENS)
    log = ChangeLog("t", "online", 300.0, 60.0)
    change = log.record(old, new, window, 330.0)  # nobody asked: judged on the profile's
    _serve(window, 335.0, 690.0, **CAPPED)
    judged = log.verify(window, 690.0, 6)
    assert change.rule is None and judged is not None and judged.verdict is not None
    assert judged.verdict.verdict == "hurt"
    out = evaluate(TUNING_REGRESSION, window_from(), config=new, changes=(judged,))
    assert isinstance(out, Finding)
    assert out.action.text == "revert: --max-running-requests 928 -> 1024"
    # the revert applied is credited to tuning_regression: its own result is never reverted
    back = log.record(new, old, window, 700.0, {MAX_RUNNING: ("1024", "tuning_regression")})
    assert (back.before, back.after, back.rule) == (
        {MAX_RUNNING: "928"},
        {MAX_RUNNING: "1024"},
        "tuning_regression",
    )


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


# -- the revert's prediction: the measured regression, undone ------------------------------------


def _hurt(profile: str, *metrics: MetricVerdict, judged_on: tuple[str, ...] = ()) -> Change:
    verdict = Verdict("hurt", "worse: " + ", ".join(m.metric for m in metrics), metrics,
                      judged_on=judged_on)  # fmt: skip
    return dataclasses.replace(_change(), profile=profile, verdict=verdict)


def test_revert_predicts_the_lost_throughput_back_with_the_verdicts_interval():
    lost = MetricVerdict("gen_throughput", "hurt", 0.8, 0.75, 0.85, 100.0, 80.0)
    prediction = predict_revert(_hurt("offline", lost, judged_on=("gen_throughput",)))
    assert prediction.objective == "tok/s"
    assert prediction.gain == pytest.approx(0.25)  # 80 -> 100 tok/s
    assert (prediction.low, prediction.high) == (
        pytest.approx(1 / 0.85 - 1),
        pytest.approx(1 / 0.75 - 1),
    )
    assert prediction.basis == (
        "undoes the measured -20 % tok/s of --schedule-conservativeness 1 -> 0.3 "
        "(verdict worse: gen_throughput)"
    )


def test_reverting_a_memory_raise_states_the_itl_it_gives_back():
    # the raise bought TTFT p99 with a larger batch: ITL p50 40 -> 80 ms, p99 0.3 -> 1.2 s
    slower = MetricVerdict("ttft_p99_seconds", "improved", 0.5, None, None, 10.0, 5.0)
    p50 = MetricVerdict("itl_p50_seconds", "hurt", 2.0, 1.9, 2.1, 0.04, 0.08)
    p99 = MetricVerdict("itl_p99_seconds", "hurt", 4.0, 3.5, 4.5, 0.3, 1.2)
    prediction = predict_revert(_hurt("online", slower, p50, p99))
    assert prediction.effects["ITL p50"] == (
        pytest.approx(-0.5),
        pytest.approx(1 / 2.1 - 1),
        pytest.approx(1 / 1.9 - 1),
    )
    assert prediction.effects["ITL p99"][0] == pytest.approx(-0.75)
    # and the TTFT p99 it costs: back from 5 s to 10 s
    assert prediction.effects["TTFT p99"][0] == pytest.approx(1.0)
    assert prediction.text().startswith("-75 % ITL p99 (-78 to -71 %), trades TTFT p99 +100 %")
    assert "back with it: TTFT p99 5.00 -> 10.00 s, ITL p50 80 -> 40 ms" in prediction.basis


def test_revert_predicts_a_latency_fall_with_a_30_percent_range_without_an_interval():
    slower = MetricVerdict("ttft_p99_seconds", "hurt", None, None, None, 1.0, 1.5)
    prediction = predict_revert(_hurt("online", slower, judged_on=("ttft_p99_seconds",)))
    assert prediction.objective == "TTFT p99"
    assert prediction.gain == pytest.approx(1 / 3)  # 1.5 s -> 1 s: a 33 % fall
    assert (prediction.low, prediction.high) == (
        pytest.approx(1 / 3 - 0.1),
        pytest.approx(1 / 3 + 0.1),
    )
    assert prediction.text().startswith("-33 % TTFT p99 (-43 to -23 %): undoes the measured +50 %")
    small = MetricVerdict("ttft_p99_seconds", "hurt", None, None, None, 1.0, 1.05)
    tight = predict_revert(_hurt("online", small))
    assert tight.gain is not None and tight.high is not None
    assert tight.high - tight.gain == pytest.approx(0.02)  # never narrower than 2 points


def test_revert_predicts_on_the_metrics_the_verdict_judged_on():
    itl = MetricVerdict("itl_p99_seconds", "hurt", 1.2, 1.1, 1.3, 0.05, 0.06)
    ttft = MetricVerdict("ttft_p99_seconds", "hurt", 2.0, 1.8, 2.2, 1.0, 2.0)  # worse, not judged
    asked = _hurt("online", itl, ttft, judged_on=("itl_p99_seconds", "itl_p50_seconds"))
    prediction = predict_revert(asked)
    assert prediction.objective == "ITL p99" and prediction.gain == pytest.approx(1 - 1 / 1.2)
    # judged on the profile's metrics: its objective (TTFT p99) first, though ITL fell further
    itl_worse = MetricVerdict("itl_p99_seconds", "hurt", 3.0, 2.8, 3.2, 0.05, 0.15)
    generic = _hurt("online", itl_worse, ttft, judged_on=("ttft_p99_seconds", "itl_p99_seconds"))
    assert predict_revert(generic).objective == "TTFT p99"
    # a verdict stored before it named its metrics: the profile's primary ones
    assert predict_revert(_hurt("online", itl_worse, ttft)).objective == "TTFT p99"


def test_revert_without_a_measured_regression_to_undo_predicts_nothing():
    zero = MetricVerdict("restarts", "hurt", None, None, None, 0.0, 0.5)  # no ratio from zero
    prediction = predict_revert(_hurt("offline", zero, judged_on=("restarts",)))
    assert prediction.gain is None and "no measured regression to undo" in prediction.basis


def test_tuning_regression_finding_carries_the_revert_prediction():
    out = evaluate(
        TUNING_REGRESSION, window_from(), config=ServerConfig(schedule_conservativeness=0.3),
        changes=(_change(),),
    )  # fmt: skip
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert out.action.prediction.objective == "tok/s"
    assert out.action.prediction.gain == pytest.approx(4000.0 / 3520.0 - 1)
    assert out.action.expected.startswith("+14 % tok/s (+10 to +18 %): undoes the measured -12 %")


def test_plan_does_not_send_the_policy_back_after_other_changes_came_between():
    import dataclasses

    other = dataclasses.replace(
        _policy_change("helped"), before={MAX_RUNNING: "1024"}, after={MAX_RUNNING: "512"}
    )
    changes = (_policy_change("helped"), other)  # fcfs -> lpm, then another flag
    plan = plan_target("t", _back_to_fcfs(), FlagHistory(), ORDER, changes)
    assert plan.next is None
    assert plan.held[0].reason == (
        "the history already left --schedule-policy fcfs for lpm (helped); not sent back"
    )
    # a left policy that was judged to hurt may be gone back to
    hurt = (_policy_change("hurt"), other)
    assert plan_target("t", _back_to_fcfs(), FlagHistory(), ORDER, hurt).next is not None


def test_a_revert_to_a_flag_that_was_not_set_removes_it_with_no_machine_value():
    unset = _cap_change(Verdict("hurt", "worse: gen_throughput", (WORSE,)))
    unset = dataclasses.replace(unset, before={MAX_RUNNING: "unset"})
    out = evaluate(TUNING_REGRESSION, window_from(), config=_dp_attention(928, 116),
                   changes=(unset,))  # fmt: skip
    assert isinstance(out, Finding)
    assert out.action.suggested is None and out.action.flags() == {}
    assert out.action.text == (
        "revert: --max-running-requests 928 -> unset (remove --max-running-requests: SGLang's "
        "own default)"
    )
