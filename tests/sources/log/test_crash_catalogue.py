"""Every failure SGLang can print, from its own code (the message catalogue), read back by the
crash reader at the end of a log: coverage by construction, not by the logs we were shown.

Each catalogued message of 0.1.3-0.5.23 is written into a log the way SGLang prints it (its
holes filled in), and the log is read as `check --log` reads it (`scan_lines`)."""

from collections.abc import Iterator

import pytest
from sglang_tuner.sources.log.crash import CrashKind
from sglang_tuner.sources.log.lines import scan_lines
from sglang_tuner.sources.log.messages.catalogue import Message, catalogue
from sglang_tuner.sources.log.messages.classes import CRASH, FAILURES, NOT_TUNING, SIGNAL
from sglang_tuner.sources.log.messages.exceptions import UNCLASSIFIED, diagnose

STARTED = [
    "[2025-06-01 10:00:00 TP0] Load weight begin. avail mem=70.00 GB",
    "[2025-06-01 10:00:05 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
    "avail mem=55.00 GB",
]
COUNTED = {kind.value for kind in CrashKind}  # kinds the hand-written readers count themselves
OWN_KINDS = {"kv_pool_exhausted", "startup_not_enough_memory"}  # printed only as it fails


def _filled(pattern: str) -> str:
    return pattern.replace("{*}", "42")


def _traceback(message: Message, line: str) -> list[str]:
    """`line` raised at the end of a scheduler's traceback, as SGLang logs its death."""
    exception = message.exception or (
        "AssertionError" if message.call == "assert" else "RuntimeError"
    )
    return [
        *STARTED,
        "[2025-06-01 10:00:06 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", line 2000, in '
        "run_scheduler_process",
        "    scheduler.event_loop_overlap()",
        f'  File "/usr/lib/python3/dist-packages/sglang/{message.module}", line 100, in f',
        "    raise error",
        f"{exception}: {line}",
    ]


def _failures(first_lines: bool) -> Iterator[Message]:
    for message in catalogue().messages:
        if message.call in FAILURES and message.verdict.cls != SIGNAL:
            if bool(message.continues) != first_lines:
                yield message


def test_every_failure_any_release_raises_ends_a_log_in_a_named_crash() -> None:
    """As the exception a scheduler's traceback ends in: named, as the catalogue classes that
    line (a kind the hand-written readers count wins: a pool OOM's own reader)."""
    wrong = []
    messages = list(_failures(first_lines=True))
    for message in messages:
        line = _filled(message.text)
        crashes = scan_lines(_traceback(message, line)).crashes
        said = diagnose(line)
        expected = (said.cls, said.kind or ("" if said.cls != CRASH else UNCLASSIFIED))
        got = (crashes[-1].cls, crashes[-1].kind) if crashes else None
        if got is None or got[0] == UNCLASSIFIED or (got != expected and got[1] not in COUNTED):
            wrong.append((message.text, message.module, expected, got))
    assert len(messages) > 2900  # every release's raises, asserts and logged failures
    assert wrong == []


def test_every_line_of_a_message_sglang_prints_only_as_it_fails_names_the_crash_alone() -> None:
    """A pool OOM's or a failed pool sizing's lines, logged or raised, each alone at the end of
    a log (a thread quotes its last lines: "Try to allocate 4 tokens.",
    "self.tree_cache.evictable_size()=0"): the crash, of its kind."""
    wrong = []
    ambiguous = catalogue().ambiguous  # printed by another kind's failure too: alone, neither
    own = [
        m
        for m in catalogue().messages
        if m.call in FAILURES and m.verdict.kind in OWN_KINDS and m.text not in ambiguous
    ]
    for message in own:
        line = _filled(message.text)
        if message.call == "error":  # logged: with SGLang's prefix, or pasted without it
            alone = [f"[2025-06-01 10:00:06 TP0] {line}", line]
        elif message.continues:  # a later line of a raised message
            alone = [line]
        else:  # raised: the exception's line
            alone = [f"{message.exception or 'AssertionError'}: {line}"]
        for last in alone:
            crashes = scan_lines([*STARTED, last]).crashes
            if not crashes or crashes[-1].kind != message.verdict.kind:
                wrong.append((message.text, crashes[-1] if crashes else None))
    assert len(own) > 40 and any(m.continues for m in own)
    assert wrong == []


