"""The watched targets: their states, latest judgement and plan, and what the advice asked."""

from sglang_tuner.config.loading import load_settings
from sglang_tuner.model.advice import Action, Confidence, Finding, Pass, Severity
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import RESTARTS
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.rule import Rule, RuleInput
from sglang_tuner.target_state import TargetState
from sglang_tuner.watch import Watch

CONSERVATIVENESS = "--schedule-conservativeness"


def _lower_conservativeness(inp: RuleInput) -> Finding | Pass:
    """Suggests the latest `q` as the conservativeness, in 80 % of the samples."""
    q = inp.view.last("q")
    if not q:
        return Pass()
    action = Action(f"{CONSERVATIVENESS} 1 -> {q:g}", CONSERVATIVENESS, "1", f"{q:g}")
    return Finding("q", action, Confidence.HIGH, 0.8, inp.view.count)


def _smaller_chunks(inp: RuleInput) -> Finding | Pass:
    if not inp.view.last("c"):
        return Pass()
    action = Action("--chunked-prefill-size 8192 -> 4096", "--chunked-prefill-size", "8192", "4096")
    return Finding("c", action, Confidence.HIGH, 0.6, inp.view.count)


def _broken(_inp: RuleInput) -> Pass:
    raise ZeroDivisionError("division by zero")


CONSERVATIVE = Rule(
    id="too_conservative",
    severity=Severity.WARNING,
    summary="s",
    action="a",
    source="t",
    check=_lower_conservativeness,
    verifies=("token_usage",),
)
CHUNKS = Rule(
    id="chunks_too_large",
    severity=Severity.INFO,
    summary="s",
    action="a",
    source="t",
    check=_smaller_chunks,
)
BROKEN = Rule(
    id="broken", severity=Severity.INFO, summary="s", action="a", source="t", check=_broken
)
RULES = (CONSERVATIVE, CHUNKS, BROKEN)


def _watch(**settings: object) -> Watch:
    return Watch(load_settings(None, {"min_samples": 3, **settings}), RULES)


def _watched(watch: Watch, name: str = "gpu-a") -> TargetState:
    """A target whose flags have been read, added to the watch."""
    state = watch.new_state(TargetSpec(name, f"http://{name}:30000"), watch.window_capacity())
    state.apply_server_info(ServerConfig(schedule_conservativeness=1.0), None)
    watch.add(state)
    return state


def _scrape(state: TargetState, ts: float, **values: float) -> None:
    state.ingest(ScrapeResult(state.name, ts, 0.01, snapshot=Snapshot(state.name, ts, values)))


def _refused(state: TargetState, ts: float) -> None:
    state.ingest(ScrapeResult(state.name, ts, 0.01, error_reason="conn_refused", error="refused"))


def test_window_capacity_covers_the_verification_window_at_the_scrape_interval():
    watch = _watch()  # rules 300 s, verification 600 s, a scrape every 5 s
    assert watch.rules_window() == 300.0 and watch.longest_window() == 600.0
    assert watch.window_capacity() == 600 // 5 + 2
    assert watch.window_capacity(30.0) == 600 // 30 + 2  # a Prometheus round every 30 s


def test_window_capacity_grows_with_a_rule_window_longer_than_the_rest():
    watch = _watch(rules={"chunks_too_large": {"window_seconds": 900}})
    assert watch.rules_window() == 900.0 and watch.longest_window() == 900.0
    assert watch.window_capacity() == 900 // 5 + 2


def test_new_state_verifies_changes_as_the_settings_and_rules_say():
    watch = _watch(verify_window_seconds=420, verify_warmup_seconds=90, min_samples=4)
    state = watch.new_state(TargetSpec("gpu-a", "http://gpu-a:30000"), 50)
    assert state.window.capacity == 50 and state.min_samples == 4
    log = state.changes
    assert (log.window_seconds, log.warmup_seconds) == (420.0, 90.0)
    assert log.verifies == {"too_conservative": ("token_usage",)}


def test_add_then_forget_drops_the_target_from_every_table():
    watch = _watch()
    a, b = _watched(watch, "gpu-a"), _watched(watch, "gpu-b")
    for state in (a, b):
        for ts in (5.0, 10.0, 15.0):
            _scrape(state, ts, q=0.3)
        watch.judge(state.name, 15.0)
    assert set(watch.judged) == set(watch.plans) == set(watch.asked) == {"gpu-a", "gpu-b"}
    watch.forget("gpu-a")
    tables = (watch.targets, watch.judged, watch.plans, watch.asked)
    assert all(set(table) == {"gpu-b"} for table in tables)
    watch.forget("gpu-a")  # forgetting twice is harmless


