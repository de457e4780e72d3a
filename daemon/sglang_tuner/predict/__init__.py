"""The predictor: what a candidate change would do to THIS server, on its own objective, with a
range and the basis of the claim. The rules ask it; it never decides what to advise.

`server_model` models one server (its decode step from the physics or the window, its pool, its
admission) and answers one question per kind of change; `itl_model` fits inter-token latency to
the batch and moves ITL p99 with it; `queueing` predicts TTFT p99 from the arrival rate and the
new capacity; `crash_fix` predicts that a crash fix stops its crashes; `units` converts
`--max-running-requests` and the running batch between per-rank and flag units; `recent` widens
a change's range to what the model gave the same change over the window's reviews.

May import: `model`, `changes`, `rule`, and the physics package `sglang_physics`. Pure: no I/O,
no clock.
"""

from sglang_tuner.predict.crash_fix import crash_fix, reported, tried_before
from sglang_tuner.predict.itl_model import batch_for_itl_target, itl_fit
from sglang_tuner.predict.server_model import (
    CRASHES,
    MIN_GAIN,
    ServerModel,
    latency_cap,
    no_prediction,
    objective,
    predict_admission,
    predict_cap_raise,
    predict_data_parallel,
    predict_fewer_overcommits,
    predict_graphs,
    predict_itl_cap,
    predict_pool_change,
    server_model,
    severity_for,
)
from sglang_tuner.predict.units import (
    batch_signal,
    flag_from_per_rank,
    max_running_flag,
    max_running_per_rank,
    per_rank_batch,
    ranks_per_flag,
)

__all__ = [
    "CRASHES",
    "MIN_GAIN",
    "ServerModel",
    "batch_for_itl_target",
    "batch_signal",
    "crash_fix",
    "flag_from_per_rank",
    "itl_fit",
    "latency_cap",
    "max_running_flag",
    "max_running_per_rank",
    "no_prediction",
    "objective",
    "per_rank_batch",
    "predict_admission",
    "predict_cap_raise",
    "predict_data_parallel",
    "predict_fewer_overcommits",
    "predict_graphs",
    "predict_itl_cap",
    "predict_pool_change",
    "ranks_per_flag",
    "reported",
    "server_model",
    "severity_for",
    "tried_before",
]
