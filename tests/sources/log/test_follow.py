"""SGLang log lines of every version (reference §9), and following a real file like `tail -F`."""

import dataclasses
import os
from pathlib import Path

import pytest
from sglang_tuner.model import signals as s
from sglang_tuner.sources.log.drain import MAX_LINE_BYTES
from sglang_tuner.sources.log.follow import (
    LogCounts,
    LogFollower,
    last_startup_lines,
    scan_lines,
    to_signals,
)
from sglang_tuner.sources.log.lines import BatchLoad

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"

EXPECTED = {  # version: (retracted, decode lines, no-graph, tokens, GB), then crash counts
    # and the largest batch a no-graph line ran
    "0.4.6": LogCounts(3, 0, 0, 401000, None),
    "0.4.10": LogCounts(1, 2, 1, 665690, 13.5, kv_pool_exhausted=1, eager_batch_max=301),
    "0.5.4": LogCounts(3, 2, 1, 500000, 20.95, eager_batch_max=600),
    "0.5.9": LogCounts(2, 2, 0, 820000, 20.9, kv_pool_exhausted=1),
    "0.5.17": LogCounts(5, 2, 1, 412000, 7.25, kv_pool_exhausted=1, eager_batch_max=300),
}


# version: each scheduler's latest load, (prefill lines, new tokens, cached tokens)
EXPECTED_LOAD = {
    "0.4.6": ({"": BatchLoad(233, 317, 370959, 0.92, 4594.01)}, (1, 8192, 1200)),
    "0.4.10": ({"": BatchLoad(301, 250, 420000, 0.95, 3900.10)}, (1, 4096, 0)),
    "0.5.4": (
        {
            "0": BatchLoad(100, 20, 400000, 0.80, 3000.0),
            "1": BatchLoad(600, 10, 490000, 0.98, 2000.0),
        },
        (0, 0, 0),
    ),
    "0.5.9": ({"": BatchLoad(121, 29, 412000, 0.51, 5120.0)}, (1, 8192, 2048)),
    "0.5.17": ({"": BatchLoad(91, 11, 290000, 0.70, 2600.0)}, (1, 6000, 9000)),
}


def _events(counts: LogCounts) -> LogCounts:
    """The counts without the load, prefill tokens, crash diagnoses and startup memory (tested
    on their own: test_lines.py, test_crash.py, test_startup.py)."""
    return dataclasses.replace(
        counts,
        load={},
        prefill_lines=0,
        prefill_new_tokens=0,
        prefill_cached_tokens=0,
        server_args=None,
        crashes=(),
        startup_memory={},
    )


@pytest.mark.parametrize("version", list(EXPECTED))
def test_scan_lines_reads_every_version_format(version: str) -> None:
    lines = (LOGS / f"v{version}.log").read_text().splitlines()
    assert _events(scan_lines(lines)) == EXPECTED[version]


@pytest.mark.parametrize("version", list(EXPECTED_LOAD))
def test_scan_lines_reads_each_schedulers_latest_load_in_every_version(version: str) -> None:
    counts = scan_lines((LOGS / f"v{version}.log").read_text().splitlines())
    load, prefill = EXPECTED_LOAD[version]
    assert counts.load == load
    assert (
        counts.prefill_lines,
        counts.prefill_new_tokens,
        counts.prefill_cached_tokens,
    ) == prefill


def test_to_signals_combines_dp_ranks_as_the_metrics_do() -> None:
    counts = scan_lines((LOGS / "v0.5.4.log").read_text().splitlines())
    values = to_signals(counts, 10.0)
    assert values[s.NUM_RUNNING_REQS] == 700 and values[s.NUM_RUNNING_REQS_MAX_RANK] == 600
    assert values[s.NUM_QUEUE_REQS] == 30 and values[s.NUM_DP_RANKS] == 2
    assert values[s.TOKEN_USAGE] == pytest.approx(0.89)  # the mean over ranks
    assert values[s.NUM_USED_TOKENS] == 890000 and values[s.GEN_THROUGHPUT] == 5000.0


