"""What a change predicts on a simulated online server, read through the daemon's own pipeline
(`tests/scenario_harness.py`): every latency objective, TTFT p99 and ITL p99 included."""

from tests.scenario_harness import run_scenario

H100 = "NVIDIA H100 80GB HBM3"


def test_a_latency_cap_on_a_busy_online_server_states_ttft_p99_and_itl_p99():
    run = run_scenario("online_batch_too_large", profile="online", gpu_model=H100)
    finding = run.finding("batch_too_large_for_latency")
    p = finding.action.prediction
    assert p is not None and p.objective == "ITL p50" and p.gain is not None and p.gain > 0
    # the clients keep their concurrency: more of them wait for the fewer slots
    ttft, _low, _high = p.effects["TTFT p99"]
    assert ttft > 0
    # the prefill a decode step waits for shrinks with the batch: the tail falls further
    itl_p99, low, high = p.effects["ITL p99"]
    assert itl_p99 < -0.3 and low < itl_p99 < high
    assert "ITL p99 " in p.basis and "TTFT p99 unbounded" not in p.basis
