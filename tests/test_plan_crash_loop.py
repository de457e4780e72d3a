"""A crash fix already in place while its crash goes on is not planned again: the plan moves on."""

import asyncio
import sys
from pathlib import Path

from helpers import parse_series
from sglang_tuner.changes.record import Change
from sglang_tuner.changes.verdict import WindowSummary
from sglang_tuner.config.loading import load_settings
from sglang_tuner.judge import Judgement, TargetJudgement, judge_target
from sglang_tuner.model.advice import Action, Confidence, Finding, Health
from sglang_tuner.model.flags import FlagHistory
from sglang_tuner.model.next_change import Plan
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.plan import plan_target
from sglang_tuner.rules import ALL_RULES, RULES_BY_ID
from sglang_tuner.target_state import TargetState

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import closed_loop  # noqa: E402

ORDER = {rule.id: i for i, rule in enumerate(ALL_RULES)}
# The operator applied prefill_oom's "--chunked-prefill-size ? -> 4096" at 50 s; /server_info
# never answered (the server crashes before it is read), so the change log has it from a read
# made before the loop began, or from a store kept across a daemon restart.
APPLIED = Change(
    target="t", at=50.0, kind="flags", before={"--chunked-prefill-size": "8192"},
    after={"--chunked-prefill-size": "4096"}, rule="prefill_oom", profile="offline",
    before_window=WindowSummary(0.0, 0.0, {}, {}), due=0.0,
)  # fmt: skip


def _crash_loop_plan(changes: tuple[Change, ...], config: ServerConfig | None = None) -> Plan:
    """Judge a server that crashes in prefill every 50 s (restarting each time), and plan."""
    target = TargetState(TargetSpec("t", "http://t", profile="offline"), 100)
    target.config, target.config_error = config, "GET /server_info returned 503"
    target.changes.changes = list(changes)
    crashes = parse_series("0x9 1 " * 6)
    for k, crash in enumerate(crashes):
        values = {"prefill_oom_events": crash, "restarts": crash}
        target.window.append(Snapshot("t", k * 5.0, values))  # type: ignore[arg-type]
    target.last = ScrapeResult("t", 295.0, 0.01, None, "http_503")
    judgement = judge_target(target, ALL_RULES, load_settings(None), 295.0)
    return plan_target("t", judgement, FlagHistory(), ORDER, changes, config)


def test_plan_crash_fix_applied_while_crashes_go_on_yields_to_the_next_candidate():
    plan = _crash_loop_plan((APPLIED,))
    assert plan.next is not None and plan.next.rule == "mem_fraction_too_high"
    # the fraction is unknown (/server_info is down, no launch line): lower, by direction only,
    # since the guide's 0.8 is a raise from SGLang's own default on many 0.5.x servers
    assert plan.next.action.flag == "--mem-fraction-static" and plan.next.action.flags() == {}
    assert plan.next.action.text.startswith("lower --mem-fraction-static below what runs now")
    held = {h.rule: h.reason for h in plan.held}
    assert held["prefill_oom"] == (
        "--chunked-prefill-size 8192 -> 4096 was applied, and prefill_oom still fires (6 CUDA "
        "out-of-memory crash(es) during prefill in the window): that fix did not stop the crash"
    )
    # and the advice itself no longer claims the crashes stop
    (oom,) = [h.action for h in plan.held if h.rule == "prefill_oom"]
    assert oom.prediction is not None and oom.prediction.gain is None


def test_plan_crash_fix_not_applied_yet_comes_first():
    plan = _crash_loop_plan(())
    assert plan.next is not None and plan.next.rule == "prefill_oom"
    assert plan.next.action.text == "--chunked-prefill-size ? -> 4096"
    assert plan.next.action.prediction is not None and plan.next.action.prediction.gain == 1.0


def test_plan_crash_fix_whose_value_runs_today_is_held():
    rule = RULES_BY_ID["decode_oom"]
    action = Action("--max-running-requests 128 -> 128", "--max-running-requests", "128", "128")
    finding = Finding("2 CUDA out-of-memory crash(es)", action, Confidence.HIGH, 1.0, 60)
    judgement = TargetJudgement(
        0.0, False, 60, (Judgement(rule, Health.OK, rule.severity, finding),)
    )
    config = ServerConfig(max_running_requests=128)
    plan = plan_target("t", judgement, FlagHistory(), ORDER, (), config)
    assert plan.next is None
    assert plan.held[0].reason.startswith("--max-running-requests is already 128, and decode_oom")


def test_plan_crash_loop_on_an_l40s_moves_on_from_a_fix_that_did_not_stop_it():
    run = asyncio.run(
        closed_loop.run_one(
            "c", "crash_loop", "0.5.23", {}, 5400.0, gpu="L40S", model="llama-3.1-8b", seed=1
        )
    )
    rules = [c.rule for c in run.changes]
    assert rules.count("prefill_oom") == 1 and "mem_fraction_too_high" in rules
