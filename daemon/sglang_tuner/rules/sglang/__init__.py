"""SGLang's own facts per version, shared by the tuning rules and the planner: versions, flag
spellings and accepted values, defaults, attention backends, the `--mem-fraction-static`
formula, CUDA-graph sizes, what names say about the GPU and model. Read from SGLang's source.
Pure.

May import: `model`, and the physics package `sglang_physics` (the cards' memory as torch
reports it, which SGLang's defaults key on).
"""
