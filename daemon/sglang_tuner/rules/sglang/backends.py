"""Attention backends: what SGLang picks itself per version and GPU, and when not to override it.

SGLang ties MLA (DeepSeek-V2/V3/R1, Kimi-K2), sparse-attention (NSA/DSA: DeepSeek-V3.2, GLM-5)
and hybrid linear-attention models (Qwen3-Next, Nemotron-H, ...) to backends chosen per model
(`_handle_model_specific_adjustments`, `arg_groups/model_overrides/`); advice never overrides
those. Model families come from the architecture when known, else from the model name.
"""

import re

from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.strenum import StrEnum
from sglang_tuner.rules.sglang.flags import user_set_flag
from sglang_tuner.rules.sglang.versions import as_of

# `configs/model_config.py` (0.5.23): architectures that get `AttentionArch.MLA`.
MLA_ARCHITECTURES = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
    "DeepseekVL2ForCausalLM", "KimiVLForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiLinearForCausalLM", "MiniCPM3ForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "LongcatFlashForCausalLM",
    "MistralLarge3ForCausalLM", "BailingMoeV3ForCausalLM",
})  # fmt: skip
# NSA/DSA sparse attention (`is_deepseek_nsa`; the "nsa" backend 0.5.3+, "dsa" 0.5.13+) and
# DeepSeek-V4 (`model_overrides/deepseek_v4.py`: "dsv4").
SPARSE_ARCHITECTURES = frozenset({
    "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "DeepseekV4ForCausalLM",
})  # fmt: skip
_MLA_NAME = re.compile(
    r"deepseek-(?:v2|v3|r1(?!-distill)|vl2|prover-v2|coder-v2)|kimi-(?:k2|k3|vl|linear)|moonlight"
    r"|minicpm3|glm-4\.7-flash|longcat-flash|mistral-large-3",
    re.IGNORECASE,
)
_SPARSE_NAME = re.compile(r"deepseek-v3\.2|deepseek-v4|glm-5", re.IGNORECASE)
_HYBRID_NAME = re.compile(
    r"qwen3-next|qwen3\.5|kimi-linear|nemotron-h|nemotron-nano|falcon-h1|granite-4\.0-h"
    r"|jamba|mamba|lfm2|minimax-m1",
    re.IGNORECASE,
)
# Backends SGLang only picks for particular model families (values of `--attention-backend`).
MODEL_SPECIFIC_BACKENDS = frozenset({
    "flashmla", "cutlass_mla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla", "nsa", "dsa",
    "qsa", "dsv4", "compressed", "hybrid_linear_attn", "dual_chunk_flash_attn",
})  # fmt: skip
# Generic auto-selection without speculative decoding, per GPU generation: (MHA, MLA) picks.
# <= 0.4.5: flashinfer / triton (`ModelRunner`). 0.4.6: fa3 on Hopper (CUDA >= 12.3; MHA only for
# `is_fa3_default_architecture` models until 0.5.8). 0.4.7: MLA on Blackwell -> flashinfer.
# 0.5.6.post1: MHA on Blackwell (SM100) -> trtllm_mha (`_get_default_attn_backend`).
_AUTO: tuple[tuple[str, dict[str, tuple[str, str]]], ...] = (
    ("0.0.0", {"hopper": ("flashinfer", "triton"), "blackwell": ("flashinfer", "triton")}),
    ("0.4.6", {"hopper": ("fa3", "fa3"), "blackwell": ("flashinfer", "triton")}),
    ("0.4.7", {"hopper": ("fa3", "fa3"), "blackwell": ("flashinfer", "flashinfer")}),
    ("0.5.6.post1", {"hopper": ("fa3", "fa3"), "blackwell": ("trtllm_mha", "flashinfer")}),
)  # fmt: skip
_OTHER_GPUS = ("flashinfer", "triton")  # Ampere, Ada: flashinfer when installed, else triton
BACKEND_FLAGS = ("--attention-backend", "--prefill-attention-backend", "--decode-attention-backend")


class BackendChoice(StrEnum):
    """Who picked the running attention backend."""

    USER = "user"  # the launch command named it
    SGLANG = "sglang"  # SGLang's generic auto-selection
    MODEL_SPECIFIC = "model_specific"  # tied to the model family: never override
    UNKNOWN = "unknown"  # /server_info cannot tell (0.4.6, and 0.5.4.post1 - 0.5.19)


def is_mla_or_nsa(model_path: str | None, architecture: str | None = None) -> bool:
    """True for MLA or sparse-attention models (DeepSeek-V2/V3/V3.2/R1, Kimi-K2, GLM-5, ...)."""
    if architecture:
        return architecture in MLA_ARCHITECTURES or architecture in SPARSE_ARCHITECTURES
    name = (model_path or "").rsplit("/", 1)[-1]
    return bool(_MLA_NAME.search(name) or _SPARSE_NAME.search(name))


def is_hybrid_attention(model_path: str | None) -> bool:
    """True for hybrid linear-attention / Mamba models, by name (Qwen3-Next, Nemotron-H, ...)."""
    return bool(model_path and _HYBRID_NAME.search(model_path.rsplit("/", 1)[-1]))


def auto_backend(version: str | None, generation: str, mla: bool = False) -> str:
    """SGLang's generic pick for a GPU generation ("hopper", "blackwell", "ampere", "ada").

    Ampere/Ada get flashinfer (triton when flashinfer is not installed). Model-specific picks
    (`MODEL_SPECIFIC_BACKENDS`) and speculative decoding with topk > 1 are not covered.
    """
    picks = as_of(version, _AUTO).get(generation, _OTHER_GPUS)
    return picks[1] if mla else picks[0]


def backend_choice(config: ServerConfig, architecture: str | None = None) -> BackendChoice:
    """Who picked `config.attention_backend` (resolved, `internal_states` first).

    USER/SGLANG from `launch_command` (0.5.20+), or SGLANG when the top level reports null while
    a scheduler reports the backend (0.4.7 - 0.5.4 chose it in `ModelRunner`, the scheduler
    process). From 0.5.4.post1 to 0.5.19 `ServerArgs` resolves it first: UNKNOWN.
    """
    backend = config.attention_backend
    model = config.model_path
    if backend in MODEL_SPECIFIC_BACKENDS or is_mla_or_nsa(model, architecture):
        return BackendChoice.MODEL_SPECIFIC
    if is_hybrid_attention(model):
        return BackendChoice.MODEL_SPECIFIC
    named = [user_set_flag(config, flag) for flag in BACKEND_FLAGS]
    if any(named):
        return BackendChoice.USER
    if named[0] is False:
        return BackendChoice.SGLANG
    if config.raw.get("attention_backend") is None and backend is not None:
        return BackendChoice.SGLANG
    return BackendChoice.UNKNOWN


def may_advise_backend(
    config: ServerConfig, generation: str | None, architecture: str | None = None
) -> bool:
    """Whether advice may replace the running attention backend.

    Never for MLA, sparse-attention or hybrid models, nor for SGLang's own pick. When
    `/server_info` cannot tell who picked it (UNKNOWN), only when it differs from SGLang's
    generic pick for the GPU generation and no speculative decoding shapes SGLang's choice.
    """
    choice = backend_choice(config, architecture)
    if choice is not BackendChoice.UNKNOWN:
        return choice is BackendChoice.USER
    if generation is None or config.raw.get("speculative_algorithm"):
        return False
    return config.attention_backend != auto_backend(config.version, generation)
