"""The /advice text report: per target its next change and advice, then what has no data."""

from sglang_tuner.api.advice_text import advice_text
from sglang_tuner.api.schemas.advice_response import (
    ActionOut,
    AdviceList,
    AdviceOut,
    HeldOut,
    NoDataOut,
    PlanOut,
    RuleErrorOut,
    StepOut,
)
from sglang_tuner.model.advice import Confidence, Severity

LOWER = ActionOut(
    text="--schedule-conservativeness 1 -> 0.3",
    flag="--schedule-conservativeness",
    current="1",
    suggested="0.3",
    expected="token usage 0.6 -> about 0.85",
)
CHUNK = ActionOut(text="--chunked-prefill-size 8192 -> 4096")


def _advice(target: str, rule: str, action: ActionOut = LOWER, **kw: object) -> AdviceOut:
    return AdviceOut(
        target=target,
        rule=rule,
        severity=Severity.WARNING,
        state="firing",
        since="2026-11-18T11:01:40Z",
        since_ts=1.0,
        summary="Token usage stays low.",
        evidence="token usage p50 0.60",
        action=action,
        source="Tuning / token usage",
        confidence=Confidence.HIGH,
        links={},
        **kw,
    )


def _plan(target: str) -> PlanOut:
    return PlanOut(
        target=target,
        next=StepOut(
            rule="scheduler_too_conservative", severity=Severity.WARNING, summary="s", action=LOWER
        ),
        after=[StepOut(rule="chunks_too_large", severity=Severity.INFO, summary="s", action=CHUNK)],
        held=[
            HeldOut(
                rule="mem_fraction_too_low",
                severity=Severity.INFO,
                action=CHUNK,
                reason="scheduler_too_conservative moves it first",
            )
        ],
    )


