"""Each scenario's metrics show its symptom over a minute of simulated time (model, no HTTP)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sglang_sim import SCENARIOS, ServerModel

WARMUP = 60.0  # the first minute fills the KV pool and lets new_token_ratio decay


def run(
    scenario: str, minutes: float = 1.0, seed: int = 3, step: float = 5.0, **knob_changes: object
) -> tuple[ServerModel, list[dict[str, float]]]:
    """Scrape-like samples of rank 0's gauges every `step` s after the warm-up."""
    config = SCENARIOS[scenario].config
    if knob_changes:
        config = replace(config, knobs=replace(config.knobs, **knob_changes))
    model = ServerModel(config, seed=seed)
    samples = []
    t = WARMUP
    while t <= WARMUP + minutes * 60:
        model.advance_to(t)
        if model.status() == "up":
            samples.append(dict(model.ranks[0].gauges))
        t += step
    return model, samples


def fraction(samples: list[dict[str, float]], predicate) -> float:
    """Share of samples where the predicate holds."""
    return sum(1 for s in samples if predicate(s)) / len(samples)


def retractions(model: ServerModel) -> float:
    """The retraction counter of rank 0."""
    return model.ranks[0].stats.counters.get("num_retracted_requests_total", {}).get((), 0.0)


def hit_rate(model: ServerModel) -> float:
    """cached_tokens_total / prompt_tokens_total, the way the guide's signal is read."""
    counters = model.tok.counters
    cached = sum(counters.get("cached_tokens_total", {}).values())
    return cached / max(sum(counters.get("prompt_tokens_total", {}).values()), 1.0)


def test_healthy_shows_no_symptom_over_a_minute():
    model, samples = run("healthy")
    assert fraction(samples, lambda s: 100 <= s["num_queue_reqs"] <= 2000) >= 0.9
    assert fraction(samples, lambda s: s["token_usage"] > 0.9) >= 0.7
    assert retractions(model) < 1
    assert max(s["num_running_reqs"] for s in samples) <= model.knobs.cuda_graph_max_bs
    assert 5 <= model.plan.available_gb <= 8


def test_idle_gauges_refresh_every_thirty_seconds_when_no_traffic():
    model = ServerModel(SCENARIOS["idle"].config)
    model.advance_to(95.0)
    assert model.ranks[0].last_log == 90.0
    assert model.ranks[0].gauges["gen_throughput"] == 0.0


def test_client_too_slow_queue_always_empty():
    _, samples = run("client_too_slow")
    assert fraction(samples, lambda s: s["num_queue_reqs"] == 0) == 1.0
    assert fraction(samples, lambda s: s["token_usage"] < 0.5) == 1.0
    assert max(s["num_running_reqs"] for s in samples) > 0


def test_queue_flood_queue_above_two_thousand():
    _, samples = run("queue_flood")
    assert fraction(samples, lambda s: s["num_queue_reqs"] > 2000) == 1.0


def test_scheduler_too_conservative_low_usage_while_queueing():
    _, samples = run("scheduler_too_conservative")
    assert fraction(samples, lambda s: s["token_usage"] < 0.9 and s["num_queue_reqs"] > 0) >= 0.8


def test_scheduler_too_conservative_heals_with_lower_conservativeness():
    _, stuck = run("scheduler_too_conservative")
    _, healed = run("scheduler_too_conservative", schedule_conservativeness=0.3)
    mean = lambda xs: sum(s["token_usage"] for s in xs) / len(xs)  # noqa: E731
    assert mean(healed) > mean(stuck) + 0.1


def test_retraction_storm_counter_rises_several_times_a_minute():
    model = ServerModel(SCENARIOS["retraction_storm"].config, seed=3)
    rises, last = 0, 0.0
    for t in range(30, 95, 5):
        model.advance_to(float(t))
        rises += retractions(model) > last
        last = retractions(model)
    assert rises >= 4
    assert last >= 20


def test_retraction_storm_raises_new_token_ratio():
    model, samples = run("retraction_storm", minutes=0.5)
    rank = model.ranks[0]
    assert max(s["new_token_ratio"] for s in samples) > 3 * rank.min_ratio


@pytest.mark.parametrize(
    ("scenario", "low", "high"),
    [
        ("mem_fraction_too_low", 10.0, 20.0),
        ("mem_fraction_too_high", 0.0, 5.0),
        ("healthy", 5.0, 8.0),
    ],
)
def test_startup_available_memory_follows_mem_fraction(scenario, low, high):
    model = ServerModel(SCENARIOS[scenario].config)
    assert low <= model.plan.available_gb <= high


def test_mem_fraction_too_low_has_a_smaller_pool_than_healthy():
    low = ServerModel(SCENARIOS["mem_fraction_too_low"].config)
    healthy = ServerModel(SCENARIOS["healthy"].config)
    assert low.plan.max_total_num_tokens < healthy.plan.max_total_num_tokens * 0.9


