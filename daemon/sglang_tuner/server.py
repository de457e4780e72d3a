"""One watched SGLang server: what the daemon knows of it, what it last concluded, and what its
advice has asked of it since its last change, behind four methods.

- `observe(result, log_values, now)`: a scrape (with what the log said since the previous one)
  goes into the server's state; reviewed when due. True when it was reviewed.
- `read_config(config, error)`: a `/server_info` read (or the flags of the log's launch line).
  The `Change` it records when the server restarted with new flags, attributed to what was asked.
- `read_dcgm(facts)`: a DCGM exporter read.
- `review(now)`: every rule judged over the windows, each prediction's range covering what the
  model gave the same change over the window's reviews (`predict/recent.py`), then the plan;
  what the plan asks is kept for attributing a later restart to it. The new judgement.

The server owns its state (`TargetState`: windows, flags, flag history, change record), its latest
`judgement` and `plan`, and `asked`. Every server of a watch shares one `Judging`: the rules, in
the guide's order, and the settings they are judged with. The loop reads the sources and hands
their results in; nothing here does I/O or reads the clock.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from sglang_tuner.changes.record import FLAGS, Change
from sglang_tuner.config.settings import Settings
from sglang_tuner.judge import TargetJudgement, is_due, judge_target
from sglang_tuner.model.next_change import Asked, Plan
from sglang_tuner.model.scrape import ScrapeResult
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.plan import asked_of, plan_target
from sglang_tuner.predict.recent import RecentPredictions
from sglang_tuner.rule import Rule
from sglang_tuner.target_state import TargetState


class Judging:
    """What every server of a watch is judged with: the rules (in the guide's order), the
    settings, and the count of rule evaluations that raised. A target read from a Prometheus
    round is sampled once per round: its settings say so (`for_rounds`)."""

    def __init__(self, settings: Settings, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self.order = {rule.id: i for i, rule in enumerate(self.rules)}
        self.failures: Counter[str] = Counter()
        self.settings = settings
        self.for_rounds = settings
        self.configure(settings)

    def configure(self, settings: Settings) -> None:
        """New settings (a reload): every server judges with them from its next review."""
        self.settings = settings
        interval = settings.evaluation_interval_seconds
        self.for_rounds = settings.model_copy(update={"scrape_interval_seconds": interval})


class WatchedServer:
    """One SGLang server as the daemon watches it."""

    def __init__(self, state: TargetState, judging: Judging, rounds: bool = False) -> None:
        self.state = state
        self.judging = judging
        self.rounds = rounds  # read from a Prometheus round: one sample per round
        self.judgement: TargetJudgement | None = None
        self.plan: Plan | None = None
        self.asked = Asked()  # what the advice has asked for since the last change
        self.recent = RecentPredictions(self.settings.window_seconds)

    @property
    def name(self) -> str:
        """The `target` label value."""
        return self.state.name

    @property
    def settings(self) -> Settings:
        """The settings this server is judged with."""
        return self.judging.for_rounds if self.rounds else self.judging.settings

    def observe(
        self, result: ScrapeResult, log_values: Mapping[str, float] | None, now: float
    ) -> bool:
        """A scrape's result, with the log's signals since the previous one; reviewed when due
        (True then)."""
        self.state.ingest(result, log_values)
        interval = self.settings.evaluation_interval_seconds
        if not is_due(self.state, self.judgement, now, interval):
            return False
        self.review(now)
        return True

    def read_config(self, config: ServerConfig | None, error: str | None) -> Change | None:
        """A `/server_info` read (None and the error when it failed). After a restart with new
        flags, the change recorded, attributed to what the advice asked; asked afresh from then."""
        asked = self.asked
        change = self.state.apply_server_info(
            config, error, asked.flags, asked.ratios, asked.stated
        )
        if change is not None and change.kind == FLAGS:
            self.asked = Asked()
        return change

    def read_dcgm(self, facts: Mapping[str, float | str]) -> None:
        """A DCGM exporter read: free framebuffer memory and the GPU model."""
        self.state.apply_dcgm(facts)

    def review(self, now: float) -> TargetJudgement:
        """Judge every rule, then plan; keep what the plan asks. The judgement."""
        state, judging = self.state, self.judging
        judgement = self._widened(judge_target(state, judging.rules, self.settings, now))
        judging.failures.update(j.rule.id for j in judgement.judgements if j.error is not None)
        self.judgement = judgement
        self.plan = plan = plan_target(
            state.name, judgement, state.history, judging.order, state.changes.changes,
            state.config,
        )  # fmt: skip
        # Not updated from a restart until the new flags are read, so the change is matched to
        # what was asked before it (a crash-looping server included).
        if not (state.needs_server_info or state.restart_pending):
            self.asked = self.asked.merged(asked_of(plan, judgement))
        return judgement

    def _widened(self, judgement: TargetJudgement) -> TargetJudgement:
        """Each prediction's range covering what the model gave the same change over the
        window's reviews (`RecentPredictions`); its central figure the latest review's."""
        recent, ts = self.recent, judgement.ts
        recent.seconds = self.settings.window_seconds  # a reload may move the window
        recent.forget_before(ts - recent.seconds)
        judgements = []
        for j in judgement.judgements:
            finding = j.finding
            if finding is not None and finding.action.prediction is not None:
                action = recent.covering(j.rule.id, finding.action, ts)
                j = replace(j, outcome=replace(finding, action=action))
            judgements.append(j)
        return replace(judgement, judgements=tuple(judgements))
