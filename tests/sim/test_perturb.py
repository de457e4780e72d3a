"""The simulator's perturbed world (sglang_sim/perturb.py): a seed draws every constant within the
spread, the same seed replays the same world, and the simulated server runs on it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sglang_physics import Perturbation
from sglang_sim import SCENARIOS, ServerModel, ServerSpec, apply_flags, draw_perturbation
from sglang_sim.fleet import config_for


def test_the_same_seed_replays_the_same_draw_and_another_seed_does_not():
    assert draw_perturbation(7, 0.25) == draw_perturbation(7, 0.25)
    assert draw_perturbation(7, 0.25) != draw_perturbation(8, 0.25)


def test_every_constant_is_drawn_within_the_spread():
    for seed in range(20):
        factors = draw_perturbation(seed, 0.25).as_dict()
        assert set(factors) == set(Perturbation.names())
        assert all(0.75 <= f <= 1.25 for f in factors.values())
    assert draw_perturbation(3, 0.0).is_identity


def test_the_simulated_step_changes_by_the_drawn_factor():
    world = draw_perturbation(11, 0.25)
    config = SCENARIOS["healthy"].config
    plain = ServerModel(config).engine
    drawn = ServerModel(replace(config, perturbation=world)).engine
    assert drawn.step.weights_seconds(1) * world.hbm_bandwidth == plain.step.weights_seconds(1)
    # a decode step at batch 8 is weight-bound: its time moves with the bandwidth factor
    ratio = (drawn.decode_seconds(8, 8000) - drawn.step.step_overhead_s) / (
        plain.decode_seconds(8, 8000) - plain.step.step_overhead_s
    )
    assert abs(ratio * world.hbm_bandwidth - 1) < 0.05


def test_a_spec_carries_its_world_through_a_restart_of_flags():
    world = draw_perturbation(5, 0.25)
    config = config_for(ServerSpec("healthy", perturbation=world))
    assert config.perturbation == world
    # POST /_sim/restart applies the flags over the running config: same hardware, same world
    restarted = apply_flags(config, {"--schedule-conservativeness": "0.8"})
    assert restarted.perturbation == world
    assert restarted.knobs.schedule_conservativeness == 0.8


def test_fa3_runs_on_sm8x_for_gqa_models_but_not_for_mla():
    spec = ServerSpec("healthy", gpu="A100", flags=(("attention_backend", "fa3"),))
    assert config_for(spec).knobs.attention_backend == "fa3"
    assert config_for(replace(spec, gpu="L40S")).knobs.attention_backend == "fa3"
    with pytest.raises(ValueError, match="fa3 runs MLA models only on SM90"):
        config_for(
            replace(
                spec, model="deepseek-v3", flags=(("attention_backend", "fa3"), ("tp_size", "8"))
            )
        )
    with pytest.raises(ValueError, match="does not run on NVIDIA B200"):
        config_for(replace(spec, gpu="B200"))


def test_defaults_drop_the_scenarios_flags_for_the_versions_own():
    spec = ServerSpec("healthy", "0.5.23", gpu="RTX4090", model="llama-3.2-1b", defaults=True)
    model = ServerModel(config_for(spec))
    # 0.5.20+: a 24 GB card gets a 4096-token chunk and graphs up to 48 (0.5.17: 2048 and 24)
    assert model.knobs.chunked_prefill_size == 4096
    assert model.knobs.cuda_graph_max_bs == 48
    old = ServerModel(config_for(replace(spec, version="0.5.17")))
    assert (old.knobs.chunked_prefill_size, old.knobs.cuda_graph_max_bs) == (2048, 24)
    assert model.knobs.mem_fraction_static != SCENARIOS["healthy"].config.knobs.mem_fraction_static
