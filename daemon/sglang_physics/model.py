"""The served models' shapes (from their Hugging Face config.json) and the bytes and FLOPs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer: dense or MoE MLP, GQA or MLA attention.

    Field names follow config.json. MoE: `experts` routed experts (0 = dense), `active_experts`
    per token, `expert_intermediate` per expert, `shared_experts` always-on experts of that size,
    `dense_layers` leading layers with a dense MLP (DeepSeek's first_k_dense_replace). MLA
    (kv_lora_rank > 0): the cache holds one latent of kv_lora_rank + qk_rope_head_dim per token
    and layer. dtype_bytes is the checkpoint's weight width (2 BF16, 1 FP8).
    """

    path: str = "meta-llama/Llama-3.1-8B-Instruct"
    architecture: str = "LlamaForCausalLM"
    model_type: str = "llama"
    layers: int = 32
    hidden: int = 4096
    intermediate: int = 14336
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    vocab: int = 128256
    context_len: int = 131072
    tie_word_embeddings: bool = False
    dtype_bytes: int = 2
    experts: int = 0
    active_experts: int = 0
    expert_intermediate: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

    # -- shape ------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts MLP."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is routed experts."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def qk_dim(self) -> int:
        """Per-head width of queries and keys."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Per-head width of values."""
        return self.v_head_dim if self.is_mla else self.head_dim

    # -- parameters -------------------------------------------------------------------------
    @property
    def attention_params(self) -> float:
        """Parameters of all attention projections."""
        h, heads = self.hidden, self.heads
        if self.is_mla:
            q = (
                h * self.q_lora_rank + self.q_lora_rank * heads * self.qk_dim
                if self.q_lora_rank
                else h * heads * self.qk_dim
            )
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv += self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
            per_layer = q + kv + heads * self.v_head_dim * h
        else:
            per_layer = 2 * h * heads * self.head_dim + 2 * h * self.kv_heads * self.head_dim
        return float(per_layer * self.layers)

    @property
    def expert_params(self) -> float:
        """Parameters of one routed expert (gate, up, down)."""
        return 3.0 * self.hidden * self.expert_intermediate

    @property
    def routed_params(self) -> float:
        """Parameters of every routed expert of every MoE layer."""
        return self.expert_params * self.experts * self.moe_layers

    @property
    def embedding_params(self) -> float:
        """Embedding table plus lm_head (one matrix when tied)."""
        return self.vocab * self.hidden * (1.0 if self.tie_word_embeddings else 2.0)

    @property
    def params(self) -> float:
        """All parameters (the model card's count, without DeepSeek's MTP layer)."""
        dense_mlp = 3.0 * self.hidden * self.intermediate * (self.layers - self.moe_layers)
        shared = self.expert_params * self.shared_experts * self.moe_layers
        router = float(self.hidden * self.experts * self.moe_layers)
        extra = self.routed_params + shared + router
        return self.embedding_params + self.attention_params + dense_mlp + extra

    @property
    def active_params(self) -> float:
        """Parameters one token's forward touches (all of a dense model)."""
        unused = self.expert_params * (self.experts - self.active_experts) * self.moe_layers
        return self.params - unused

    def weight_bytes(self, bytes_per_param: float | None = None) -> float:
        """Bytes of all weights (the checkpoint's width unless given)."""
        return self.params * (bytes_per_param or self.dtype_bytes)

    @property
    def flops_per_token(self) -> float:
        """Matmul FLOPs of one token's forward pass (2 per active parameter)."""
        return 2.0 * self.active_params

    # -- KV cache and attention -------------------------------------------------------------
    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads an attention-TP rank holds (replicated when tp exceeds the KV head count)."""
        return max(1, self.kv_heads // tp)

    def kv_bytes_per_token(self, tp: int = 1, dtype_bytes: int = 2) -> int:
        """KV cache bytes one token takes on one GPU of `tp` attention-TP ranks (cell_size).

        GQA: layers x KV heads per GPU x head dim x 2 (K and V). MLA: layers x (kv_lora_rank +
        qk_rope_head_dim), one latent replicated on every rank (MLATokenToKVPool).
        """
        if self.is_mla:
            return self.layers * (self.kv_lora_rank + self.qk_rope_head_dim) * dtype_bytes
        return self.layers * self.kv_heads_per_gpu(tp) * self.head_dim * 2 * dtype_bytes

    def attention_flops(self, new_tokens: int, context: float) -> float:
        """QK^T and PV FLOPs of `new_tokens` queries attending to `context` keys on average."""
        per_pair = 2.0 * self.heads * (self.qk_dim + self.v_dim)
        return per_pair * self.layers * new_tokens * context

    def decode_attention_flops_per_kv_token(self) -> float:
        """FLOPs per cached token and decode query, all layers and heads.

        MLA decode runs absorbed: scores over the latent plus rope part, output over the latent.
        """
        if self.is_mla:
            width = 2 * self.kv_lora_rank + self.qk_rope_head_dim
            return 2.0 * self.heads * width * self.layers
        return 2.0 * self.heads * (self.qk_dim + self.v_dim) * self.layers

    def activation_bytes_per_token(self, tp: int = 1) -> float:
        """Peak live activations of one layer per token in a prefill forward (BF16).

        Residual, normed input, QKV and attention output (~8 x hidden) plus gate, up and the
        activated product (~3 x MLP width / tp, twice for the fused gate-up buffer); an
        estimate, not a measurement. MoE layers count the active experts' width.
        """
        width = self.intermediate
        if self.is_moe:
            width = self.expert_intermediate * (self.active_experts + self.shared_experts)
        return 2.0 * (8 * self.hidden + 6 * width / tp)


_QWEN3 = ModelSpec(
    architecture="Qwen3ForCausalLM", model_type="qwen3", vocab=151936, context_len=40960
)
# Shapes from each model's config.json on Hugging Face; the parameter counts they give match the
# model cards (tests/physics/test_model.py): Llama-3.1-8B 8.03 B, 70B 70.6 B, Llama-3.2-1B
# 1.24 B, Qwen3-8B 8.2 B, Qwen3-32B 32.8 B, Qwen3-30B-A3B 30.5 B (3.3 B active), DeepSeek-V3
# 671 B (37 B active; 685 B with the MTP layer, which is not served here).
MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {
        "llama-3.1-8b": ModelSpec(),
        "llama-3.1-70b": ModelSpec(
            "meta-llama/Llama-3.1-70B-Instruct", layers=80, hidden=8192, intermediate=28672,
            heads=64,
        ),
        "llama-3.2-1b": ModelSpec(
            "meta-llama/Llama-3.2-1B-Instruct", layers=16, hidden=2048, intermediate=8192,
            heads=32, kv_heads=8, head_dim=64, tie_word_embeddings=True,
        ),
        "qwen3-8b": replace(
            _QWEN3, path="Qwen/Qwen3-8B", layers=36, hidden=4096, intermediate=12288, heads=32,
            kv_heads=8,
        ),
        "qwen3-32b": replace(
            _QWEN3, path="Qwen/Qwen3-32B", layers=64, hidden=5120, intermediate=25600, heads=64,
            kv_heads=8,
        ),
        "qwen3-30b-a3b": ModelSpec(
            "Qwen/Qwen3-30B-A3B", architecture="Qwen3MoeForCausalLM", model_type="qwen3_moe",
            vocab=151936, layers=48, hidden=2048, intermediate=6144, heads=32, kv_heads=4,
            context_len=40960, experts=128, active_experts=8, expert_intermediate=768,
        ),
        "deepseek-v3": ModelSpec(
            "deepseek-ai/DeepSeek-V3", architecture="DeepseekV3ForCausalLM",
            model_type="deepseek_v3", layers=61, hidden=7168, intermediate=18432, heads=128,
            kv_heads=128, head_dim=128, vocab=129280, context_len=163840, dtype_bytes=1,
            experts=256, active_experts=8, expert_intermediate=2048, shared_experts=1,
            dense_layers=3, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
            qk_nope_head_dim=128, v_head_dim=128,
        ),
    }
)  # fmt: skip


def model_named(name: str) -> ModelSpec:
    """A model by short name (llama-3.1-8b, qwen3-30b-a3b, deepseek-v3, ...) or HF path."""
    for key, spec in MODELS.items():
        if name.lower() == key or name == spec.path:
            return spec
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
