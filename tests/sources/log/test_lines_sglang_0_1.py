"""SGLang 0.1.x-0.2.13's batch lines, as its own format strings print them (bare: its logging
format was "%(message)s", no time and no rank), read into the signals the later lines give."""

import json
import os
from pathlib import Path

from sglang_tuner.__main__ import main
from sglang_tuner.model import signals as s
from sglang_tuner.sources.log.follow import to_signals
from sglang_tuner.sources.log.lines import BatchLoad, batch_fields, is_batch_line, scan_lines
from sglang_tuner.sources.log.log_samples import LogHistory

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs" / "corpus"
# 0.1.3-0.1.15, srt/managers/router/model_rpc.py: the decode step's line, no label
DECODE_0_1_3 = "#running-req: {r}, #token: 5230, token usage: 0.24, #queue-req: {q}"
# 0.1.16, the same file: gen throughput added
DECODE_0_1_16 = (
    "#running-req: {r}, #token: 5230, token usage: 0.24, gen throughput (token/s): 431.07, "
    "#queue-req: {q}"
)
# 0.1.3-0.1.10, router/model_rpc.py: the prefill ("fill") batch
FILL_0_1_3 = (
    "new fill batch. #seq: 2. #cached_token: 100. #new_token: 300. #remaining_req: 7. "
    "#running_req: 4"
)
# 0.1.11-0.1.16, router/model_rpc.py: the cache hit rate since the start added, and a period
FILL_0_1_11 = (
    "new fill batch. #seq: 1. #cached_token: 330. #new_token: 2172. #remaining_req: 57. "
    "#running_req: 9. tree_cache_hit_rate: 69.16%."
)
# 0.1.17, srt/managers/controller/tp_worker.py (sic: "Prefil")
PREFIL_0_1_17 = (
    "[gpu_id=0] Prefil batch. #new-seq: 1, #new-token: 2172, #cached-token: 330, "
    "cache hit rate: 13.19%, #running-req: 9, #queue-req: 57"
)
# 0.1.18-0.2.6, controller/tp_worker.py ("[gpu_id=N] "); 0.2.7-0.2.13, managers/tp_worker.py
# ("[gpu=N] "): only the first TP rank of each DP worker prints them
DECODE_0_2 = (
    "[gpu{k}={g}] Decode batch. #running-req: {r}, #token: 400, token usage: 0.10, "
    "gen throughput (token/s): 100.00, #queue-req: {q}"
)
PREFILL_0_2 = (
    "[gpu{k}={g}] Prefill batch. #new-seq: 1, #new-token: 500, #cached-token: 1500, "
    "cache hit rate: 40.00%, #running-req: 3, #queue-req: 2"
)
# 0.2.14-0.3.1.post1, managers/tp_worker.py, with --enable-mixed-chunk: the decode requests run
# in the prefill batch in its label ("token usage" added from 0.3.1.post2, scheduler.py from 0.3.3)
MIXED_0_2_14 = (
    "[12:00:00 TP0] Prefill batch(mixed #running-req: 5). #new-seq: 1, #new-token: 500, "
    "#cached-token: 100, cache hit rate: 10.00%, #queue-req: 4"
)
# 0.1.3-0.1.16, router/model_rpc.py: the startup summary, one per TP rank
RANK_0_1 = (
    "Rank 0: max_total_num_token=21814, max_prefill_num_token=3636, context_len=32768, "
    "model_mode=[]"
)
# 0.1.6-0.2.13: a retraction
RETRACT_0_1 = (
    "decode out of memory happened, #retracted_reqs: 3, #new_token_ratio: 0.4000 -> 0.5000"
)


def test_0_1_decode_line_without_a_label_is_the_running_and_queued_load():
    counts = scan_lines([DECODE_0_1_3.format(r=10, q=57)])
    assert counts.load == {"": BatchLoad(10, 57, 5230, 0.24, None)}
    assert counts.decode_lines == 0  # no CUDA graph flag to count in these versions


def test_0_1_16_decode_line_gives_the_gen_throughput():
    counts = scan_lines([DECODE_0_1_16.format(r=10, q=57)])
    values = to_signals(counts, 10.0)
    assert values[s.GEN_THROUGHPUT] == 431.07
    assert values[s.NUM_QUEUE_REQS] == 57.0 and values[s.TOKEN_USAGE] == 0.24


def test_fill_line_remaining_requests_are_the_queue_and_its_tokens_the_prefix_hits():
    assert scan_lines([FILL_0_1_3]).load == {"": BatchLoad(4, 7)}
    assert scan_lines([FILL_0_1_11]).load == {"": BatchLoad(9, 57)}
    counts = scan_lines([FILL_0_1_11])
    assert (counts.prefill_lines, counts.prefill_new_tokens, counts.prefill_cached_tokens) == (
        1,
        2172,
        330,
    )
    values = to_signals(counts, 10.0)
    assert values[s.NUM_QUEUE_REQS] == 57.0 and values[s.NUM_RUNNING_REQS] == 9.0
    assert values[s.PREFIX_CACHE_HIT_RATIO] == 330 / 2502
    assert values[s.PROMPT_TOKENS_RATE] == 250.2


def test_fill_line_fields_take_the_later_lines_names():
    assert batch_fields(FILL_0_1_11) == {
        "#new-seq": "1",
        "#cached-token": "330",
        "#new-token": "2172",
        "#queue-req": "57",
        "#running-req": "9",
        "cache hit rate": "69.16%",
    }