def test_to_signals_prefix_hits_and_prompt_rate_from_prefill_lines() -> None:
    counts = scan_lines((LOGS / "v0.5.17.log").read_text().splitlines())
    values = to_signals(counts, 60.0)
    assert values[s.PREFIX_CACHE_HIT_RATIO] == pytest.approx(0.6)  # 9000 of 15000
    assert values[s.PROMPT_TOKENS_RATE] == pytest.approx(250.0)


def test_to_signals_without_batch_lines_gives_no_load() -> None:
    values = to_signals(scan_lines(["[2025-01-01 00:00:00] some other line"]), 5.0)
    assert s.NUM_QUEUE_REQS not in values and s.TOKEN_USAGE not in values


def test_scan_lines_guide_examples() -> None:
    counts = scan_lines(
        [
            "Decode batch. #running-req: 233, #token: 370959, token usage: 0.82, cuda graph: True, "
            "gen throughput (token/s): 4594.01, #queue-req: 317",
            "KV cache pool is full. Retract requests. #retracted_reqs: 1, "
            "#new_token_ratio: 0.9998 -> 1.0000",
            "[2025-08-11 17:17:03] max_total_num_tokens=665690, chunked_prefill_size=8192, "
            "max_prefill_tokens=16384, max_running_requests=4096, context_len=65536, "
            "available_gpu_mem=13.50 GB",
        ]
    )
    assert _events(counts) == LogCounts(1, 1, 0, 665690, 13.5)
    assert counts.load[""] == BatchLoad(233, 317, 370959, 0.82, 4594.01)


def test_scan_lines_older_guide_retraction_spelling() -> None:
    line = "decode out of memory happened, #retracted_reqs: 1, #new_token_ratio: 0.9998 -> 1.0000"
    assert scan_lines([line]) == LogCounts(retracted_reqs=1)  # not an OOM: a retraction


@pytest.mark.parametrize(
    "line",
    [
        "decode out of memory happened, #retracted_reqs: 2, #new_token_ratio: 0.4 -> 0.6",  # 0.1.x
        "Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: 0.4 -> 0.6",  # -0.4.6
        "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 1 -> 1",
        "KV cache pool is full. Retract requests. #retracted_reqs: 2, "
        "#aborted_retracted_reqs: 0, #new_token_ratio: 0.5000 -> 0.8000",  # 0.5.4
        "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_tokens_gained: 8192, "
        "#mamba_num_gained: 2, #new_token_ratio: 0.3000 -> 0.6000",  # 0.5.11+
        "Testing retraction. #retracted_reqs: 2, #new_tokens_gained: 100",  # SGLANG_TEST_RETRACT
    ],
)
def test_scan_lines_reads_every_retraction_spelling(line: str) -> None:
    assert scan_lines([f"[2026-01-01 00:00:00 TP0] {line}"]) == LogCounts(retracted_reqs=2)


def test_scan_lines_counts_a_retraction_once_across_tp_ranks() -> None:
    line = "Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1 -> 0.2"
    ranks = [f"[2025-03-07 21:49:45 TP{tp}] {line}" for tp in range(8)]
    again = f"[2025-03-07 21:49:45 TP3] {line}"  # the same rank again: a second retraction
    dp_rank = f"[2025-03-07 21:49:45 DP1 TP1] {line}"  # another scheduler
    assert scan_lines([*ranks, again, dp_rank]).retracted_reqs == 3


def test_scan_lines_cpu_graph_label_counts_as_graph_flag() -> None:
    line = "Decode batch, #running-req: 1, #token: 5, token usage: 0.01, cpu graph: False, "
    assert scan_lines([line + "gen throughput (token/s): 1.00, #queue-req: 0"]).decode_lines == 1


def test_to_signals_rates_retractions_per_minute() -> None:
    values = to_signals(LogCounts(retracted_reqs=3, decode_lines=4, decode_without_graph=1), 30.0)
    assert values[s.RETRACTIONS_PER_MINUTE] == 6.0
    assert values[s.CUDA_GRAPH_FALSE_RATIO] == 0.25
    assert all(values[signal] == 0.0 for signal in s.CRASH_EVENT_SIGNALS)


