"""The tokens/s a window shows: SGLang's generation-token counter over its `gen_throughput` gauge.

The gauge is the rate since the scheduler's last decode log line (SGLang 0.5.9
`scheduler_metrics_mixin.py`: `num_generated_tokens / gap_latency`, the wall time since the last
decode log, every `--decode-log-interval` steps; the counter is raised by a request's generated
tokens in `observe_one_finished_request`, `metrics/collector.py`), and a scrape reads the last one
again while prefills hold decode up, so the intervals with no prefill in them, the fastest, are
read most: where prefills stall decode steps in bunches, the gauge's mean over-states the rate
(1,100 clients on a 70B over 2 B200s, 600-token prompts: 7,700 tok/s read, 4,580 generated).
The counter's rate is lumpy (it counts a request's tokens when it finishes: 0 in one scrape,
27,000 in the next) but its mean is the rate. A server judged from its log has no counter.
"""

from collections.abc import Mapping, Sequence

from sglang_tuner.model.signals import GEN_THROUGHPUT, GENERATION_TOKENS_RATE


def decode_rate(rows: Sequence[Mapping[str, float]]) -> float | None:
    """Mean tokens/s over `rows` (samples with the gauge): the counter's rate where every one of
    them has it and it counted any, else the gauge's; None without rows."""
    if not rows:
        return None
    counted = [r[GENERATION_TOKENS_RATE] for r in rows if GENERATION_TOKENS_RATE in r]
    if len(counted) == len(rows) and sum(counted) > 0:
        return sum(counted) / len(counted)
    return sum(r[GEN_THROUGHPUT] for r in rows) / len(rows)
