"""Per-rank units: `--max-running-requests` and the running batch, as the flag counts them.

With plain `--dp-size N` every DP rank is its own scheduler and takes the flag as its own limit;
with attention DP the scheduler divides the flag by the attention-DP size (the row in
`model/flag_transforms.py`, per version). The running batch a rule reasons about is the
busiest rank's.
"""

from sglang_tuner.model import flag_transforms as transforms
from sglang_tuner.model.flag_transforms import ranks_sharing
from sglang_tuner.model.flags import MAX_RUNNING_REQUESTS
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import NUM_DP_RANKS, NUM_RUNNING_REQS, NUM_RUNNING_REQS_MAX_RANK
from sglang_tuner.model.window import WindowView
from sglang_tuner.rule import RuleInput


def batch_signal(inp: RuleInput) -> str:
    """Per-rank running batch: the busiest rank's series, else the total (one rank)."""
    return (
        NUM_RUNNING_REQS_MAX_RANK
        if inp.view.present(NUM_RUNNING_REQS_MAX_RANK)
        else NUM_RUNNING_REQS
    )


def per_rank_batch(view: WindowView, q: float) -> float | None:
    """Running batch of the busiest DP rank (the unit --max-running-requests applies to)."""
    value = view.quantile(NUM_RUNNING_REQS_MAX_RANK, q)
    if value is not None:
        return value
    total, ranks = view.quantile(NUM_RUNNING_REQS, q), view.last(NUM_DP_RANKS) or 1.0
    return None if total is None else total / max(1.0, ranks)


def ranks_per_flag(config: ServerConfig | None) -> int:
    """How many DP ranks share one `--max-running-requests` value (1 unless DP attention)."""
    return ranks_sharing(MAX_RUNNING_REQUESTS, config)


def max_running_per_rank(config: ServerConfig | None) -> int | None:
    """The effective limit of one DP rank, where the server says (or its flag implies)."""
    return transforms.max_running_per_rank(config)


def max_running_flag(config: ServerConfig | None) -> int | None:
    """The current `--max-running-requests` in the flag's own unit, as typed."""
    return transforms.max_running_flag(config)


def flag_from_per_rank(config: ServerConfig | None, per_rank: int) -> int:
    """A per-rank limit as the value to pass to `--max-running-requests`."""
    if config is None:
        return max(1, per_rank)
    return int(transforms.read(MAX_RUNNING_REQUESTS, max(1, per_rank), config))