def test_mem_fraction_too_high_is_under_five_gb_but_prefills_still_fit():
    model = ServerModel(SCENARIOS["mem_fraction_too_high"].config, seed=1)
    model.advance_to(10 * 60.0)
    assert model.plan.available_gb < 5
    assert model.engine.prefill_activation_gb(8192, 4) < model.plan.available_gb / 2
    assert model.restarts == 0


def test_prefill_oom_restarts_and_resets_counters():
    model = ServerModel(SCENARIOS["prefill_oom"].config, seed=1)
    served = 0.0
    while model.restarts == 0 and model.now < 600:
        served = sum(model.tok.counters.get("num_requests_total", {}).values())
        model.advance_to(model.now + 5)
    assert model.restarts >= 1 and served > 0
    assert model.status() == "dead"
    back_at = model.down_until
    model.advance_to(back_at - 1)
    assert model.status() == "starting"
    model.advance_to(back_at + 1)
    assert model.booted_at >= back_at
    assert sum(model.tok.counters.get("num_requests_total", {}).values()) < served


def test_crash_loop_is_down_most_of_the_time():
    model = ServerModel(SCENARIOS["crash_loop"].config, seed=1)
    down = 0
    for t in range(0, 300, 5):
        model.advance_to(float(t))
        down += model.status() != "up"
    assert down / 60 > 0.8
    assert model.restarts >= 5


def test_cuda_graph_not_covering_runs_decode_without_graphs():
    model, samples = run("cuda_graph_not_covering")
    passes = model.ranks[0].stats.counters["cuda_graph_passes_total"]
    assert passes.get(("decode_none",), 0) > passes.get(("decode_cuda_graph",), 0)
    assert fraction(samples, lambda s: s["num_running_reqs"] > 32) >= 0.8


def test_decode_step_slower_when_batch_exceeds_cuda_graph_max_bs():
    config = SCENARIOS["cuda_graph_not_covering"].config
    eager = ServerModel(config).engine
    graphs = ServerModel(replace(config, knobs=replace(config.knobs, cuda_graph_max_bs=256))).engine
    assert eager.decode_seconds(100, 200_000) > graphs.decode_seconds(100, 200_000)


def test_lpm_no_prefix_reuse_gets_no_cache_hits():
    model, _ = run("lpm_no_prefix_reuse")
    assert model.config.knobs.schedule_policy == "lpm"
    assert hit_rate(model) == 0.0


def test_fcfs_heavy_prefix_reuse_hit_rate_rises_with_lpm():
    fcfs, _ = run("fcfs_heavy_prefix_reuse")
    lpm, _ = run("fcfs_heavy_prefix_reuse", schedule_policy="lpm")
    assert hit_rate(fcfs) < 0.3
    assert hit_rate(lpm) > hit_rate(fcfs) + 0.1


def test_tp_where_dp_fits_small_model_on_four_gpus():
    model, samples = run("tp_where_dp_fits")
    assert model.config.knobs.tp_size == 4
    assert model.plan.weight_gb < 0.1 * model.config.gpu.memory_gib
    assert fraction(samples, lambda s: s["token_usage"] < 0.6) >= 0.8


def test_online_batch_too_large_has_slow_tokens():
    model, samples = run("online_batch_too_large")
    itl = model.tok.hists["inter_token_latency_seconds"][()]
    assert itl.total / itl.count > 0.03
    assert fraction(samples, lambda s: s["num_running_reqs"] > 256) >= 0.5


def test_model_is_deterministic_for_a_seed():
    first, _ = run("healthy", seed=7)
    second, _ = run("healthy", seed=7)
    assert first.ranks[0].gauges == second.ranks[0].gauges
    assert first.tok.counters == second.tok.counters


def test_model_advance_in_small_or_large_steps_gives_the_same_state():
    fine = ServerModel(SCENARIOS["retraction_storm"].config, seed=2)
    for t in range(1, 91):
        fine.advance_to(float(t))
    coarse = ServerModel(SCENARIOS["retraction_storm"].config, seed=2)
    coarse.advance_to(90.0)
    assert fine.ranks[0].gauges == coarse.ranks[0].gauges


def test_dp_two_gives_one_scheduler_per_rank():
    model, _ = run("healthy", dp_size=2)
    assert len(model.ranks) == 2
    assert all(rank.gauges["num_running_reqs"] > 0 for rank in model.ranks)


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - {"cuda_graph_not_covering"}))
def test_cuda_graph_covers_the_batch_outside_its_own_scenario(scenario):
    model, _ = run(scenario)
    passes = model.ranks[0].stats.counters.get("cuda_graph_passes_total", {})
    assert passes.get(("decode_none",), 0) == 0
