"""Run a simulator scenario in simulated time through the daemon's real pipeline.

The simulator's model renders its exposition, `/server_info` and log exactly as its HTTP server
would; the daemon's own mapper, log follower, server_info parser, target state and judge read
them (only the HTTP status mapping of a down server is done here). No sockets and no sleeping:
five simulated minutes take well under a second.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

from sglang_sim import SCENARIOS, ServerModel
from sglang_sim.exposition import render_metrics
from sglang_sim.logs import LogWriter
from sglang_sim.model import ServerConfig as SimConfig
from sglang_sim.server_info import server_info
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.settings import Settings
from sglang_tuner.judge import Judgement, TargetJudgement, judge_target
from sglang_tuner.model.advice import Finding
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.service_levels import ServiceLevels
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.model.window import capacity_for
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.sources.log.follow import LogFollower
from sglang_tuner.sources.server_info import parse_server_info
from sglang_tuner.sources.sglang import SignalMapper
from sglang_tuner.target_state import TargetState

EPOCH = 1_790_000_000.0


@dataclass
class ScenarioRun:
    """The outcome of a simulated run: every rule's judgement at the end."""

    scenario: str
    version: str
    evaluations: list[Judgement]
    judgement: TargetJudgement | None = None  # the whole judgement: levels, measurements

    @property
    def fired(self) -> list[str]:
        """Ids of the rules whose advice is active, in catalogue order."""
        return [e.rule.id for e in self.evaluations if isinstance(e.outcome, Finding)]

    def finding(self, rule_id: str) -> Finding:
        """The finding of one rule (fails the test when the rule did not fire)."""
        for e in self.evaluations:
            if e.rule.id == rule_id and isinstance(e.outcome, Finding):
                return e.outcome
        raise AssertionError(f"{rule_id} did not fire on {self.scenario}: fired {self.fired}")


def run_scenario(
    scenario: str,
    version: str = "0.5.23",
    seconds: float = 360.0,
    profile: str = "offline",
    settings: Settings | None = None,
    seed: int = 1,
    gpu_model: str | None = None,
    metrics: bool = True,
    config: SimConfig | None = None,
    service_levels: ServiceLevels | None = None,
) -> ScenarioRun:
    """Scrape the scenario every interval for `seconds` of simulated time, then judge.
    `metrics=False`: the server runs without --enable-metrics; its log is the only source.
    `config`: a variant of the scenario's configuration to run instead (knobs or load changed).
    `service_levels`: the target's own, as its settings give them."""
    settings = settings or load_settings(None)
    step = settings.scrape_interval_seconds
    spec = TargetSpec(
        "sim", "http://sim:30000", profile=profile, gpu_model=gpu_model,
        service_levels=service_levels,
    )  # fmt: skip
    target = TargetState(spec, capacity_for(settings.window_seconds, step))
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "sglang.log"
        config = config or SCENARIOS[scenario].for_version(version)
        writer = LogWriter(str(log_path), version, EPOCH, dp=config.knobs.dp_size)
        model = ServerModel(config, seed=seed, log=writer)
        follower, mapper = LogFollower(log_path), SignalMapper()
        t = 0.0
        while t < seconds:
            t += step
            model.advance_to(t)
            if target.needs_server_info and model.status() == "up":
                target.apply_server_info(parse_server_info(server_info(model, 30000, None)), None)
            target.ingest(_scrape(model, mapper, t, metrics), follower.poll(t))
        writer.file.close()
        follower.close()
    judgement = judge_target(target, ALL_RULES, settings, t)
    return ScenarioRun(scenario, version, list(judgement.judgements), judgement)


def _scrape(model: ServerModel, mapper: SignalMapper, t: float, metrics: bool) -> ScrapeResult:
    """What a scrape of the simulated server at `t` returns."""
    if model.status() != "up":
        return ScrapeResult("sim", t, 0.001, error_reason="conn_refused", error="refused")
    if not (metrics and model.metrics_enabled):
        reason = "http_404_metrics_disabled"
        return ScrapeResult("sim", t, 0.001, error_reason=reason, error="404")
    values = mapper.update(render_metrics(model), t)
    return ScrapeResult("sim", t, 0.001, snapshot=Snapshot("sim", t, values))
