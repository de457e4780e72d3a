"""The workload profile of a server whose operator did not name one, inferred from its traffic.

The guide tunes offline batch for throughput and online serving for latency; a wrong guess either
way gives harmful advice ("submit requests faster" to an online server, a smaller batch to a batch
job). So the inference takes the one sign SGLang shows of either: a batch job keeps a backlog (its
client submits ahead of the server), an online server's requests are served as they arrive (the
queue is empty while it works). Advice that only one profile wants is a hint while the profile is
inferred (`judge.py`), conditioned on that profile ("if this is a batch job: ..."); the rules only
the other profile wants still run, as such hints, so a wrong guess never silences the guide.
Setting `profile:` makes the advice count.
"""

from sglang_tuner.model.signals import NUM_QUEUE_REQS, NUM_RUNNING_REQS
from sglang_tuner.model.window import WindowView

BACKLOG_RATIO = 0.5  # ours: a queue in at least half the busy samples is a standing backlog
MIN_BUSY_SAMPLES = 6  # ours: the window's default min_samples


def infer_profile(view: WindowView) -> tuple[str, str] | None:
    """(profile, why) from the window, or None while too few busy samples say anything."""
    rows = view.rows((NUM_QUEUE_REQS, NUM_RUNNING_REQS))
    busy = [r for r in rows if r[NUM_RUNNING_REQS] > 0]
    if len(busy) < MIN_BUSY_SAMPLES:
        return None
    queued = sum(1 for r in busy if r[NUM_QUEUE_REQS] > 0) / len(busy)
    if queued >= BACKLOG_RATIO:
        return "offline", f"a backlog: requests waited in {queued:.0%} of {len(busy)} busy samples"
    return "online", (
        f"requests served as they arrive: the queue was empty in {1 - queued:.0%} of "
        f"{len(busy)} busy samples"
    )
