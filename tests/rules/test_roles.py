"""PD disaggregation roles: read from /server_info, and rules of the other phase skipped with
a reason the evaluation shows."""

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import evaluate, window_from
from sglang_tuner.config.loading import load_settings
from sglang_tuner.judge import judge_target
from sglang_tuner.model.advice import Finding, Health, NoData
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import DISAGGREGATION_MODES, ServerConfig
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.rule import DECODING_ROLES, PREFILLING_ROLES
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.rules.cuda_graph import CUDA_GRAPH_NOT_COVERING
from sglang_tuner.rules.latency import LONG_PROMPTS_DOMINATE_TTFT
from sglang_tuner.sources.server_info import parse_server_info
from sglang_tuner.target_state import TargetState

SERVER_INFO = Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "server_info"
BIG_BATCH = window_from(num_running_reqs_max_rank="300x20", cuda_graph_pass_ratio="0.3x20")
LONG_PROMPTS = window_from(ttft_p50_seconds="2.5x20", prompt_tokens_mean="30000x20")


def _config(name: str) -> ServerConfig:
    return parse_server_info(json.loads((SERVER_INFO / f"{name}.json").read_text()))


def test_server_info_disaggregation_mode_read_for_each_role():
    assert _config("v0.5.23_pd_prefill").disaggregation_mode == "prefill"
    assert _config("v0.5.23_pd_decode").disaggregation_mode == "decode"
    assert _config("v0.5.17").disaggregation_mode is None  # not reported: no role assumed


def test_server_info_disaggregation_mode_prefers_the_schedulers_current_role():
    body = json.loads((SERVER_INFO / "v0.5.23_pd_prefill.json").read_text())
    body["internal_states"][0]["disaggregation_mode"] = "decode"  # flipped by a role switch
    assert parse_server_info(body).disaggregation_mode == "decode"
    body["internal_states"][0]["disaggregation_mode"] = "sideways"  # not SGLang's: ignored
    assert parse_server_info(body).disaggregation_mode == "prefill"


def test_cuda_graph_not_covering_skipped_on_prefill_server_with_reason():
    config = dataclasses.replace(_config("v0.5.23_pd_prefill"), cuda_graph_max_bs=256)
    out = evaluate(CUDA_GRAPH_NOT_COVERING, BIG_BATCH, config=config)
    assert isinstance(out, NoData)
    assert out.reason.startswith("skipped: this is a prefill server")
    assert "non-disaggregated or decode servers" in out.reason


def test_cuda_graph_not_covering_judged_on_decode_server():
    config = dataclasses.replace(_config("v0.5.23_pd_decode"), cuda_graph_max_bs=256)
    assert isinstance(evaluate(CUDA_GRAPH_NOT_COVERING, BIG_BATCH, config=config), Finding)


def test_long_prompts_dominate_ttft_skipped_on_decode_server_judged_on_prefill():
    decode = dataclasses.replace(_config("v0.5.23_pd_decode"), chunked_prefill_size=8192)
    prefill = dataclasses.replace(decode, disaggregation_mode="prefill")
    out = evaluate(LONG_PROMPTS_DOMINATE_TTFT, LONG_PROMPTS, config=decode, profile="online")
    assert isinstance(out, NoData) and "this is a decode server" in out.reason
    out = evaluate(LONG_PROMPTS_DOMINATE_TTFT, LONG_PROMPTS, config=prefill, profile="online")
    assert isinstance(out, Finding)


def test_roles_are_sglang_modes_and_one_phase_rules_exclude_the_other_role():
    by_id = {rule.id: rule for rule in ALL_RULES}
    for rule in ALL_RULES:
        assert set(rule.roles) <= set(DISAGGREGATION_MODES) and "null" in rule.roles
    for rule_id in ("cuda_graph_not_covering", "torch_compile_small_batch", "low_throughput"):
        assert by_id[rule_id].roles == DECODING_ROLES
    for rule_id in ("long_prompts_dominate_ttft", "lpm_without_prefix_reuse"):
        assert by_id[rule_id].roles == PREFILLING_ROLES
    # crashes are never hidden by a role
    assert by_id["prefill_oom"].roles == by_id["decode_oom"].roles == DISAGGREGATION_MODES


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_judge_target_shows_role_skip_as_no_data_health(mode):
    target = TargetState(TargetSpec("pd", "http://pd"), 100)
    for k in range(20):
        target.window.append(Snapshot("pd", float(k * 5), {"num_running_reqs_max_rank": 300.0}))
    target.last = ScrapeResult("pd", 95.0, 0.01, Snapshot("pd", 95.0, {}))
    target.config = _config(f"v0.5.23_pd_{mode}")
    settings = load_settings(None, {})
    judged = {j.rule.id: j for j in judge_target(target, ALL_RULES, settings, 95.0).judgements}
    skipped = "cuda_graph_not_covering" if mode == "prefill" else "lpm_without_prefix_reuse"
    judgement = judged[skipped]
    assert judgement.health == Health.NO_DATA
    assert isinstance(judgement.outcome, NoData)
    assert f"this is a {mode} server" in judgement.outcome.reason
