"""Guide section "Adjust the request submission speed to control #queue-req"."""

from sglang_tuner.model.advice import Action, Outcome, Pass, Severity
from sglang_tuner.model.signals import (
    CUDA_GRAPH_FALSE_RATIO,
    CUDA_GRAPH_PASS_RATIO,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    REQUEST_RATE,
    TOKEN_USAGE,
)
from sglang_tuner.model.window import frequently
from sglang_tuner.rule import Rule, RuleInput, idle, judged

SOURCE = "Hyperparameter Tuning / Adjust the request submission speed to control #queue-req"


def _submit_faster(inp: RuleInput) -> Action:
    running = inp.view.quantile(NUM_RUNNING_REQS, 0.5)
    hint = f" (running batch p50 {running:.0f})" if running is not None else ""
    return Action(
        f"client: submit requests faster / raise client concurrency{hint}",
        expected="a standing queue (#queue-req 100-2000): larger batches, higher throughput",
    )


def _eager_share(inp: RuleInput) -> float | None:
    """The share of decode passes run without a CUDA graph (log or metrics), if known."""
    from_log = inp.view.mean(CUDA_GRAPH_FALSE_RATIO)
    if from_log is not None:
        return from_log
    graphed = inp.view.mean(CUDA_GRAPH_PASS_RATIO)
    return None if graphed is None else 1.0 - graphed


def _check_empty(inp: RuleInput) -> Outcome:
    """Frequently: `#queue-req == 0` with room in the KV pool, over samples where the server is
    running requests; not while decode runs eager (the batch outgrew the CUDA graphs: the
    server, not the client, is slow)."""
    th = inp.thresholds
    eager = _eager_share(inp)
    if eager is not None and eager >= th["eager_share_max"]:
        return Pass(
            detail=f"{eager:.0%} of decode passes ran without a CUDA graph: the batch outgrew "
            "--cuda-graph-max-bs (cuda_graph_not_covering), not a slow client"
        )
    full = th["pool_full_usage"]
    freq = frequently(
        inp.view,
        lambda r: r[NUM_QUEUE_REQS] == 0 and r.get(TOKEN_USAGE, 0.0) < full,
        (NUM_QUEUE_REQS, NUM_RUNNING_REQS),
        inp.frequently_ratio,
        gate=lambda r: r[NUM_RUNNING_REQS] > 0,  # an idle server's empty queue is no advice
    )
    if freq.considered == 0:
        return idle(inp, "the server was idle (no running requests) in every sample")
    return judged(freq, inp, (NUM_QUEUE_REQS, NUM_RUNNING_REQS, REQUEST_RATE), _submit_faster)


QUEUE_EMPTY = Rule(
    id="queue_empty",
    severity=Severity.INFO,
    summary="#queue-req is frequently 0 while the server works: the client submits too slowly.",
    action="Increase the request submission rate; the client, not the server, is the bottleneck.",
    source=SOURCE,
    check=_check_empty,
    signals=(NUM_QUEUE_REQS, NUM_RUNNING_REQS),
    requires=(NUM_QUEUE_REQS, NUM_RUNNING_REQS),
    # Only offline batch wants a standing queue; an online server at low traffic is fine empty.
    profiles=("offline",),
    thresholds={"pool_full_usage": 0.9, "eager_share_max": 0.5},
    provenance={
        "pool_full_usage": "ours: the guide's high token usage (0.9); with the pool full, more "
        "requests would only wait or be retracted (sgl-project/sglang#2746: 2 requests held "
        "the whole pool)",
        "eager_share_max": "ours: most decode passes without a CUDA graph: the step is slow "
        "because the batch outgrew the graphs, and an empty queue follows from it",
    },
)


def _check_long(inp: RuleInput) -> Outcome:
    """Frequently: `#queue-req > healthy_queue_max`."""
    limit = inp.thresholds["healthy_queue_max"]
    freq = frequently(
        inp.view, lambda r: r[NUM_QUEUE_REQS] > limit, (NUM_QUEUE_REQS,), inp.frequently_ratio
    )
    action = lambda _inp: Action(  # noqa: E731
        f"client: slow request submission until #queue-req stays under {limit:g}, "
        "or add data-parallel replicas behind the SGLang router",
        expected=f"#queue-req under {limit:g}: less scheduling overhead, shorter queueing",
    )
    return judged(freq, inp, (NUM_QUEUE_REQS, NUM_RUNNING_REQS), action)


QUEUE_TOO_LONG = Rule(
    id="queue_too_long",
    severity=Severity.WARNING,
    summary="#queue-req is frequently above the healthy range: scheduling overhead grows.",
    action="Reduce the request submission rate (healthy #queue-req is 100-2000).",
    source=SOURCE,
    check=_check_long,
    signals=(NUM_QUEUE_REQS,),
    requires=(NUM_QUEUE_REQS,),
    # Current guide: healthy 100-2000; the older guide said 50-1000 (guide_version: legacy).
    thresholds={"healthy_queue_max": 2000.0},
    legacy_thresholds={"healthy_queue_max": 1000.0},
    provenance={
        "healthy_queue_max": "guide (docs, newest): 'a healthy range is 100-2000'; the older "
        "guide said 50-1000",
    },
)