def test_decode_line_load_is_kept_over_a_later_fill_line():
    counts = scan_lines([DECODE_0_1_16.format(r=10, q=5), FILL_0_1_3])
    assert counts.load[""].gen_throughput == 431.07  # the fuller load
    assert counts.prefill_new_tokens == 300


def test_0_1_17_prefil_line_is_a_prefill_batch():
    counts = scan_lines([PREFIL_0_1_17])
    assert (counts.prefill_new_tokens, counts.prefill_cached_tokens) == (2172, 330)
    assert counts.load == {"gpu0": BatchLoad(9, 57)}


def test_each_gpu_bracket_is_its_own_scheduler_summed_like_dp_ranks():
    for key in ("_id", ""):  # "[gpu_id=N] " to 0.2.6, "[gpu=N] " from 0.2.7
        lines = [
            DECODE_0_2.format(k=key, g=0, r=4, q=2),
            DECODE_0_2.format(k=key, g=2, r=6, q=1),
            PREFILL_0_2.format(k=key, g=2),
        ]
        values = to_signals(scan_lines(lines), 10.0)
        assert values[s.NUM_RUNNING_REQS] == 10.0 and values[s.NUM_QUEUE_REQS] == 3.0
        assert values[s.NUM_DP_RANKS] == 2.0 and values[s.GEN_THROUGHPUT] == 200.0
        assert values[s.PREFIX_CACHE_HIT_RATIO] == 0.75


def test_gpu_bracket_behind_a_wrappers_stamp_still_tells_the_schedulers_apart():
    lines = [
        f"[2024-07-01 10:00:0{g}] " + DECODE_0_2.format(k="", g=g, r=g + 1, q=0) for g in (0, 1, 0)
    ]
    counts = scan_lines(lines)
    assert {rank: load.running for rank, load in counts.load.items()} == {"gpu0": 1, "gpu1": 2}


def test_mixed_prefill_line_of_0_2_14_to_0_3_5_is_a_prefill_with_its_running_requests():
    counts = scan_lines([MIXED_0_2_14])
    assert (counts.prefill_new_tokens, counts.prefill_cached_tokens) == (500, 100)
    assert counts.load == {"": BatchLoad(5, 4)}


def test_0_1_startup_summary_and_retraction_are_read():
    counts = scan_lines([RANK_0_1, RANK_0_1.replace("Rank 0", "Rank 1"), RETRACT_0_1])
    assert counts.max_total_num_tokens == 21814
    assert counts.retracted_reqs == 3


def test_a_prompt_that_quotes_a_batch_line_is_no_batch_line_in_a_prefixed_log():
    lines = [
        "[2024-07-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 9, token usage: 0.00, "
        "gen throughput (token/s): 1.00, #queue-req: 0",
        FILL_0_1_11,  # unprefixed: a line of a prompt or a traceback, in a log with prefixes
    ]
    counts = scan_lines(lines)
    assert counts.prefill_lines == 0 and counts.load[""].queued == 0


def test_batch_lines_of_every_version_are_batch_lines_and_others_are_not():
    batch = [DECODE_0_1_3, FILL_0_1_3, PREFIL_0_1_17, DECODE_0_2, PREFILL_0_2, MIXED_0_2_14]
    assert all(is_batch_line(line) for line in batch)
    assert not is_batch_line("Cache not flushed because there are pending requests. #queue-req: 1")
    assert not is_batch_line(RANK_0_1)


def test_a_0_1_log_without_time_is_judged_by_its_batch_lines_order():
    lines = [FILL_0_1_11, *[DECODE_0_1_16.format(r=9, q=57 - i) for i in range(9)], "INFO: x"]
    history = LogHistory(lines, 5.0, 1_000_000.0, None, "the time it was read")
    samples = list(history.samples())
    assert history.note is not None and history.note.startswith("no timestamps: judged by line")
    assert samples[-1].ts == 1_000_000.0 and samples[0].ts == 1_000_000.0 - 9.0 + 5.0
    assert samples[-1].values[s.NUM_QUEUE_REQS] == 49.0


def test_check_log_reports_on_the_corpus_0_1_fill_batch_line(capsys):
    log = CORPUS / "v0.1-new-fill-batch-one-seq-remaining-57.log"
    assert main(["check", "--log", str(log), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "holds no SGLang log lines" not in captured.err
    report = json.loads(captured.out)
    assert "judged by line order" in captured.err
    reasons = [row["reason"] for row in report["no_data"] if row["target"] == log.name]
    assert reasons  # the rules were run on the line's signals
    assert not [r for r in reasons if "num_queue_reqs" in r or "num_running_reqs" in r]


def test_check_log_reads_a_pasted_0_1_log(tmp_path, capsys):
    lines = [RANK_0_1, FILL_0_1_11, *[DECODE_0_1_16.format(r=9, q=57) for _ in range(6)]]
    path = tmp_path / "sglang-0.1.log"
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (1_720_000_000.0, 1_720_000_000.0))
    assert main(["check", "--log", str(path)]) == 0
    captured = capsys.readouterr()
    assert "holds no SGLang log lines" not in captured.err
    assert "signal token_usage is not exposed" not in captured.out
