"""How a model is laid out on GPUs: tensor, data and expert parallelism, dtypes, backend."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deployment:
    """One server's parallel layout and numeric formats (SGLang's --tp/--dp/--ep flags).

    Plain dp runs `dp` full replicas of `tp` GPUs each. With `dp_attention` the `tp` GPUs hold
    `dp` attention ranks of tp/dp GPUs each (own requests, own KV cache) and share the MLP or
    experts across all tp GPUs. `ep` splits routed experts over GPUs instead of slicing each
    one; either way every GPU holds 1/tp of the expert weights. weight_bytes_per_param 0 keeps
    the checkpoint's width; attention_backend None means SGLang's default for the GPU.
    """

    tp: int = 1
    dp: int = 1
    dp_attention: bool = False
    ep: int = 1
    attention_backend: str | None = None
    weight_bytes_per_param: float = 0.0
    kv_dtype_bytes: int = 2

    @property
    def attn_tp(self) -> int:
        """GPUs one attention rank's heads are split over."""
        return max(self.tp // self.dp, 1) if self.dp_attention else self.tp

    def moe_rows(self, rows: int) -> int:
        """Tokens an MLP layer sees when one attention rank runs `rows` (DP attention gathers)."""
        return rows * self.dp if self.dp_attention else rows
