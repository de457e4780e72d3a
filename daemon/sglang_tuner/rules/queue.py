"""Guide section "Adjust the request submission speed to control #queue-req"."""

from collections.abc import Mapping

from ..signals import NUM_QUEUE_REQS, NUM_RUNNING_REQS, REQUEST_RATE
from ..window import Row
from .base import Action, Rule, RuleInput, Severity

SOURCE = "Hyperparameter Tuning / Adjust the request submission speed to control #queue-req"


def _busy(row: Row, _th: Mapping[str, float]) -> bool:
    """The server is serving (an idle server's empty queue is no advice)."""
    return row[NUM_RUNNING_REQS] > 0


def _submit_faster(inp: RuleInput) -> Action:
    running = inp.view.quantile(NUM_RUNNING_REQS, 0.5)
    hint = f" (running batch p50 {running:.0f})" if running is not None else ""
    return Action(f"client: submit requests faster / raise client concurrency{hint}")


def _submit_slower(inp: RuleInput) -> Action:
    limit = inp.thresholds["healthy_queue_max"]
    return Action(
        f"client: slow request submission until #queue-req stays under {limit:g}, "
        "or add data-parallel replicas behind the SGLang router"
    )


QUEUE_EMPTY = Rule(
    id="queue_empty",
    severity=Severity.INFO,
    summary="#queue-req is frequently 0 while the server works: the client submits too slowly.",
    action="Increase the request submission rate; the client, not the server, is the bottleneck.",
    source=SOURCE,
    signals=(NUM_QUEUE_REQS, NUM_RUNNING_REQS),
    # Only offline batch wants a standing queue; an online server at low traffic is fine empty.
    profiles=("offline",),
    when=lambda r, _t: r[NUM_QUEUE_REQS] == 0,
    gate=_busy,
    gate_reason="the server was idle (no running requests) in every sample",
    suggest=_submit_faster,
    evidence_signals=(NUM_QUEUE_REQS, NUM_RUNNING_REQS, REQUEST_RATE),
)

QUEUE_TOO_LONG = Rule(
    id="queue_too_long",
    severity=Severity.WARNING,
    summary="#queue-req is frequently above the healthy range: scheduling overhead grows.",
    action="Reduce the request submission rate (healthy #queue-req is 100-2000).",
    source=SOURCE,
    signals=(NUM_QUEUE_REQS,),
    # Current guide: healthy 100-2000; the older guide said 50-1000 (guide_version: legacy).
    thresholds={"healthy_queue_max": 2000.0},
    legacy_thresholds={"healthy_queue_max": 1000.0},
    when=lambda r, t: r[NUM_QUEUE_REQS] > t["healthy_queue_max"],
    suggest=_submit_slower,
    evidence_signals=(NUM_QUEUE_REQS, NUM_RUNNING_REQS),
)
