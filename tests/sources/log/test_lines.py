"""Reading SGLang log lines into counts: log times, polls split anywhere, what a take keeps."""

import dataclasses
import re
from datetime import date
from pathlib import Path

import pytest
from sglang_tuner.sources.log.lines import LogCounts, LogScanner, line_seconds, scan_lines

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
RETRACT = (
    "KV cache pool is full. Retract requests. #retracted_reqs: {n}, #new_token_ratio: 0.3 -> 0.6"
)
STARTUP = "max_total_num_tokens={n}, chunked_prefill_size=8192, available_gpu_mem={gb} GB"
DECODE = (
    "Decode batch, #running-req: 9, #token: 90, token usage: 0.10, cuda graph: {graph}, "
    "gen throughput (token/s): 1.00, #queue-req: 0"
)


# The counts that are events since the previous take (the startup facts are kept instead).
EVENTS = [f.name for f in dataclasses.fields(LogCounts) if f.type is int]


def _said(counts: LogCounts) -> tuple[int, int, int, int | None, float | None]:
    """Retractions, decode lines, those without a graph, and the startup facts."""
    return (
        counts.retracted_reqs,
        counts.decode_lines,
        counts.decode_without_graph,
        counts.max_total_num_tokens,
        counts.available_gpu_mem_gb,
    )


