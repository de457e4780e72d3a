"""SGLang log lines of every version (reference §9), and following a real file like `tail -F`."""

import os
from pathlib import Path

import pytest
from sglang_tuner import signals as s
from sglang_tuner.sources.logs import LogCounts, LogFollower, scan_lines, to_signals

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "sglang" / "logs"

EXPECTED = {  # version: (retracted, prefill oom, decode oom, decode lines, no-graph, tokens, GB)
    "0.4.6": LogCounts(3, 0, 0, 0, 0, 401000, None),
    "0.4.10": LogCounts(1, 1, 0, 2, 1, 665690, 13.5),
    "0.5.4": LogCounts(3, 0, 0, 2, 1, 500000, 20.95),
    "0.5.9": LogCounts(2, 0, 1, 2, 0, 820000, 20.9),
    "0.5.17": LogCounts(5, 0, 1, 2, 1, 412000, 7.25),
}


@pytest.mark.parametrize("version", list(EXPECTED))
def test_scan_lines_reads_every_version_format(version: str) -> None:
    lines = (LOGS / f"v{version}.log").read_text().splitlines()
    assert scan_lines(lines) == EXPECTED[version]


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
    assert counts == LogCounts(1, 0, 0, 1, 0, 665690, 13.5)


def test_scan_lines_cpu_graph_label_counts_as_graph_flag() -> None:
    line = "Decode batch, #running-req: 1, #token: 5, token usage: 0.01, cpu graph: False, "
    assert scan_lines([line + "gen throughput (token/s): 1.00, #queue-req: 0"]).decode_lines == 1


def test_to_signals_rates_retractions_per_minute() -> None:
    values = to_signals(LogCounts(retracted_reqs=3, decode_lines=4, decode_without_graph=1), 30.0)
    assert values[s.RETRACTIONS_PER_MINUTE] == 6.0
    assert values[s.CUDA_GRAPH_FALSE_RATIO] == 0.25
    assert values[s.PREFILL_OOM_EVENTS] == 0.0


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


def test_log_follower_counts_oom_lines_since_last_poll(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    follower = LogFollower(log)
    follower.poll(0.0)
    append(
        log,
        "[x TP0] Prefill out of memory. Try to lower your batch size.\nTry to allocate 8 tokens.\n",
    )
    values = follower.poll(5.0)
    assert (values[s.PREFILL_OOM_EVENTS], values[s.DECODE_OOM_EVENTS]) == (1.0, 0.0)
    assert follower.poll(10.0)[s.PREFILL_OOM_EVENTS] == 0.0
    follower.close()


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


def test_scan_lines_raw_torch_oom_takes_the_phase_of_the_last_batch():
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