def test_to_signals_maps_each_crash_kind_to_its_signal() -> None:
    counts = LogCounts(
        cuda_graph_capture_oom=1,
        prefill_oom=2,
        decode_oom=3,
        kv_pool_exhausted=4,
        startup_not_enough_memory=5,
        allocator_bug=7,
        other_crash=6,
    )
    values = to_signals(counts, 5.0)
    got = [values[signal] for signal in s.CRASH_EVENT_SIGNALS]
    assert got == [2.0, 3.0, 1.0, 4.0, 5.0, 7.0, 6.0]


def test_to_signals_first_poll_has_no_rate() -> None:
    assert s.RETRACTIONS_PER_MINUTE not in to_signals(LogCounts(retracted_reqs=3), None)


RETRACT = (
    "[2026-08-08 12:10:03 TP0] KV cache pool is full. Retract requests. "
    "#retracted_reqs: {n}, #new_token_ratio: 0.3 -> 0.6\n"
)
STARTUP = (
    "[2026-08-08 12:00:40 TP0] max_total_num_tokens={n}, chunked_prefill_size=8192, "
    "available_gpu_mem={gb} GB\n"
)


def append(path: Path, text: str) -> None:
    """Append like a logger does."""
    with path.open("a") as handle:
        handle.write(text)


def test_log_follower_reads_startup_once_then_only_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(STARTUP.format(n=412000, gb="7.25") + RETRACT.format(n=9))
    follower = LogFollower(log)
    first = follower.poll(100.0)
    assert first[s.STARTUP_AVAILABLE_GPU_MEM_GB] == 7.25
    assert first[s.MAX_TOTAL_NUM_TOKENS] == 412000.0
    assert s.RETRACTIONS_PER_MINUTE not in first  # old retractions are history, not a rate
    append(log, RETRACT.format(n=2))
    second = follower.poll(160.0)
    assert second[s.RETRACTIONS_PER_MINUTE] == 2.0
    assert second[s.STARTUP_AVAILABLE_GPU_MEM_GB] == 7.25


def test_log_follower_waits_for_missing_file(tmp_path: Path) -> None:
    follower = LogFollower(tmp_path / "later.log")
    assert follower.poll(1.0) == {}
    (tmp_path / "later.log").write_text(STARTUP.format(n=1000, gb="6.00"))
    assert follower.poll(2.0)[s.STARTUP_AVAILABLE_GPU_MEM_GB] == 6.0


