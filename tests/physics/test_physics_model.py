"""Model shapes: parameter counts match the model cards, KV bytes follow GQA or MLA."""

from __future__ import annotations

import pytest
from sglang_physics import MODELS, Deployment, kv_bytes_per_token, model_named


@pytest.mark.parametrize(
    ("name", "card_b", "active_b"),
    [
        ("llama-3.1-8b", 8.03, 8.03),
        ("llama-3.1-70b", 70.6, 70.6),
        ("llama-3.2-1b", 1.24, 1.24),
        ("qwen3-8b", 8.2, 8.2),
        ("qwen3-32b", 32.8, 32.8),
        ("qwen3-30b-a3b", 30.5, 3.3),
        ("deepseek-v3", 671.0, 37.0),
    ],
)
def test_model_params_from_config_match_the_model_card(name, card_b, active_b):
    spec = MODELS[name]
    assert spec.params / 1e9 == pytest.approx(card_b, rel=0.02)
    assert spec.active_params / 1e9 == pytest.approx(active_b, rel=0.03)


def test_mla_kv_per_token_is_one_latent_per_layer_for_deepseek_v3():
    spec = MODELS["deepseek-v3"]
    assert spec.kv_bytes_per_token() == 61 * (512 + 64) * 2
    # the latent is replicated on every TP rank: tp does not shrink it
    assert spec.kv_bytes_per_token(tp=8) == 61 * 576 * 2


def test_gqa_kv_per_token_splits_kv_heads_over_attention_tp():
    spec = MODELS["llama-3.1-70b"]
    assert kv_bytes_per_token(spec, Deployment(tp=4)) == 80 * 2 * 128 * 2 * 2
    # dp attention: each rank holds all KV heads of its own requests (attention tp = tp / dp)
    assert kv_bytes_per_token(spec, Deployment(tp=8, dp=8, dp_attention=True)) == 80 * 8 * 128 * 4


def test_qwen3_moe_kv_uses_its_four_kv_heads():
    assert MODELS["qwen3-30b-a3b"].kv_bytes_per_token() == 48 * 4 * 128 * 2 * 2


def test_model_named_takes_short_name_or_hugging_face_path():
    assert model_named("Qwen/Qwen3-30B-A3B") is MODELS["qwen3-30b-a3b"]
    assert model_named("DeepSeek-V3") is MODELS["deepseek-v3"]
    with pytest.raises(ValueError, match="unknown model"):
        model_named("gpt-5")
