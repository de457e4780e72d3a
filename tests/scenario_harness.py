"""Run a simulator scenario in simulated time through the daemon's real pipeline.

The simulator's model renders its exposition, `/server_info` and log exactly as its HTTP server
would; the daemon's own mapper, log follower, server_info parser, window and evaluator read them.
No sockets and no sleeping: five simulated minutes take well under a second.
"""

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from sglang_sim import SCENARIOS, ServerModel
from sglang_sim.exposition import render_metrics
from sglang_sim.logs import LogWriter
from sglang_sim.server_info import server_info
from sglang_tuner.config import Settings, load_settings
from sglang_tuner.evaluate import RuleEvaluation, evaluate_target
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.rules.base import Finding
from sglang_tuner.signals import DECODE_OOM_EVENTS, PREFILL_OOM_EVENTS
from sglang_tuner.sources import Snapshot
from sglang_tuner.sources.logs import LogFollower
from sglang_tuner.sources.server_info import parse_server_info
from sglang_tuner.sources.sglang import SignalMapper
from sglang_tuner.state import TargetStatus
from sglang_tuner.window import Window, capacity_for

EPOCH = 1_790_000_000.0


@dataclass
class ScenarioRun:
    """The outcome of a simulated run: every rule's evaluation at the end."""

    scenario: str
    version: str
    evaluations: list[RuleEvaluation]

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
) -> ScenarioRun:
    """Scrape the scenario every interval for `seconds` of simulated time, then evaluate."""
    settings = settings or load_settings(None)
    step = settings.scrape_interval_seconds
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "sglang.log"
        config = SCENARIOS[scenario].for_version(version)
        writer = LogWriter(str(log_path), version, EPOCH, dp=config.knobs.dp_size)
        model = ServerModel(config, seed=seed, log=writer)
        follower = LogFollower(log_path)
        window = Window(capacity_for(settings.window_seconds, step))
        mapper, status = SignalMapper(), None
        t = 0.0
        while t < seconds:
            t += step
            model.advance_to(t)
            status = _scrape(model, mapper, follower, window, t, profile, gpu_model)
        writer.file.close()
        follower.close()
    assert status is not None
    evaluations = evaluate_target(status, window, ALL_RULES, settings, t)
    return ScenarioRun(scenario, version, evaluations)


def _scrape(
    model: ServerModel,
    mapper: SignalMapper,
    follower: LogFollower,
    window: Window,
    t: float,
    profile: str,
    gpu_model: str | None,
) -> TargetStatus:
    # gpu_model: what a user sets in targets[].gpu_model (or DCGM reports); /server_info lacks it
    config = replace(parse_server_info(server_info(model, 30000, None)), gpu_model=gpu_model)
    base = {"name": "sim", "url": "http://sim:30000", "profile": profile, "config": config}
    if model.status() != "up":
        events = follower.poll(t)  # as the poller does: OOM lines count while the server is down
        if events.get(PREFILL_OOM_EVENTS, 0) > 0 or events.get(DECODE_OOM_EVENTS, 0) > 0:
            window.append(Snapshot("sim", t, events))
        return TargetStatus(**base, up=False, error_reason="conn_refused", error="refused")
    if not model.metrics_enabled:
        reason = "http_404_metrics_disabled"
        return TargetStatus(**base, up=False, error_reason=reason, error="404")
    values = mapper.update(render_metrics(model), t)
    values = follower.poll(t) | values
    window.append(Snapshot("sim", t, values))
    return TargetStatus(**base, up=True)