def _block(text: str, target: str) -> list[str]:
    """The lines of one target's block, up to the blank line after its plan."""
    return text.split(f"== {target}\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_advice_text_heads_with_the_counts_and_when_it_was_judged():
    out = AdviceList(
        data=[_advice("gpu-a", "r")],
        count=1,
        evaluated_at="2026-11-18T11:06:40Z",
        no_data_counts={"gpu-a": 2, "gpu-b": 3},
        errors=[RuleErrorOut(target="gpu-a", rule="broken", error="ZeroDivisionError")],
    )
    first = advice_text(out).splitlines()[0]
    assert first == (
        "sglang-tuner advice, evaluated 2026-11-18T11:06:40Z: 1 advice, 5 no data, 1 error(s)"
    )


def test_advice_text_a_plan_shows_the_next_change_then_what_follows_and_what_waits():
    text = advice_text(AdviceList(plans=[_plan("gpu-a")], data=[], count=0))
    assert _block(text, "gpu-a") == [
        "next change: --schedule-conservativeness 1 -> 0.3   (scheduler_too_conservative)",
        "  expected: token usage 0.6 -> about 0.85",
        "  then:     --chunked-prefill-size 8192 -> 4096   (chunks_too_large)",
        "  held:     mem_fraction_too_low: scheduler_too_conservative moves it first",
    ]
    assert "No advice is pending or firing." not in text


def test_advice_text_a_target_with_only_a_change_says_so_and_that_nothing_is_next():
    out = AdviceList(data=[], count=0, last_change={"gpu-a": "10:51 --x 1 -> 2: helped"})
    assert _block(advice_text(out), "gpu-a") == [
        "next change: none",
        "last change: 10:51 --x 1 -> 2: helped",
    ]


def test_advice_text_with_only_hints_on_a_guessed_profile_nothing_is_next():
    hint = ActionOut(text="if this is a batch job: client: submit requests faster")
    step = StepOut(rule="queue_empty", severity=Severity.INFO, summary="s", action=hint)
    out = AdviceList(
        plans=[PlanOut(target="gpu-a", next=None, after=[step], held=[])], data=[], count=0
    )
    assert _block(advice_text(out), "gpu-a") == [
        "next change: none: only hints that hold on a guessed profile (set the profile to act)",
        "  hint:     if this is a batch job: client: submit requests faster   (queue_empty)",
    ]


def test_advice_text_an_advice_block_shows_expected_and_note_only_when_set():
    with_both = _advice(
        "gpu-a",
        "scheduler_too_conservative",
        LOWER.model_copy(update={"note": "current value assumed"}),
    )
    bare = _advice("gpu-a", "chunks_too_large", CHUNK)
    text = advice_text(AdviceList(data=[with_both, bare], count=2))
    first, second = text.split("gpu-a  ")[1:3]
    assert first.splitlines() == [
        "scheduler_too_conservative",
        "  WARNING firing since 2026-11-18T11:01:40Z, high confidence",
        "  summary:  Token usage stays low.",
        "  evidence: token usage p50 0.60",
        "  action:   --schedule-conservativeness 1 -> 0.3",
        "  expected: token usage 0.6 -> about 0.85",
        "  note:     current value assumed",
        "  source:   Tuning / token usage",
        "",
    ]
    assert "expected:" not in second and "note:" not in second


def test_advice_text_says_each_advice_once_named_in_the_plan_by_its_rule():
    advice = [_advice("gpu-a", "scheduler_too_conservative"), _advice("gpu-a", "other", CHUNK)]
    out = AdviceList(plans=[_plan("gpu-a")], data=advice, count=2)
    text = advice_text(out)
    assert _block(text, "gpu-a")[0] == "next change: scheduler_too_conservative (below)"
    assert text.count("token usage 0.6 -> about 0.85") == 1  # in its advice block
    assert text.count("--schedule-conservativeness 1 -> 0.3") == 1
    assert text.count("WARNING") == 2 and "warning)" not in text  # one severity per advice
    assert text.index("gpu-a  scheduler_too_conservative") < text.index("gpu-a  other")


def test_advice_text_lists_every_server_judged_a_clean_one_too():
    out = AdviceList(data=[_advice("gpu-a", "r")], count=1)
    text = advice_text(out, ["gpu-a", "gpu-b"], one_shot=True)
    assert "2 server(s), 1 advice" in text.splitlines()[0]
    assert _block(text, "gpu-b") == ["no advice: every rule that could judge it passed"]


def test_advice_text_one_shot_says_no_retry():
    out = AdviceList(
        data=[], count=0,
        no_data=[NoDataOut(target="gpu-a", rule="r", reason="window short", retry_after_seconds=5)],
    )  # fmt: skip
    assert "window short (retry in 5s)" in advice_text(out)
    one_shot = advice_text(out, ["gpu-a"], one_shot=True)
    assert "window short" in one_shot and "retry" not in one_shot


def test_advice_text_targets_come_in_name_order_whatever_has_them():
    out = AdviceList(
        plans=[_plan("gpu-c")],
        data=[_advice("gpu-b", "r")],
        count=1,
        last_change={"gpu-a": "restart"},
    )
    text = advice_text(out)
    assert text.index("== gpu-a") < text.index("== gpu-b") < text.index("== gpu-c")


def test_advice_text_lists_no_data_in_aligned_columns_with_when_to_retry():
    out = AdviceList(
        data=[],
        count=0,
        no_data=[
            NoDataOut(
                target="gpu-a",
                rule="queue_empty",
                reason="window has 3 of the 6 samples needed",
                retry_after_seconds=15.0,
            ),
            NoDataOut(
                target="gpu-long-name",
                rule=None,
                reason="waiting for the first scrape",
                retry_after_seconds=2.5,
            ),
        ],
    )
    table = advice_text(out).split("no data (why nothing could be judged yet):\n", 1)[1]
    assert table.splitlines() == [
        "  gpu-a          queue_empty  window has 3 of the 6 samples needed (retry in 15s)",
        "  gpu-long-name  (target)     waiting for the first scrape (retry in 2.5s)",
    ]


def test_advice_text_says_a_reason_shared_by_many_rules_and_targets_once():
    crash = "crashes are read from the SGLang log only: set the target's log_file"
    out = AdviceList(
        data=[],
        count=0,
        no_data=[
            *(
                NoDataOut(target=t, rule=r, reason=crash, retry_after_seconds=20.0)
                for t in ("gpu-a", "gpu-b")
                for r in ("kv_pool_exhausted", "allocator_bug")
            ),
            NoDataOut(
                target="gpu-a", rule="queue_empty", reason="window short", retry_after_seconds=5.0
            ),
        ],
    )
    table = advice_text(out).split("no data (why nothing could be judged yet):\n", 1)[1]
    assert table.splitlines() == [
        "  gpu-a  queue_empty  window short (retry in 5s)",
        "  2 targets: allocator_bug, kv_pool_exhausted",
        f"      {crash} (retry in 20s)",
    ]


def test_advice_text_without_the_reasons_counts_no_data_per_target_and_says_where_to_look():
    out = AdviceList(data=[], count=0, no_data_counts={"gpu-b": 12, "gpu-a": 3})
    table = advice_text(out).split("no data (why nothing could be judged yet):\n", 1)[1]
    assert table.splitlines() == [
        "  gpu-a  3 rule(s)   why: /advice/gpu-a",
        "  gpu-b  12 rule(s)  why: /advice/gpu-b",
    ]


def test_advice_text_lists_errors_last_and_ends_with_one_newline():
    out = AdviceList(
        data=[],
        count=0,
        errors=[RuleErrorOut(target="gpu-a", rule="broken", error="ZeroDivisionError: x")],
    )
    text = advice_text(out)
    assert text.endswith("errors:\n  gpu-a  broken  ZeroDivisionError: x\n")
    assert "no data (why" not in text  # nothing without data: no empty table


def test_advice_text_with_nothing_at_all_says_so_and_shows_no_tables():
    text = advice_text(AdviceList(data=[], count=0, evaluated_at="2026-11-18T11:06:40Z"))
    assert text == (
        "sglang-tuner advice, evaluated 2026-11-18T11:06:40Z: 0 advice, 0 no data, 0 error(s)\n"
        "\n"
        "No advice is pending or firing.\n"
    )


def test_advice_text_a_server_with_an_empty_plan_and_nothing_else_is_clean():
    empty = PlanOut(target="gpu-a", next=None, after=[], held=[])
    out = AdviceList(plans=[empty], data=[], count=0)
    text = advice_text(out, ["gpu-a"], one_shot=True)
    assert _block(text, "gpu-a") == ["no advice: every rule that could judge it passed"]


def test_advice_text_one_shot_turns_target_settings_into_what_the_command_takes():
    why = "crashes are read from the SGLang log only: set the target's log_file (OOM)"
    out = AdviceList(
        data=[], count=0,
        no_data=[NoDataOut(target="gpu-a", rule="r", reason=why, retry_after_seconds=5)],
    )  # fmt: skip
    assert "set the target's log_file" in advice_text(out)  # the daemon's API: its setting
    one_shot = advice_text(out, ["gpu-a"], one_shot=True)
    assert "log only: give its log (check --log FILE; the daemon: log_file) (OOM)" in one_shot
