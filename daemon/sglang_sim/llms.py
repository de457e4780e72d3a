"""The served models: the shared catalogue of sglang_physics (shapes from their config.json)."""

from __future__ import annotations

from sglang_physics.model import MODELS, ModelSpec, model_named

LlmSpec = ModelSpec
LLMS = MODELS
llm_named = model_named

__all__ = ["LLMS", "LlmSpec", "llm_named"]
