"""A log's history replayed through the loop: its samples ingested at the log's own times,
judged and published every evaluation interval of log time, the advice at the end.

The same target state, rules, plan and alert state as the live daemon, with the log's time as
the clock and the log as the only source (a server with metrics off is judged the same way).
"""

from collections.abc import Callable, Iterable

from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import Evaluation
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.log.log_samples import LogSample

Progress = Callable[[int, float], None]  # lines read so far, log seconds covered


class _LogClock:
    """The log's time, as the loop's clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def replay(
    settings: Settings,
    spec: TargetSpec,
    samples: Iterable[LogSample],
    progress: Progress | None = None,
) -> Evaluation:
    """The evaluation at the end of the log: every sample ingested, judged and published on the
    evaluation interval; `progress` is told every 10,000 samples."""
    clock = _LogClock()
    tuner = Tuner(settings, clock=clock)
    server = tuner.watch.add(tuner.watch.new_server(spec))
    first, lines = None, 0
    for i, sample in enumerate(samples):
        clock.now = sample.ts
        first = sample.ts if first is None else first
        lines += sample.lines
        if sample.config is not None:  # a process started: its flags, as /server_info says
            server.read_config(sample.config, None)
        server.state.note_crashes(sample.crashes)  # the crashes in words, beside the signals
        page = ScrapeResult(spec.name, sample.ts, 0.0, Snapshot(spec.name, sample.ts, {}))
        if server.observe(page, sample.values, sample.ts):  # the log is the page
            tuner.publish()
        if progress is not None and i % 10_000 == 9_999:
            progress(lines, sample.ts - first)
    if server.state.last is not None:
        for _ in range(2):  # judged at the log's end; pending advice with no hold fires
            server.review(clock.now)
            tuner.publish()
    return tuner.state.latest()
