"""Guide section "Troubleshooting / Low Throughput": walk its checks, name the first that fails."""

from dataclasses import replace

from ..signals import GEN_THROUGHPUT, NUM_QUEUE_REQS, NUM_RUNNING_REQS, TOKEN_USAGE
from ..values import Finding, NoData, Outcome, Pass, Severity
from ..window import frequently
from .base import Rule, RuleInput, apply_rule
from .cuda_graph import CUDA_GRAPH_NOT_COVERING
from .parallelism import ATTENTION_BACKEND_FOR_GPU
from .queue import QUEUE_EMPTY
from .scheduling import SCHEDULER_TOO_CONSERVATIVE

SOURCE = "Troubleshooting / Low Throughput"
# The guide's checks in its order; each is judged by the rule that owns it, with that rule's
# thresholds. "Check Token Usage" is judged with requests waiting (scheduler_too_conservative):
# low usage on an empty queue is the next check's problem, the client's.
CHECKS: tuple[tuple[str, Rule], ...] = (
    ("Check Token Usage", SCHEDULER_TOO_CONSERVATIVE),
    ("Check Queue Size", QUEUE_EMPTY),
    ("Check CUDA Graph", CUDA_GRAPH_NOT_COVERING),
    ("Check Attention Backend", ATTENTION_BACKEND_FOR_GPU),
)


def _first_failing(inp: RuleInput) -> tuple[str, Rule, Finding] | list[str]:
    """The first check whose rule fires, or the checks that could not be judged."""
    unjudged = []
    for name, rule in CHECKS:
        outcome = apply_rule(rule, replace(inp, thresholds=rule.thresholds_for(inp.profile)))
        if isinstance(outcome, Finding):
            return name, rule, outcome
        if isinstance(outcome, NoData):
            unjudged.append(f"{name}: {outcome.reason}")
    return unjudged


def _check(inp: RuleInput) -> Outcome:
    """Busy in most samples (and under the expected throughput, if set): first failing check."""
    busy = frequently(
        inp.view, lambda r: r[NUM_RUNNING_REQS] > 0, (NUM_RUNNING_REQS,), inp.frequently_ratio
    )
    if not busy.held:
        return NoData("the server was mostly idle: throughput is not judged", inp.interval_seconds)
    expected = inp.thresholds["expected_gen_throughput"]
    actual = inp.view.quantile(GEN_THROUGHPUT, 0.5)
    low_share = inp.thresholds["low_throughput_ratio"]
    if expected > 0 and actual is not None and actual >= low_share * expected:
        return Pass(detail=f"gen throughput p50 {actual:.0f} tok/s of {expected:g} expected")
    found = _first_failing(inp)
    if isinstance(found, list):
        if found:
            return NoData("; ".join(found), inp.view.window_seconds)
        return Pass(detail="every Low Throughput check passed")
    name, rule, finding = found
    shown = "n/a" if actual is None else f"{actual:.0f} tok/s"
    evidence = (
        f"first failing check: {name} ({rule.id}): {finding.evidence}; gen throughput p50 {shown}"
    )
    return replace(finding, evidence=evidence)


LOW_THROUGHPUT = Rule(
    id="low_throughput",
    severity=Severity.INFO,
    summary="Throughput diagnosis: the first failing check of the guide's Low Throughput tree.",
    action="Fix the first failing check: token usage, queue size, CUDA graph, attention backend.",
    source=SOURCE,
    signals=(GEN_THROUGHPUT, NUM_RUNNING_REQS, TOKEN_USAGE, NUM_QUEUE_REQS),
    thresholds={
        # 0 = no expectation set: walk the tree whenever the server is busy.
        "expected_gen_throughput": 0.0,
        "low_throughput_ratio": 0.8,  # ours: "significantly lower than expected"
    },
    profiles=("offline", "long_context", "multi_turn"),
    check=_check,
)
