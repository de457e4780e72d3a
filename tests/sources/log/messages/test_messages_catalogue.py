"""The checked-in catalogue of SGLang's messages (sources/log/messages/sglang_messages.json):
every message of every release read is classified, by today's tables, and real log lines find
their message. Nothing here downloads: the data file is what `make generate` wrote."""

import copy
import json
import re
from importlib import resources

import pytest
from sglang_tuner.sources.log.messages.catalogue import catalogue, lookup, parse
from sglang_tuner.sources.log.messages.classes import (
    CLASSES,
    CONFIG,
    CRASH,
    NOT_TUNING,
    NOT_TUNING_KINDS,
    PHASES,
    SIGNAL,
    SIGNAL_KINDS,
    classify,
)
from sglang_tuner.sources.log.messages.extract import reclassify

DOCUMENT = json.loads(
    resources.files("sglang_tuner.sources.log.messages")
    .joinpath("sglang_messages.json")
    .read_text()
)


def test_catalogue_covers_every_release_from_0_1_3_to_0_5_23() -> None:
    read = DOCUMENT["versions_read"]
    assert read[0] == "0.1.3" and read[-1] == "0.5.23"
    assert {"0.1.16", "0.2.7", "0.3.6.post3", "0.4.6.post5", "0.5.4.post3", "0.5.10.post1"} <= set(
        read
    )
    assert len(read) + len(DOCUMENT["versions_failed"]) >= 150
    assert len(DOCUMENT["messages"]) > 3000


def test_catalogue_holds_the_0_1_and_0_2_batch_lines_as_load_signals() -> None:
    """Their modules (managers/router/, managers/controller/) are read: the batch lines the log
    reader reads by hand are SGLang's own, in the releases that print them."""
    for line, versions in (
        ("#running-req: 9, #token: 5230, token usage: 0.24, #queue-req: 57", "0.1.3..0.1.15"),
        (
            "new fill batch. #seq: 1. #cached_token: 330. #new_token: 2172. #remaining_req: 57. "
            "#running_req: 9. tree_cache_hit_rate: 69.16%.",
            "0.1.11..0.1.17",  # 0.1.17 kept the old module beside the new one, unused
        ),
        (
            "[gpu=0] Decode batch. #running-req: 4, #token: 400, token usage: 0.10, "
            "gen throughput (token/s): 100.00, #queue-req: 2",
            "0.2.7..0.2.13",
        ),
    ):
        message = lookup(line)
        assert message is not None, line
        assert (message.verdict.cls, message.verdict.kind) == (SIGNAL, "load"), line
        assert message.versions == versions


def test_every_extracted_message_is_classified() -> None:
    unclassified = [row["pattern"] for row in DOCUMENT["messages"] if row["class"] not in CLASSES]
    assert unclassified == []
    for row in DOCUMENT["messages"]:
        assert row["phase"] in PHASES, row
        if row["class"] == CRASH:
            assert row["kind"], row
        elif row["class"] == NOT_TUNING:
            assert row["kind"] in NOT_TUNING_KINDS, row
        elif row["class"] == SIGNAL:
            assert row["kind"] in SIGNAL_KINDS, row
        assert row["versions"] and row["rule"], row


def test_checked_in_classes_are_those_of_todays_tables() -> None:
    """A changed keyword table needs `make generate` (or `extract --reclassify`)."""
    again = reclassify(copy.deepcopy(DOCUMENT))
    pairs = zip(again["messages"], DOCUMENT["messages"], strict=True)
    stale = [a["pattern"] for a, b in pairs if a != b]
    assert stale == []


def test_a_scheduler_failure_about_a_batch_is_a_crash_and_a_tokenizer_refusal_a_request() -> None:
    """The scheduler's raises end its process whatever words about batches or requests they
    hold; the tokenizer's and the HTTP server's answer one client and the server lives on."""
    text = "batch.extend_num_tokens == 0, this is unexpected!"
    assert classify(text, "assert", "AssertionError", "scheduler").kind == "serving_failure"
    assert classify(text, "assert", "AssertionError", "tokenizer").kind == "request"
    rows = [r for r in DOCUMENT["messages"] if r["kind"] == "request"]
    assert rows and {r["area"] for r in rows} == {"tokenizer", "http"}


def test_config_errors_name_their_flag_where_the_message_does() -> None:
    named = [
        row
        for row in DOCUMENT["messages"]
        if row["class"] == CONFIG and re.match(r"--[a-z]", row["pattern"])
    ]
    assert named and all(row["flag"].startswith("--") for row in named)


@pytest.mark.parametrize(
    ("line", "cls", "kind"),
    [
        (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.88",
            CRASH,
            "startup_not_enough_memory",
        ),
        ("Exception: Capture cuda graph failed: boom", CRASH, "capture_failure"),
        (
            "ValueError: token_to_kv_pool_allocator memory leak detected! available_size=3",
            NOT_TUNING,
            "allocator_bug",
        ),
        (
            "RuntimeError: Prefill out of memory. Try to lower your batch size.",
            CRASH,
            "kv_pool_exhausted",
        ),
        # a later line of a message printed on several lines is known as that message
        ("Try to allocate 148 tokens.", CRASH, "kv_pool_exhausted"),
        ("self.tree_cache.evictable_size()=0", CRASH, "kv_pool_exhausted"),
        ("2. set --cuda-graph-max-bs to a smaller value (e.g., 16)", CRASH, "capture_failure"),
        (
            "[2025-01-02 03:04:05 TP0] Decode batch. #running-req: 3, #token: 120, token usage: "
            "0.01, gen throughput (token/s): 50.00, #queue-req: 0",
            SIGNAL,
            "load",
        ),
        (
            "[2025-01-02 03:04:05 TP0] KV Cache is allocated. #tokens: 500000, K size: 30.5 GB, "
            "V size: 30.5 GB",
            SIGNAL,
            "memory",
        ),
    ],
)
def test_real_lines_find_their_message(line: str, cls: str, kind: str) -> None:
    message = lookup(line)
    assert message is not None, line
    assert (message.verdict.cls, message.verdict.kind) == (cls, kind)
    assert message.versions


def test_a_line_no_release_printed_finds_nothing() -> None:
    assert lookup("hello world, nothing SGLang ever said here " * 3) is None
    assert lookup("x" * 100_000) is None


def test_the_longest_message_wins_and_a_failure_over_a_log_line() -> None:
    doc = {
        "versions_read": ["0.4.0"],
        "versions_failed": [],
        "messages": [
            _row("Capture cuda graph failed: {*}", "raise", CRASH, "capture_failure"),
            _row("Capture cuda graph failed: {*} out of memory", "raise", CRASH, "oom"),
            _row("Capture cuda graph failed: {*}", "info", SIGNAL, "capture"),
        ],
    }
    found = parse(doc).lookup("Exception: Capture cuda graph failed: CUDA out of memory")
    assert found is not None and found.verdict.kind == "oom"
    found = parse(doc).lookup("Exception: Capture cuda graph failed: illegal address")
    assert found is not None and found.call == "raise"


def test_the_shipped_catalogue_is_read_once() -> None:
    assert catalogue() is catalogue()


def _row(pattern: str, call: str, cls: str, kind: str) -> dict[str, object]:
    return {
        "pattern": pattern,
        "call": call,
        "exception": "",
        "area": "cuda_graph",
        "module": "srt/x.py",
        "refs": [],
        "versions": "0.4.0",
        "class": cls,
        "kind": kind,
        "phase": "",
        "flag": "",
        "rule": "test",
    }