def test_a_capture_failures_later_lines_alone_say_a_crash_in_capture_not_its_cause() -> None:
    """ "Possible solutions:" follows "Capture cuda graph failed: <cause>": alone, it says a
    crash while capturing, never "not for memory" (its cause may be out of memory)."""
    lines = [*STARTED, "Possible solutions:"]
    crash = scan_lines(lines).crashes[-1]
    assert (crash.cls, crash.phase) == (UNCLASSIFIED, "capture")
    assert "failed" not in crash.kind
    with_cause = [*STARTED, "Exception: Capture cuda graph failed: CUDA out of memory.", *lines[2:]]
    assert scan_lines(with_cause).crashes[-1].kind == "cuda_graph_capture_oom"


def test_a_capture_failure_pasted_on_one_line_with_its_hints_keeps_its_cause() -> None:
    """Newlines lost: the failure and every release's hints on one line; the cause is there."""
    hints = [m for m in catalogue().messages if m.continues and m.verdict.kind == "capture_failure"]
    head = "Exception: Capture cuda graph failed: RuntimeError: an illegal kernel argument"
    said = {scan_lines([*STARTED, f"{head} {_filled(m.text)}"]).crashes[-1].cls for m in hints}
    assert len(hints) > 20 and said == {CRASH}


def test_a_line_of_a_pool_oom_after_its_numbers_counts_no_second_crash() -> None:
    """Its numbers said free tokens cover the request (an allocator bug): the message's later
    lines do not make it a pool OOM again."""
    lines = [
        "RuntimeError: Decode out of memory. Try to lower your batch size.",
        "Try to allocate 148 tokens.",
        "Avaliable tokens: 2048",
        "self.token_to_kv_pool_allocator.available_size()=2048",
        "self.tree_cache.evictable_size()=0",
    ]
    counts = scan_lines(lines)
    assert (counts.allocator_bug, counts.kv_pool_exhausted) == (1, 0)
    assert counts.crashes[-1].cls == NOT_TUNING


def test_a_short_message_inside_a_longer_line_names_nothing_of_it() -> None:
    """SGLang's "'{*}' object has no attribute '{*}'" is found inside a line quoting an error
    another message caught: the line is not that message (its literal text is under half)."""
    line = (
        "[2025-06-01 10:00:06 TP0] Piecewise CUDA Graph failed with error: "
        "'TcPiecewiseForwardContext' object has no attribute 'num_tokens'"
    )
    crashes = scan_lines([*STARTED, line]).crashes
    assert not crashes or crashes[-1].kind != "serving_failure"


@pytest.mark.parametrize(
    ("lines", "kind"),
    [
        # logged by 0.5.3+'s mem_cache/common.py before it raises
        (["[2025-06-01 10:00:06 TP0] Out of memory. Try to lower your batch size."], "kv"),
        # SGLang's own exception class without Error in its name (0.5.22+)
        (
            [
                "Traceback (most recent call last):",
                '  File "/sglang/srt/managers/scheduler.py", line 9, in update',
                "    raise UpdateRejected(msg)",
                "sglang.srt.managers.scheduler_components.internal_state.UpdateRejected: "
                "Updating chunked_prefill_size is not supported.",
            ],
            "config",
        ),
    ],
    ids=["pool-oom-logged", "update-rejected"],
)
def test_failures_no_hand_written_reader_knew_are_named(lines: list[str], kind: str) -> None:
    crash = scan_lines([*STARTED, *lines]).crashes[-1]
    if kind == "kv":
        assert crash.kind == "kv_pool_exhausted"
    else:
        assert crash.cls == "config_error" and "Updating" in crash.message