def test_judge_keeps_the_judgement_and_the_plan_and_counts_failing_rules():
    watch = _watch()
    state = _watched(watch)
    for ts in (5.0, 10.0, 15.0):
        _scrape(state, ts, q=0.3, c=1.0)
    watch.judge("gpu-a", 15.0)
    judgement = watch.judged["gpu-a"]
    assert judgement.ts == 15.0 and judgement.samples == 3
    plan = watch.plans["gpu-a"]
    assert plan.next is not None and plan.next.rule == "too_conservative"  # warning first
    assert [step.rule for step in plan.after] == ["chunks_too_large"]
    assert watch.rule_failures == {"broken": 1}
    watch.judge("gpu-a", 20.0)
    assert watch.rule_failures == {"broken": 2}


def test_judge_records_what_the_plan_asked_and_keeps_earlier_asks():
    watch = _watch()
    state = _watched(watch)
    for ts in (5.0, 10.0, 15.0):
        _scrape(state, ts, q=0.3, c=1.0)
    watch.judge("gpu-a", 15.0)
    asked = watch.asked["gpu-a"]
    assert asked.flags == {
        CONSERVATIVENESS: ("0.3", "too_conservative"),
        "--chunked-prefill-size": ("4096", "chunks_too_large"),
    }
    assert asked.ratios == {"too_conservative": 0.8, "chunks_too_large": 0.6}
    _scrape(state, 20.0, q=0.5, c=0.0)  # the chunk advice cleared, the suggestion moved
    watch.judge("gpu-a", 20.0)
    assert watch.asked["gpu-a"].flags == {
        CONSERVATIVENESS: ("0.5", "too_conservative"),  # the newer value wins
        "--chunked-prefill-size": ("4096", "chunks_too_large"),  # may still be applied later
    }


def test_judge_keeps_what_was_asked_before_a_restart_until_the_new_flags_are_read():
    watch = _watch()
    state = _watched(watch)
    for ts in (5.0, 10.0, 15.0):
        _scrape(state, ts, q=0.3)
    watch.judge("gpu-a", 15.0)
    _scrape(state, 20.0, q=0.9, **{RESTARTS: 1.0})  # a new process: its flags not read yet
    watch.judge("gpu-a", 20.0)
    assert watch.plans["gpu-a"].next is not None  # judged and planned all the same
    assert watch.asked["gpu-a"].flags == {CONSERVATIVENESS: ("0.3", "too_conservative")}
    change = state.apply_server_info(
        ServerConfig(schedule_conservativeness=0.3), None, watch.asked["gpu-a"].flags
    )
    assert change is not None and change.rule == "too_conservative"
    for ts in (25.0, 30.0, 35.0):  # the window starts afresh with the new flags
        _scrape(state, ts, q=0.9)
    watch.judge("gpu-a", 35.0)
    assert watch.asked["gpu-a"].flags == {CONSERVATIVENESS: ("0.9", "too_conservative")}


def test_judge_with_other_settings_uses_them_for_that_round():
    watch = _watch()
    state = _watched(watch)
    for ts in (5.0, 10.0, 15.0):
        _scrape(state, ts, q=0.3, c=1.0)
    off = load_settings(None, {"min_samples": 3, "rules": {"too_conservative": {"enabled": False}}})
    watch.judge("gpu-a", 15.0, off)
    plan = watch.plans["gpu-a"]
    assert plan.next is not None and plan.next.rule == "chunks_too_large" and not plan.after


def test_next_scrape_in_backs_off_a_target_refusing_connections_that_long():
    watch = _watch(unreachable_retry_seconds=60)
    state = _watched(watch)
    _refused(state, 100.0)
    assert watch.next_scrape_in("gpu-a", 5.0, 159.0) == 5.0  # refused for 59 s: keep trying
    assert watch.next_scrape_in("gpu-a", 5.0, 160.0) == 60.0
    assert watch.next_scrape_in("gpu-a", 90.0, 160.0) == 90.0  # never sooner than the interval
    _scrape(state, 220.0, q=1.0)  # it answers again
    assert watch.next_scrape_in("gpu-a", 5.0, 300.0) == 5.0


def test_next_scrape_in_keeps_the_interval_for_other_failures_and_unknown_targets():
    watch = _watch(unreachable_retry_seconds=60)
    state = _watched(watch)
    state.ingest(ScrapeResult("gpu-a", 100.0, 3.0, error_reason="timeout", error="slow"))
    assert watch.next_scrape_in("gpu-a", 5.0, 1000.0) == 5.0  # slow is not gone
    assert watch.next_scrape_in("gpu-z", 5.0, 1000.0) == 5.0


def test_next_scrape_in_never_backs_off_when_the_retry_is_zero():
    watch = _watch(unreachable_retry_seconds=0)
    state = _watched(watch)
    _refused(state, 100.0)
    assert watch.next_scrape_in("gpu-a", 5.0, 10_000.0) == 5.0