def test_log_follower_keeps_partial_line_until_complete(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    follower = LogFollower(log)
    follower.poll(0.0)
    line = RETRACT.format(n=3)
    append(log, line[:30])
    assert follower.poll(60.0)[s.RETRACTIONS_PER_MINUTE] == 0.0
    append(log, line[30:])
    assert follower.poll(120.0)[s.RETRACTIONS_PER_MINUTE] == 3.0


def test_log_follower_survives_rotation(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(STARTUP.format(n=1000, gb="9.00"))
    follower = LogFollower(log)
    follower.poll(0.0)
    append(log, RETRACT.format(n=1))  # written just before rotation
    os.rename(log, tmp_path / "sglang.log.1")
    log.write_text(STARTUP.format(n=2000, gb="5.50") + RETRACT.format(n=2))  # restarted server
    values = follower.poll(60.0)
    assert values[s.RETRACTIONS_PER_MINUTE] == 3.0
    assert values[s.STARTUP_AVAILABLE_GPU_MEM_GB] == 5.5
    append(log, RETRACT.format(n=4))
    assert follower.poll(120.0)[s.RETRACTIONS_PER_MINUTE] == 4.0


def test_log_follower_survives_truncation(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(RETRACT.format(n=1) * 20)
    follower = LogFollower(log)
    follower.poll(0.0)
    log.write_text(RETRACT.format(n=5))  # copytruncate, then a new line
    assert follower.poll(60.0)[s.RETRACTIONS_PER_MINUTE] == 5.0


def test_log_follower_counts_pool_exhaustion_once_since_last_poll(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    follower = LogFollower(log)
    follower.poll(0.0)
    append(
        log,
        "[2026-01-01 00:00:00 TP0] Prefill out of memory. Try to lower your batch size.\n"
        "Try to allocate 8 tokens.\n",
    )
    values = follower.poll(5.0)
    assert values[s.KV_POOL_EXHAUSTED_EVENTS] == 1.0
    assert (values[s.PREFILL_OOM_EVENTS], values[s.DECODE_OOM_EVENTS]) == (0.0, 0.0)
    append(log, "[2026-01-01 00:00:00 TP0] RuntimeError: Prefill out of memory. Try to lower\n")
    assert follower.poll(10.0)[s.KV_POOL_EXHAUSTED_EVENTS] == 0.0  # the same crash's traceback
    follower.close()


TRACEBACK = (
    "[2026-01-01 00:00:{sec:02d} TP{tp}] Scheduler hit an exception: Traceback (most recent ...\n"
    '  File "/x/sglang/srt/model_executor/model_runner.py", line 9, in forward_decode\n'
    "    return self.model.forward(\n"
)
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"


def test_log_follower_joins_a_traceback_split_across_polls(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    follower = LogFollower(log)
    follower.poll(0.0)
    append(log, TRACEBACK.format(sec=0, tp=0))
    assert follower.poll(5.0)[s.OTHER_CRASH_EVENTS] == 0.0  # not decided while it may go on
    append(log, OOM + TRACEBACK.format(sec=1, tp=1) + OOM)  # the end, then TP1's copy
    assert follower.poll(10.0)[s.DECODE_OOM_EVENTS] == 1.0
    later = [follower.poll(t) for t in (15.0, 20.0)]
    assert all(v[s.DECODE_OOM_EVENTS] == v[s.OTHER_CRASH_EVENTS] == 0.0 for v in later)


def test_log_follower_decides_other_crash_after_a_quiet_poll(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    follower = LogFollower(log)
    follower.poll(0.0)
    append(log, "[2026-01-01 00:00:00 DP4 TP4] Watchdog timeout (self.watchdog_timeout=300)\n")
    assert follower.poll(5.0)[s.OTHER_CRASH_EVENTS] == 0.0
    assert follower.poll(10.0)[s.OTHER_CRASH_EVENTS] == 1.0
    assert follower.poll(15.0)[s.OTHER_CRASH_EVENTS] == 0.0


@pytest.mark.parametrize(
    ("line", "graph_off"),
    [
        (  # v0.4.6.post4-v0.4.9
            "Decode batch. #running-req: 9, #token: 90, token usage: 0.10, "
            "pre-allocated usage: 0.00, cuda graph: False, gen throughput (token/s): 1.00, "
            "#queue-req: 0",
            1,
        ),
        (  # v0.5.4.post1-v0.5.8: comma after "batch", trailing ", "
            "Decode batch, #running-req: 9, #token: 90, token usage: 0.10, cuda graph: True, "
            "gen throughput (token/s): 1.00, #queue-req: 0, ",
            0,
        ),
        (  # PD decode node: "#retracted-req" is a queue length, not a retraction event
            "Decode batch, #running-req: 9, #full token: 90, full token usage: 0.10, "
            "#swa token: 5, swa token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, "
            "#transfer-req: 0, #retracted-req: 3, npu graph: False, "
            "gen throughput (token/s): 1.00, #queue-req: 0",
            1,
        ),
    ],
)
def test_scan_lines_decode_variants(line: str, graph_off: int) -> None:
    counts = scan_lines([f"[2026-01-01 00:00:00 DP0 TP0] {line}"])
    assert (counts.decode_lines, counts.decode_without_graph, counts.retracted_reqs) == (
        1,
        graph_off,
        0,
    )


def test_scan_lines_raw_torch_oom_takes_the_phase_of_the_last_batch() -> None:
    prefill = (
        "[2026-11-22 10:00:00 TP0] Prefill batch, #new-seq: 4, #new-token: 20480, "
        "#cached-token: 0, "
        "token usage: 0.50, #running-req: 10, #queue-req: 5, "
    )
    decode = (
        "[2026-11-22 10:00:01 TP0] Decode batch, #running-req: 10, #token: 5000, "
        "token usage: 0.50, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 5"
    )
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    counts = scan_lines([prefill, oom, decode, oom])
    assert (counts.prefill_oom, counts.decode_oom) == (1, 1)


def test_log_follower_keeps_the_latest_launch_lines_flags(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(
        "[2026-10-12 07:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct'"
        ", chunked_prefill_size=8192, mem_fraction_static=0.965)\n"
    )
    follower = LogFollower(log)
    follower.poll(1.0)
    assert follower.launched is not None and follower.launched.chunked_prefill_size == 8192
    with log.open("a") as f:  # the server crashed and was started again with a smaller chunk
        f.write(
            "[2026-10-12 07:01:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-"
            "Instruct', chunked_prefill_size=4096, mem_fraction_static=0.965)\n"
        )
    follower.poll(2.0)
    assert follower.launched.chunked_prefill_size == 4096
    follower.poll(3.0)  # no new launch line: the latest one stands
    assert follower.launched.mem_fraction_static == 0.965


def test_last_startup_lines_are_the_latest_launch_and_summary_in_file_order(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_bytes(
        b"server_args=ServerArgs(chunked_prefill_size=8192)\n"
        b"x max_total_num_tokens=1000, available_gpu_mem=3.0 GB\n"
        b"decode\n"
        b"server_args=ServerArgs(chunked_prefill_size=4096)\n"  # started again, no summary yet
    )
    for chunk in (7, 64, 1 << 20):  # marks and lines across read boundaries
        with log.open("rb") as handle:
            lines = last_startup_lines(handle, chunk_bytes=chunk)
        assert lines == [
            "x max_total_num_tokens=1000, available_gpu_mem=3.0 GB",
            "server_args=ServerArgs(chunked_prefill_size=4096)",
        ], chunk


def test_last_startup_lines_holds_no_line_past_the_limit(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    long_launch = b"server_args=ServerArgs(chunked_prefill_size=2048, " + b"x" * 100_000 + b")\n"
    log.write_bytes(
        b"x max_total_num_tokens=1000, available_gpu_mem=3.0 GB\n"
        + long_launch
        + b"y" * 300_000  # an unfinished line of 300 KB
    )
    for chunk in (7, 4096, 1 << 20):
        with log.open("rb") as handle:
            lines = last_startup_lines(handle, chunk_bytes=chunk)
        assert lines[0] == "x max_total_num_tokens=1000, available_gpu_mem=3.0 GB", chunk
        assert lines[1].startswith("server_args=ServerArgs(chunked_prefill_size=2048, x"), chunk
        assert max(len(line) for line in lines) <= MAX_LINE_BYTES, chunk


def test_last_startup_lines_reads_up_to_the_end_it_is_given(tmp_path: Path) -> None:
    # the start-up scan stops at the file's size when it was opened: lines written while it
    # runs are new lines, read by the next poll, not history passed over
    log = tmp_path / "sglang.log"
    first = b"server_args=ServerArgs(chunked_prefill_size=8192)\n"
    log.write_bytes(first + b"server_args=ServerArgs(chunked_prefill_size=4096)\n")
    with log.open("rb") as handle:
        assert last_startup_lines(handle, chunk_bytes=7, end=len(first)) == [
            "server_args=ServerArgs(chunked_prefill_size=8192)"
        ]
        assert handle.tell() == len(first)


def test_log_follower_cuts_a_long_line_of_a_file_as_it_reads_and_reads_on(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    follower = LogFollower(log)
    follower.poll(0.0)
    with log.open("r+b") as handle:  # 20 MB of NUL bytes (a hole), then a retraction line
        handle.seek(20 * 1024 * 1024)
        handle.write(b"\n" + RETRACT.format(n=3).encode())
    assert follower.poll(60.0)[s.RETRACTIONS_PER_MINUTE] == 3.0  # past it in one poll
    assert (follower.lines_cut, follower.dropped_lines) == (1, 0)


def test_to_signals_gives_the_startup_memory_lines_as_signals() -> None:
    p = "[2025-06-01 10:00:00 TP0] "
    values = to_signals(
        scan_lines(
            [
                p + "Load weight begin. avail mem=78.50 GB",
                p + "Load weight end. type=X, dtype=torch.bfloat16, avail mem=63.40 GB, "
                "mem usage=15.10 GB.",
                p + "KV Cache is allocated. #tokens: 400000, K size: 24.00 GB, V size: 24.00 GB",
                p + "Memory pool end. avail mem=15.20 GB",
            ]
        ),
        None,
    )
    assert {k: values[k] for k in s.STARTUP_MEMORY_SIGNALS} == {
        s.STARTUP_FREE_BEFORE_LOAD_GB: 78.5,
        s.STARTUP_FREE_AFTER_LOAD_GB: 63.4,
        s.STARTUP_WEIGHTS_GB: 15.1,
        s.STARTUP_KV_POOL_GB: 48.0,
        s.STARTUP_FREE_AFTER_POOL_GB: 15.2,
    }
    assert values[s.MAX_TOTAL_NUM_TOKENS] == 400000.0


def test_log_follower_says_each_crash_in_words_at_the_poll_that_decided_it(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    follower = LogFollower(log)
    follower.poll(0.0)
    append(
        log,
        "[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/srt/managers/scheduler.py", line 1, in event_loop_normal\n'
        "RuntimeError: NCCL error: unhandled system error\n",
    )
    follower.poll(5.0)
    follower.poll(10.0)
    assert follower.crashes == ()  # other ranks' copies get their polls to arrive
    assert follower.poll(15.0)[s.OTHER_CRASH_EVENTS] == 1.0
    (report,) = follower.crashes  # counted and said at the same poll
    assert (report.ts, report.cls, report.kind) == (15.0, "not_tuning", "driver")
    assert report.message == "RuntimeError: NCCL error: unhandled system error"
    follower.poll(20.0)
    assert follower.crashes == ()


def test_a_follower_attached_after_startup_still_reads_the_startup_memory(tmp_path: Path) -> None:
    # the daemon starts after the server: the weights', pool's and graphs' lines between the
    # launch line and the summary are read once, so the pool's size is known (not only the
    # free memory the summary names)
    log = tmp_path / "sglang.log"
    stamp = "[2026-10-12 07:00:00 TP0] "
    log.write_text(
        "".join(
            stamp + line + "\n"
            for line in (
                "server_args=ServerArgs(model_path='Qwen/Qwen3-8B', chunked_prefill_size=2048)",
                "Load weight begin. avail mem=21.50 GB",
                "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=13.20 GB,"
                " mem usage=8.30 GB.",
                "KV Cache is allocated. #tokens: 54296, K size: 2.00 GB, V size: 2.00 GB",
                "Memory pool end. avail mem=9.30 GB",
                "max_total_num_tokens=54296, chunked_prefill_size=2048, max_prefill_tokens=16384, "
                "max_running_requests=2048, context_len=40960, available_gpu_mem=9.14 GB",
                "Decode batch, #running-req: 15, #token: 48000, token usage: 0.89, cuda graph: "
                "True, gen throughput (token/s): 300.00, #queue-req: 700",
            )
        )
    )
    values = LogFollower(log).poll(1.0)
    assert values["startup_kv_pool_gb"] == 4.0
    assert values["startup_available_gpu_mem_gb"] == 9.14
    assert values["startup_weights_gb"] == 8.3


def test_the_startup_block_starts_at_the_weights_without_a_launch_line(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_bytes(
        b"decode\n"
        b"Load weight end. type=X, dtype=torch.bfloat16, avail mem=13.20 GB, mem usage=8.30 GB.\n"
        b"KV Cache is allocated. #tokens: 54296, K size: 2.00 GB, V size: 2.00 GB\n"
        b"max_total_num_tokens=54296, available_gpu_mem=9.14 GB\n"
        b"decode\n"
    )
    with log.open("rb") as handle:
        lines = last_startup_lines(handle, chunk_bytes=16)
    assert [line[:20] for line in lines] == [
        "Load weight end. typ",
        "KV Cache is allocate",
        "max_total_num_tokens",
    ]
    # a launch line after the summary (a restart under way) keeps the marks alone
    with log.open("ab") as f:
        f.write(b"server_args=ServerArgs(chunked_prefill_size=4096)\n")
    with log.open("rb") as handle:
        lines = last_startup_lines(handle)
    assert lines[-1] == "server_args=ServerArgs(chunked_prefill_size=4096)"
    assert not any(line.startswith("KV Cache") for line in lines)
