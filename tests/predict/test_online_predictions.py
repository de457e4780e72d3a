"""What a change predicts on a simulated online server, read through the daemon's own pipeline
(`tests/scenario_harness.py`): every latency objective, TTFT p99 and ITL p99 included."""

from dataclasses import replace

from sglang_sim import SCENARIOS
from sglang_sim.measure import measure

from tests.scenario_harness import run_scenario

H100 = "NVIDIA H100 80GB HBM3"


def test_a_latency_cap_on_a_busy_online_server_states_ttft_p99_and_itl_p99():
    run = run_scenario("online_batch_too_large", profile="online", gpu_model=H100)
    finding = run.finding("batch_too_large_for_latency")
    p = finding.action.prediction
    assert p is not None and p.objective == "ITL p50" and p.gain is not None and p.gain > 0
    # the clients keep their concurrency: more of them wait for the fewer slots, each admitted
    # as one leaves: TTFT p99 as the simulator measures it, within 10 points, over the window
    # the judgement read (60-360 s: the server still settles) before and after the change
    ttft, _low, _high = p.effects["TTFT p99"]
    base = SCENARIOS["online_batch_too_large"].for_version("0.5.23")
    assert finding.action.suggested is not None
    cap = int(finding.action.suggested)
    capped = replace(base, knobs=replace(base.knobs, max_running_requests=cap))
    before, after = (measure(c, seconds=300.0, seed=1) for c in (base, capped))
    measured = after.ttft_p99 / before.ttft_p99 - 1
    assert abs(ttft - measured) < 0.10, (ttft, before, after)
    # ITL p50 (the objective): the decode step at the capped batch plus the prefill of the
    # requests admitted one per departure, which more than half the steps now wait for
    measured = after.itl_p50 / before.itl_p50 - 1
    assert abs(-p.gain - measured) < 0.10, (p.gain, measured)
    # the prefill a decode step waits for shrinks with the batch: the tail falls further
    itl_p99, low, high = p.effects["ITL p99"]
    assert itl_p99 < -0.3 and low < itl_p99 < high
    assert "ITL p99 " in p.basis and "TTFT p99 unbounded" not in p.basis
