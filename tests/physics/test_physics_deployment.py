"""A server's parallel layout (sglang_physics/deployment.py): attention and MoE widths."""

from sglang_physics import Deployment


def test_plain_tp_splits_attention_heads_over_every_gpu():
    layout = Deployment(tp=8)
    assert layout.attn_tp == 8 and layout.moe_rows(64) == 64


def test_dp_attention_gives_each_rank_its_own_heads_and_gathers_tokens_for_the_experts():
    layout = Deployment(tp=8, dp=8, dp_attention=True, ep=8)
    assert layout.attn_tp == 1  # each attention rank holds whole heads on one GPU
    assert layout.moe_rows(64) == 512  # the MoE layer sees all eight ranks' tokens
    assert Deployment(tp=8, dp=2, dp_attention=True).attn_tp == 4


def test_plain_dp_replicas_leave_attention_as_tp():
    assert Deployment(tp=2, dp=4).attn_tp == 2 and Deployment(tp=2, dp=4).moe_rows(10) == 10
