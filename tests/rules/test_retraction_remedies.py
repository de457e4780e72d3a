"""retractions_frequent weighs three remedies, each predicted: the guide's conservativeness
1.3, --max-running-requests down to the batch the pool holds, and the radix cache off."""

from dataclasses import replace

from helpers import evaluate, window_from
from scenario_harness import run_scenario
from sglang_sim import SCENARIOS
from sglang_sim.measure import measure
from sglang_tuner.model.advice import Finding, Pass, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.scheduling import RETRACTIONS_FREQUENT

from tests.retraction_storm import SERVER, STORM


def _storm(hit: float, config: ServerConfig = SERVER, **changes: str):  # type: ignore[no-untyped-def]
    series = {**STORM, "prefix_cache_hit_ratio": f"{hit}x20", **changes}
    return evaluate(RETRACTIONS_FREQUENT, window_from(**series), config=config)


def test_a_full_pool_retracting_gets_the_cap_it_holds_with_the_guides_change_as_alternative():
    out = _storm(hit=0.02)
    assert isinstance(out, Finding)
    # the pool holds 26 requests to their end; the peaks of 34 are what it retracts
    assert out.action.text == "--max-running-requests 64 -> 26"
    assert out.action.prediction is not None and out.action.prediction.gain is not None
    assert out.action.prediction.gain > 0.05 and out.severity is Severity.WARNING
    assert "26 requests per rank fit the pool to their end" in out.action.expected
    # the guide's change and the radix cache are stated with what each is predicted to do
    assert "alternatives: --schedule-conservativeness 1 -> 1.3: +0 % tok/s" in out.action.note
    assert "--disable-radix-cache false -> true: -1 % tok/s" in out.action.note


def test_a_high_prefix_hit_ratio_never_turns_the_radix_cache_off():
    out = _storm(hit=0.6)
    assert isinstance(out, Finding) and out.action.flag != "--disable-radix-cache"
    assert "radix cache off not weighed: prefix hit ratio 0.60 (only below 0.1)" in out.action.note


def test_the_radix_cache_is_not_weighed_without_seeing_it_evicted():
    out = _storm(hit=0.02, evicted_tokens_rate="0x20")
    assert isinstance(out, Finding)
    assert "no radix-cache eviction seen in the window" in out.action.note


LONG_OUTPUTS = {
    "num_running_reqs": "34x20", "gen_throughput": "1000x20", "generation_tokens_rate": "8000x20"
}  # fmt: skip


def test_the_guides_change_stays_when_a_cap_would_cost_the_batch():
    # a steady batch of 34 whose requests end at 4,000 output tokens: the pool holds 20 of them
    # to the end, and a batch of 20 loses more tokens/s than the retractions cost
    out = _storm(hit=0.02, **LONG_OUTPUTS)
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-conservativeness 1 -> 1.3"
    assert "--max-running-requests 64 -> 20: -" in out.action.note


def test_at_the_guides_value_only_a_cap_predicted_to_gain_is_advised():
    at_ceiling = replace(SERVER, schedule_conservativeness=1.3)
    out = _storm(hit=0.02, config=at_ceiling)
    assert isinstance(out, Finding) and out.action.text == "--max-running-requests 64 -> 26"
    assert "--schedule-conservativeness" not in out.action.note  # it is there already
    steady = _storm(hit=0.02, config=at_ceiling, **LONG_OUTPUTS)
    assert isinstance(steady, Pass)
    assert "no value of it stops them" in steady.detail
    assert "--max-running-requests 64 -> 20: -" in steady.detail


def test_under_attention_dp_the_cap_is_written_in_the_flags_units():
    # two attention-DP ranks share --max-running-requests 128 (64 each): the pool holds 26
    # per rank to their end, so the flag becomes 52
    dp = replace(SERVER, version="0.5.9", tp_size=2, dp_size=2, enable_dp_attention=True,
                 max_running_requests=128)  # fmt: skip
    out = _storm(hit=0.02, config=dp, num_dp_ranks="2x20",
                 num_running_reqs=" ".join(["40 68"] * 10),
                 gen_throughput=" ".join(["1400 2000"] * 10), retractions_per_minute="60x20",
                 request_rate="4x20", generation_tokens_rate="1700x20")  # fmt: skip
    assert isinstance(out, Finding) and out.action.text == "--max-running-requests 128 -> 52"
    assert "26 requests per rank fit the pool to their end" in out.action.expected


# The simulator's retraction storm at the guide's 1.3 with 3,000-token prompts and outputs run to
# 1,024 tokens: the pool overflows at its peaks.
STORM_AT_CEILING = SCENARIOS["retraction_storm"].for_version("0.5.23")
STORM_AT_CEILING = replace(
    STORM_AT_CEILING,
    knobs=replace(STORM_AT_CEILING.knobs, schedule_conservativeness=1.3),
    load=replace(STORM_AT_CEILING.load, prompt_mean=3000, max_new_tokens=1024),
)


def test_the_chosen_change_stops_most_retractions_on_the_simulator_at_little_throughput():
    run = run_scenario(
        "retraction_storm", config=STORM_AT_CEILING, gpu_model="NVIDIA H100 80GB HBM3"
    )
    finding = run.finding("retractions_frequent")
    assert finding.action.flag == "--max-running-requests"
    assert finding.action.suggested is not None
    cap = int(finding.action.suggested)
    before = measure(STORM_AT_CEILING, seconds=300.0)
    after = measure(replace(STORM_AT_CEILING, knobs=replace(STORM_AT_CEILING.knobs,
                                                            max_running_requests=cap)),
                    seconds=300.0)  # fmt: skip
    assert after.retractions_per_min < 0.5 * before.retractions_per_min
    assert after.gen_throughput >= 0.9 * before.gen_throughput


def test_the_guides_change_from_sglangs_default_is_predicted_to_change_nothing_as_measured():
    # from 1.0 the ratio's floor rises by a third and each retraction resets it from the kept
    # batch: the storm's batch stays, so 1.3 is said to gain nothing (usage 0.84, not 0.9)
    swinging = " ".join(["0.7 0.97"] * 10)
    out = _storm(hit=0.02, token_usage=swinging)
    assert isinstance(out, Finding)
    assert "--schedule-conservativeness 1 -> 1.3: +0 % tok/s" in out.action.note
    assert "admission, token usage and the batch (27 per rank) stay as they are" in out.action.note
    # from 0.3 the floor is 4x higher: the pool fills toward 0.9
    low = _storm(
        hit=0.02, token_usage=swinging, config=replace(SERVER, schedule_conservativeness=0.3)
    )
    assert isinstance(low, Finding)
    assert "a steadier admission keeps the pool near 0.9" in low.action.note + low.action.expected
    # the simulator's storm: 1.0 -> 1.3 moves tokens/s and token usage by under 2 %
    storm = SCENARIOS["retraction_storm"].for_version("0.5.23")
    at = {c: measure(replace(storm, knobs=replace(storm.knobs, schedule_conservativeness=c)),
                     seconds=300.0) for c in (1.0, 1.3)}  # fmt: skip
    assert abs(at[1.3].gen_throughput / at[1.0].gen_throughput - 1) < 0.02
    assert abs(at[1.3].token_usage - at[1.0].token_usage) < 0.02