def _lines(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def test_line_seconds_reads_the_dated_prefix_with_ranks_and_fractions():
    day = date(2026, 2, 24).toordinal() * 86400.0
    assert line_seconds("[2026-02-24 10:00:31 TP0] x") == day + 36031.0
    assert line_seconds("[2026-02-24 10:00:31.123 DP1 TP3] x") == day + 36031.0
    assert line_seconds("[2026-02-24 10:00:31,999] x") == day + 36031.0


def test_line_seconds_before_dated_logs_is_the_time_of_day():
    assert line_seconds("[09:00:01 TP0] Decode out of memory happened.") == 32401.0


def test_line_seconds_an_unprefixed_line_has_no_time():
    assert line_seconds("torch.OutOfMemoryError: CUDA out of memory.") is None
    assert line_seconds('  File "/x/scheduler.py", line 9, in event_loop') is None


def test_line_seconds_orders_lines_across_midnight():
    before = line_seconds("[2026-02-24 23:59:59 TP0] x")
    after = line_seconds("[2026-02-25 00:00:00 TP0] x")
    assert before is not None and after is not None and after - before == 1.0


@pytest.mark.parametrize(
    "name", ["v0.4.6.log", "v0.4.10.log", "v0.5.4.log", "v0.5.9.log", "v0.5.17.log"]
)
def test_log_scanner_polls_split_anywhere_count_what_one_read_counts(name):
    lines = _lines(name)
    whole = scan_lines(lines)
    assert {"retracted_reqs", "decode_lines", "kv_pool_exhausted", "other_crash"} <= set(EVENTS)
    assert any(getattr(whole, e) for e in EVENTS)
    for k in range(len(lines) + 1):
        scanner = LogScanner()
        scanner.feed(lines[:k])
        first = scanner.take()
        scanner.feed(lines[k:])
        scanner.finish()
        second = scanner.take()
        summed = {e: getattr(first, e) + getattr(second, e) for e in EVENTS}
        assert summed == {e: getattr(whole, e) for e in EVENTS}, k
        assert second.max_total_num_tokens == whole.max_total_num_tokens


def test_log_scanner_take_resets_events_and_keeps_startup_facts():
    scanner = LogScanner()
    scanner.feed(
        [
            f"[2026-01-01 00:00:00 TP0] {STARTUP.format(n=412000, gb='7.25')}",
            f"[2026-01-01 00:00:01 TP0] {RETRACT.format(n=3)}",
            f"[2026-01-01 00:00:02 TP0] {DECODE.format(graph='False')}",
        ]
    )
    first, second = scanner.take(), scanner.take()
    assert [_said(first), _said(second)] == [(3, 1, 1, 412000, 7.25), (0, 0, 0, 412000, 7.25)]


def test_log_scanner_a_later_startup_replaces_the_facts_of_the_earlier_one():
    scanner = LogScanner()
    scanner.feed([f"[2026-01-01 00:00:00 TP0] {STARTUP.format(n=412000, gb='7.25')}"])
    scanner.feed(["[2026-01-01 01:00:00 TP0] max_total_num_tokens=300000, context_len=8192"])
    counts = scanner.take()
    # a summary without the free memory (before v0.4.7) leaves no stale figure behind
    assert (counts.max_total_num_tokens, counts.available_gpu_mem_gb) == (300000, None)


def test_log_scanner_reads_the_free_memory_the_capture_left_where_no_summary_says_it():
    # 0.4.x prints no available_gpu_mem in its summary; a paste may end at the capture
    scanner = LogScanner()
    scanner.feed(
        [
            "[2025-03-28 04:27:07 TP0] Memory pool end. avail mem=0.07 GB",
            "[2025-03-28 04:27:08 TP0] Capture cuda graph begin. This can take up to several "
            "minutes. avail mem=0.07 GB",
            "[2025-03-28 04:27:12 TP0] Capture cuda graph end. Time elapsed: 4.00 s. "
            "avail mem=0.00 GB. mem usage=0.00 GB.",
        ]
    )
    assert scanner.take().available_gpu_mem_gb == 0.0
    scanner.feed(["[2025-03-28 04:27:13 TP0] max_total_num_tokens=46045, context_len=8192"])
    assert scanner.take().available_gpu_mem_gb == 0.0  # the same start's reading


PREFILL_AT = (
    "[2024-11-29 10:28:29 TP0] Prefill batch. #new-seq: 2, #new-token: {n}, #cached-token: "
    "0, token usage: 0.11, #running-req: 69, #queue-req: 130"
)


def test_log_scanner_counts_prefill_batches_cut_at_one_size_from_the_third_line():
    scanner = LogScanner()
    scanner.feed([PREFILL_AT.format(n=n) for n in (2048, 1500, 2048, 1900, 700)])
    counts = scanner.take()
    # lines 3-5 judged against the largest (2048): 2048 and 1900 are within 10 %, 700 is not
    assert (counts.prefill_full_lines, counts.prefill_sized_lines) == (2, 3)


def test_a_second_prefill_line_of_the_firsts_exact_size_is_a_budgets_cut():
    """An excerpt of two lines: prompts that sum to the same count twice are a budget's cut."""
    scanner = LogScanner()
    scanner.feed([PREFILL_AT.format(n=n) for n in (2048, 2048)])
    counts = scanner.take()
    assert (counts.prefill_full_lines, counts.prefill_sized_lines) == (1, 1)
    for sizes in ((2048, 1500), (300, 300)):  # two sizes; one size below any budget's
        scanner = LogScanner()
        scanner.feed([PREFILL_AT.format(n=n) for n in sizes])
        assert scanner.take().prefill_sized_lines == 0


def test_scan_lines_counts_unprefixed_retractions_every_time():
    assert scan_lines([RETRACT.format(n=2)] * 3).retracted_reqs == 6


def test_scan_lines_counts_the_same_rank_again_in_a_later_second():
    lines = [
        f"[2026-01-01 00:00:{sec:02d} TP{tp}] {RETRACT.format(n=1)}"
        for sec, tp in ((0, 0), (0, 1), (1, 0), (1, 1))
    ]
    assert scan_lines(lines).retracted_reqs == 2


def test_scan_lines_different_retractions_in_one_second_each_count():
    lines = [
        f"[2026-01-01 00:00:00 TP0] {RETRACT.format(n=1)}",
        f"[2026-01-01 00:00:00 TP1] {RETRACT.format(n=1)}",  # TP1's copy of the first
        f"[2026-01-01 00:00:00 TP0] {RETRACT.format(n=4)}",  # another retraction
    ]
    assert scan_lines(lines).retracted_reqs == 5


@pytest.mark.parametrize(
    "line",
    [
        "Decode batch size is capped at 256",  # "batch size", not a batch line
        "Decode batch. #running-req: 9, #token: 90, token usage: 0.10, "
        "gen throughput (token/s): 1.00, #queue-req: 0",  # <= 0.4.6: no graph flag
        "Decode batch, #running-req: 9, #token: 90, token usage: 0.10, tpu graph: False, ",
    ],
)
def test_scan_lines_counts_only_decode_lines_that_state_a_known_graph_flag(line):
    counts = scan_lines([f"[2026-01-01 00:00:00 TP0] {line}"])
    assert (counts.decode_lines, counts.decode_without_graph) == (0, 0)


def test_scan_lines_reads_the_graph_flag_of_each_decode_line():
    lines = [DECODE.format(graph=g) for g in ("True", "False", "False", "True")]
    assert (scan_lines(lines).decode_lines, scan_lines(lines).decode_without_graph) == (4, 2)


# -- only SGLang's own lines, in SGLang's own position, are signals -----------------------------
def test_scan_lines_a_prompt_echoed_by_log_requests_is_not_a_retraction():
    prompt = RETRACT.format(n=5000)
    lines = [
        f"[2026-01-01 00:00:00 TP0] {DECODE.format(graph='True')}",
        f"[2026-01-01 00:00:01] Receive: obj=GenerateReqInput(text='{prompt}', "
        "sampling_params={'max_new_tokens': 16})",
        f"[2026-01-01 00:00:02] Finish: obj=GenerateReqInput(text='{prompt}'), out={{'text': "
        f"'server_args=ServerArgs(model_path=\"x\", tp_size=8) {STARTUP.format(n=1, gb=1)}'}}",
    ]
    counts = scan_lines(lines)
    assert counts.retracted_reqs == 0
    assert counts.server_args is None and counts.max_total_num_tokens is None


def test_scan_lines_a_multi_line_prompts_lines_are_not_signals_in_a_prefixed_log():
    lines = [
        f"[2026-01-01 00:00:00 TP0] {DECODE.format(graph='True')}",
        "[2026-01-01 00:00:01] Receive: obj=GenerateReqInput(text='line one",
        RETRACT.format(n=5000),  # the prompt's second line
        DECODE.format(graph="False") + "')",
    ]
    counts = scan_lines(lines)
    assert (counts.retracted_reqs, counts.decode_lines, counts.decode_without_graph) == (0, 1, 0)


def test_scan_lines_a_retraction_mid_line_is_not_one():
    line = f"[2026-01-01 00:00:00 TP0] user said: {RETRACT.format(n=7)}"
    assert scan_lines([line]).retracted_reqs == 0


def test_log_scanner_feed_takes_the_wrapping_off_first():
    wrapped = [
        f"sglang-1  | 2026-01-01T00:00:0{t}.000000000Z [2026-01-01 00:00:0{t} TP0] "
        + RETRACT.format(n=1)
        for t in range(3)
    ]
    scanner = LogScanner()
    scanner.feed(wrapped)
    assert scanner.take().retracted_reqs == 3


def test_a_speculative_decode_line_without_graph_replay_is_no_batch_outside_the_graphs():
    plain = "[2025-12-04 20:35:53 TP0] Decode batch. #running-req: 48, #token: 3894, token usage: 0.01, cuda graph: False, gen throughput (token/s): 5452.63, #queue-req: 0, "  # noqa: E501
    speculative = plain.replace("cuda graph", "accept len: 1.00, accept rate: 0.11, cuda graph")
    counts = scan_lines([plain, speculative])
    assert (counts.decode_lines, counts.decode_without_graph) == (1, 1)  # only the plain one


# A value per load field, each distinct, to tell which field a reading took.
LOAD_FIELDS = {
    "#running-req": ("running", "11"),
    "#queue-req": ("queued", "7"),
    "#token": ("used_tokens", "5000"),
    "token usage": ("token_usage", "0.5"),
    "gen throughput (token/s)": ("gen_throughput", "123.4"),
}


def _batch_messages() -> list[str]:
    """Every Decode or Prefill batch message of SGLang 0.1.3 - 0.5.23, from its own code."""
    from sglang_tuner.sources.log.messages.catalogue import catalogue

    texts = [m.text for m in catalogue().messages]
    opener = re.compile(r"(?:\[gpu(?:_id)?=\{\*\}\] )?(?:Decode|Prefill?) batch")
    batch = [t for t in texts if opener.match(t)]
    # The extraction joins both branches of 0.4.6-0.5.2's prefill line (a disaggregated prefill
    # server's fields, else the running and queued counts) into one text no server prints.
    return [t for t in batch if t.count("#queue-req: ") == 1]


def _filled(text: str) -> str:
    """A message with each load field's value in its place, the holes that stand for a piece of
    the line's own text (`Decode batch{*},`, `{*}#running-req`) empty, and 1 in every other."""
    for key, (_, value) in LOAD_FIELDS.items():
        text = text.replace(f"{key}: {{*}}", f"{key}: {value}", 1)
    text = re.sub(r"(?<=batch)\{\*\}|\{\*\}(?=[\w#])", "", text)
    return "[2025-06-01 10:00:00 TP0] " + text.replace("{*}", "1")


def test_every_batch_message_of_every_release_reads_each_load_field_it_prints():
    messages = _batch_messages()
    assert len(messages) >= 30
    for text in messages:
        (load,) = scan_lines([_filled(text)]).load.values()
        for key, (attribute, value) in LOAD_FIELDS.items():
            if f"{key}: {{*}}" in text:
                assert getattr(load, attribute) == float(value), (text, key)


def test_a_batch_line_with_any_load_field_dropped_still_reads_every_other_one():
    # forks and users' excerpts drop fields (an ops team's grep, a shorter fork's line): a
    # missing field leaves only itself unknown, on every message of every release
    for text in _batch_messages():
        line = _filled(text)
        printed = [key for key in LOAD_FIELDS if f"{key}: {{*}}" in text]
        for dropped in (key for key in printed if f"(mixed {key}" not in text):
            value = LOAD_FIELDS[dropped][1]
            piece = f"{dropped}: {value}"
            inner = f"{piece}, " in line  # else the line's last field
            cut = line.replace(f"{piece}, ", "", 1) if inner else line.replace(f", {piece}", "")
            assert piece not in cut, (text, dropped)
            (load,) = scan_lines([cut]).load.values()
            assert getattr(load, LOAD_FIELDS[dropped][0]) is None, (cut, dropped)
            for key in printed:
                if key != dropped:
                    attribute, kept = LOAD_FIELDS[key]
                    assert getattr(load, attribute) == float(kept), (cut, key)


def test_a_running_log_of_batch_lines_without_the_queue_field_is_judged_on_its_pool():
    lines = [
        f"[2025-06-01 10:00:{s:02d} TP0] Decode batch. #running-req: 120, #token: 90000, "
        f"token usage: 0.9{s % 10}, gen throughput (token/s): 2100.5"
        for s in range(0, 40, 4)
    ]
    load = scan_lines(lines).load[""]
    assert load.queued is None
    assert (load.running, load.used_tokens, load.token_usage) == (120, 90000, 0.96)
