"""/server_info and /model_info follow each version's field names."""

from __future__ import annotations

import pytest
from sglang_sim import SCENARIOS, VERSIONS, ServerModel
from sglang_sim.server_info import info_paths, model_info, server_info

KNOBS = {
    "mem_fraction_static",
    "schedule_conservativeness",
    "chunked_prefill_size",
    "max_running_requests",
    "schedule_policy",
    "tp_size",
    "dp_size",
    "max_total_num_tokens",
    "max_prefill_tokens",
    "attention_backend",
    "version",
    "internal_states",
    "api_key",
}


def info(version: str, scenario: str = "healthy") -> dict:
    """The body a server of this version answers."""
    model = ServerModel(SCENARIOS[scenario].for_version(version))
    model.advance_to(10.0)
    return server_info(model, 30000, None)


@pytest.mark.parametrize("version", VERSIONS)
def test_server_info_has_the_tuning_knobs(version):
    body = info(version)
    assert KNOBS <= body.keys()
    assert body["version"] == version
    assert len(body["internal_states"]) == 1


@pytest.mark.parametrize(
    ("version", "graph_field"),
    [
        ("0.4.10", "cuda_graph_max_bs"),
        ("0.5.9", "cuda_graph_max_bs"),
        ("0.5.17", "cuda_graph_config"),
        ("0.5.23", "cuda_graph_config"),
    ],
)
def test_cuda_graph_field_moves_to_config_in_0_5_14(version, graph_field):
    body = info(version, "cuda_graph_not_covering")
    assert graph_field in body
    if graph_field == "cuda_graph_config":
        assert body["cuda_graph_config"]["decode"]["max_bs"] == 32
        assert (
            "cuda_graph_max_bs" not in body and body["cuda_graph_max_bs_decode"] == 32
        )  # CLI value
    else:
        assert body["cuda_graph_max_bs"] == 32


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        ("0.4.10", {"weight", "kvcache", "token_capacity", "cuda_graph"}),
        ("0.5.9", {"weight", "kvcache", "token_capacity", "graph"}),
        (
            "0.5.23",
            {
                "weight",
                "kvcache",
                "token_capacity",
                "graph",
                "startup_available",
                "token_capacity_swa",
            },
        ),
    ],
)
def test_memory_usage_keys_per_version(version, keys):
    assert info(version)["internal_states"][0]["memory_usage"].keys() == keys


def test_startup_available_matches_mem_fraction_scenario():
    usage = info("0.5.23", "mem_fraction_too_low")["internal_states"][0]["memory_usage"]
    assert 10 <= usage["startup_available"] <= 20


def test_effective_max_running_requests_from_0_5_9():
    assert "effective_max_running_requests_per_dp" not in info("0.4.10")["internal_states"][0]
    state = info("0.5.9")["internal_states"][0]
    assert state["effective_max_running_requests_per_dp"] > 0
    assert info("0.5.9")["max_running_requests"] is None


def test_dp_gives_one_internal_state_per_rank():
    from dataclasses import replace

    config = SCENARIOS["healthy"].config
    model = ServerModel(replace(config, knobs=replace(config.knobs, dp_size=2)))
    assert len(server_info(model, 1, None)["internal_states"]) == 2


def test_model_info_fields_grow_with_version():
    old = model_info(ServerModel(SCENARIOS["idle"].for_version("0.4.10")))
    new = model_info(ServerModel(SCENARIOS["idle"].for_version("0.5.23")))
    assert "weight_version" not in old and "architectures" in new


def test_info_paths_per_version():
    assert info_paths((0, 4, 10))[0] == ("/get_server_info",)
    assert "/server_info" in info_paths((0, 5, 9))[0]
