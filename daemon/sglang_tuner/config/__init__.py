"""The daemon's settings: one YAML file, `SGLANG_TUNER_*` variables and flags, every problem
listed at once; the targets it names (static and file_sd); the credentials of the services it
calls.

May import: `model`.
"""
