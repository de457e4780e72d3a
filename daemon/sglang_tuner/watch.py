"""The watched servers: a table of `WatchedServer`s sharing one `Judging`, and the sizes their
windows need.

The loop adds and removes servers, hands each its sources' results, and publishes; nothing here
does I/O or reads the clock. The servers' sources (connections, log files) are the loop's.
"""

from collections import Counter
from collections.abc import Sequence

from sglang_tuner.config.settings import Settings
from sglang_tuner.judge import rule_settings
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.model.window import capacity_for
from sglang_tuner.rule import Rule
from sglang_tuner.server import Judging, WatchedServer
from sglang_tuner.target_state import TargetState


class Watch:
    """Every watched server by name (the table is never rebound: the loop and its tests read it
    as it changes)."""

    def __init__(self, settings: Settings, rules: Sequence[Rule]) -> None:
        self.judging = Judging(settings, rules)
        self.servers: dict[str, WatchedServer] = {}

    @property
    def settings(self) -> Settings:
        """The settings every server is judged with."""
        return self.judging.settings

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules, in the guide's order."""
        return self.judging.rules

    @property
    def rule_failures(self) -> Counter[str]:
        """Rule evaluations that raised, per rule."""
        return self.judging.failures

    def configure(self, settings: Settings) -> None:
        """New settings (a reload): judged with them from the next review; windows keep their
        size until `resize`."""
        self.judging.configure(settings)

    def rules_window(self) -> float:
        """The longest window a rule uses."""
        spans = [rule_settings(self.settings, r.id).window_seconds for r in self.rules]
        return max([self.settings.window_seconds, *[w for w in spans if w]])

    def longest_window(self) -> float:
        """The longest window a rule or the change verification uses."""
        return max(self.rules_window(), self.settings.verify_window_seconds)

    def window_capacity(self, interval_seconds: float | None = None) -> int:
        """Ring size covering the longest window, samples `interval_seconds` apart (default:
        the scrape interval; a Prometheus round's targets are sampled once per round)."""
        interval = interval_seconds or self.settings.scrape_interval_seconds
        return capacity_for(self.longest_window(), interval)

    def new_server(self, spec: TargetSpec, rounds: bool = False) -> WatchedServer:
        """A server with windows sized for its sampling (`rounds`: once per Prometheus round),
        not yet watched."""
        s = self.settings
        interval = s.evaluation_interval_seconds if rounds else None
        state = TargetState(
            spec, self.window_capacity(interval), window_seconds=s.verify_window_seconds,
            warmup_seconds=s.verify_warmup_seconds, min_samples=s.min_samples,
            verifies={rule.id: rule.verifies for rule in self.rules if rule.verifies},
        )  # fmt: skip
        return WatchedServer(state, self.judging, rounds)

    def add(self, server: WatchedServer) -> WatchedServer:
        """Watch a server."""
        self.servers[server.name] = server
        return server

    def forget(self, name: str) -> None:
        """Stop watching `name`."""
        self.servers.pop(name, None)

    def resize(self) -> None:
        """Windows sized anew for the settings (the scrape interval or a window changed)."""
        direct = self.window_capacity()
        rounds = self.window_capacity(self.settings.evaluation_interval_seconds)
        for server in self.servers.values():
            server.state.resize_window(rounds if server.rounds else direct)

    def next_scrape_in(self, name: str, interval: float, now: float) -> float:
        """The interval, or `unreachable_retry_seconds` for a target refusing connections (or
        unresolvable) that long: a server that is gone (a stale file_sd list, a rack powered
        off). Prometheus keeps to the interval; here a refused connect costs ~0.1 ms of the one
        loop thread, so ten thousand gone targets would take a second of every interval from
        the ones that answer."""
        retry, server = self.settings.unreachable_retry_seconds, self.servers.get(name)
        since = None if server is None else server.state.unreachable_since
        if not retry or since is None or now - since < retry:
            return interval
        return max(interval, retry)
