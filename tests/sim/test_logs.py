"""Log lines in each version's format, and the log file a simulated server writes."""

from __future__ import annotations

import re

from sglang_sim import SCENARIOS, ServerModel
from sglang_sim.logs import LogWriter, decode_line, prefill_line, retract_line

GAUGES = {
    "num_running_reqs": 233,
    "num_used_tokens": 370959,
    "token_usage": 0.82,
    "gen_throughput": 4594.01,
    "num_queue_reqs": 317,
}


def test_decode_line_old_version_has_trailing_comma():
    line = decode_line((0, 4, 10), GAUGES, True)
    assert line == (
        "Decode batch. #running-req: 233, #token: 370959, token usage: 0.82, "
        "cuda graph: True, gen throughput (token/s): 4594.01, #queue-req: 317, "
    )


def test_decode_line_new_version_comma_after_batch_and_no_trailing_comma():
    line = decode_line((0, 5, 23), GAUGES, False)
    assert line.startswith("Decode batch, #running-req: 233")
    assert line.endswith("cuda graph: False, gen throughput (token/s): 4594.01, #queue-req: 317")


def test_prefill_line_field_order_per_version():
    old = prefill_line((0, 5, 9), GAUGES, 2, 100, 50, 10.0)
    new = prefill_line((0, 5, 23), GAUGES, 2, 100, 50, 10.0)
    assert old.endswith("input throughput (token/s): 10.00, cuda graph: False")
    assert "#pending-token: 0, cuda graph: False, input throughput (token/s): 10.00" in new


def test_retract_line_gains_new_tokens_field_in_0_5_7():
    assert retract_line((0, 4, 10), 1, 5, 0.9998, 1.0) == (
        "KV cache pool is full. Retract requests. #retracted_reqs: 1, "
        "#new_token_ratio: 0.9998 -> 1.0000"
    )
    assert "#new_tokens_gained: 5, " in retract_line((0, 5, 23), 1, 5, 0.5, 0.6)


def test_log_file_has_startup_decode_retraction_and_oom_lines(tmp_path):
    path = tmp_path / "sglang.log"
    for scenario in ("retraction_storm", "crash_loop"):
        log = LogWriter(str(path), "0.5.23", epoch=1_760_000_000.0)
        ServerModel(SCENARIOS[scenario].config, seed=1, log=log).advance_to(90.0)
        log.close()
    text = path.read_text()
    assert re.search(
        r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] max_total_num_tokens=\d+, "
        r"chunked_prefill_size=8192, .*available_gpu_mem=\d+\.\d\d GB$",
        text,
        re.M,
    )
    assert re.search(r"\] Decode batch, #running-req: \d+", text)
    assert re.search(r"\] KV cache pool is full\. Retract requests\. #retracted_reqs: \d+", text)
    assert "torch.OutOfMemoryError: CUDA out of memory." in text
