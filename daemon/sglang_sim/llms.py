"""The served models: shapes from their Hugging Face configs, bytes and FLOPs derived from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class LlmSpec:
    """A dense decoder-only transformer (Llama family)."""

    path: str = "meta-llama/Llama-3.1-8B-Instruct"
    architecture: str = "LlamaForCausalLM"
    params_b: float = 8.03
    layers: int = 32
    hidden: int = 4096
    intermediate: int = 14336
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    vocab: int = 128256
    context_len: int = 131072

    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads a TP rank holds (replicated when tp exceeds the KV head count)."""
        return max(1, self.kv_heads // tp)

    def kv_bytes_per_token(self, tp: int = 1, dtype_bytes: int = 2) -> int:
        """KV cache bytes one token takes on one GPU: layers x kv heads x head dim x (K and V).

        SGLang's cell_size in ModelRunner.profile_max_num_token (model_executor/model_runner.py).
        """
        return self.layers * self.kv_heads_per_gpu(tp) * self.head_dim * 2 * dtype_bytes

    def weight_bytes(self, bytes_per_param: float = 2.0) -> float:
        """Bytes of all weights (BF16: 2 per parameter; FP8: 1)."""
        return self.params_b * 1e9 * bytes_per_param

    @property
    def flops_per_token(self) -> float:
        """Dense matmul FLOPs of one token's forward pass (2 per parameter)."""
        return 2 * self.params_b * 1e9

    def attention_flops(self, new_tokens: int, context: float) -> float:
        """QK^T and PV FLOPs of `new_tokens` queries attending to `context` keys on average."""
        return 4.0 * self.layers * self.heads * self.head_dim * new_tokens * context

    def activation_bytes_per_token(self, tp: int = 1) -> float:
        """Peak live activations of one layer per token in a prefill forward (BF16).

        Residual, normed input, QKV and attention output (~8 x hidden) plus gate, up and the
        activated product (~3 x intermediate / tp, twice for the fused gate-up buffer); an
        estimate, not a measurement.
        """
        return 2.0 * (8 * self.hidden + 6 * self.intermediate / tp)


# Shapes from the models' config.json (meta-llama/Llama-3.1-8B-Instruct, -70B-Instruct);
# parameter counts from the model cards (8.03 B, 70.6 B).
LLMS: Mapping[str, LlmSpec] = MappingProxyType(
    {
        "llama-3.1-8b": LlmSpec(),
        "llama-3.1-70b": LlmSpec(
            "meta-llama/Llama-3.1-70B-Instruct",
            "LlamaForCausalLM",
            70.6,
            80,
            8192,
            28672,
            64,
            8,
            128,
            128256,
            131072,
        ),
    }
)


def llm_named(name: str) -> LlmSpec:
    """A model by short name (llama-3.1-8b, llama-3.1-70b) or Hugging Face path."""
    for key, llm in LLMS.items():
        if name.lower() == key or name == llm.path:
            return llm
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(LLMS)}")
