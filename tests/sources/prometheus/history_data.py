"""History of simulated SGLang servers, twice: as a Prometheus TSDB and as the daemon saw it.

The simulator renders each server's real `/metrics` page every `step` seconds; the pages become
OpenMetrics text with `instance`/`job` labels and their timestamps, and `promtool tsdb
create-blocks-from openmetrics` writes the blocks a real Prometheus then serves (`check
--prometheus` reads them). The same pages go straight through the daemon's scrape path
(`SignalMapper`, target state, judge, plan, alert state, publish) as if it had scraped them at
those times: `direct_advice` is the live daemon's evaluation after a full window.
"""

import multiprocessing
import re
import subprocess
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from sglang_sim.exposition import render_metrics
from sglang_sim.model import ServerModel
from sglang_sim.scenarios import SCENARIOS
from sglang_tuner.config.settings import Settings
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.sglang import SignalMapper
from sglang_tuner.sources.sglang_names import _SAMPLE_NAMES

# sample lines of the SGLang families the daemon reads (a real page has 2-3x more series, which
# no query touches): name, optional {labels}, value; comments dropped
_KEPT = "|".join(sorted(re.escape(name) for name in _SAMPLE_NAMES))
_SAMPLE = re.compile(rf"^(sglang[:_](?:{_KEPT}))(?:\{{(.*)\}})? (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class Server:
    """One simulated server: its scenario, SGLang version and `instance` label."""

    scenario: str
    version: str
    instance: str


def servers(scenarios: Sequence[tuple[str, str]]) -> list[Server]:
    """A server per (scenario, version), instance `10.0.0.<i>:30000`."""
    return [Server(sc, v, f"10.0.0.{i + 1}:30000") for i, (sc, v) in enumerate(scenarios)]


def pages(
    fleet: Sequence[Server], times: Sequence[float], warmup: float = 120.0
) -> list[list[str]]:
    """Per server, its page at each of `times` (the first `warmup` seconds before them run
    unseen, as a server that had been up a while); servers simulated in two processes."""
    jobs = [(i, s.scenario, s.version, list(times), warmup) for i, s in enumerate(fleet)]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_server_pages, jobs))


def _server_pages(job: tuple[int, str, str, list[float], float]) -> list[str]:
    seed, scenario, version, times, warmup = job
    model = ServerModel(SCENARIOS[scenario].for_version(version), seed=seed)
    out = []
    for ts in times:
        model.advance_to(warmup + ts - times[0])
        out.append(render_metrics(model))
    return out


def openmetrics(
    fleet: Sequence[Server], times: Sequence[float], rendered: list[list[str]], job: str = "sglang"
) -> Iterator[str]:
    """The pages as OpenMetrics samples with `instance`/`job` and timestamps, oldest first."""
    for k, ts in enumerate(times):
        for server, own in zip(fleet, rendered, strict=True):
            extra = f'instance="{server.instance}",job="{job}"'
            yield f"up{{{extra}}} 1 {ts:.3f}\n"
            yield "".join(
                f"{name}{{{extra}{',' + labels if labels else ''}}} {value} {ts:.3f}\n"
                for name, labels, value in _SAMPLE.findall(own[k])
            )
    yield "# EOF\n"


def backfill(chunks: Iterator[str], out: Path) -> subprocess.Popen[bytes]:
    """The samples as TSDB blocks under `out/tsdb`, which Prometheus then serves: promtool,
    started (wait for it before starting Prometheus)."""
    out.mkdir(parents=True, exist_ok=True)
    text, tsdb = out / "history.om", out / "tsdb"
    with text.open("w") as f:
        for chunk in chunks:
            f.write(chunk)
    cmd = ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text), str(tsdb)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def direct_advice(
    settings: Settings, fleet: Sequence[Server], times: Sequence[float], rendered: list[list[str]]
) -> dict[str, set[str]]:
    """The rule ids each server's advice holds after the daemon scraped the same pages at
    the same times (its own scrape path and evaluation; no Prometheus)."""
    end = times[-1]
    tuner = Tuner(settings, clock=lambda: end)
    watch = tuner.watch
    for server, own in zip(fleet, rendered, strict=True):
        spec = TargetSpec(server.instance, f"http://{server.instance}", settings_profile(settings))
        state = watch.add(watch.new_server(spec)).state
        mapper = SignalMapper()
        for ts, page in zip(times, own, strict=True):
            values = mapper.update(page, ts)
            state.ingest(ScrapeResult(spec.name, ts, 0.001, Snapshot(spec.name, ts, values)))
    tuner.publish(refresh=True)
    ev = tuner.state.latest()
    advice: dict[str, set[str]] = {name: set() for name in watch.servers}
    for a in ev.advice:
        advice[a.target].add(a.rule)
    return advice


def settings_profile(settings: Settings) -> str | None:
    """The profile `check --prometheus` gives every server (None: inferred)."""
    return settings.prometheus.profile if settings.prometheus is not None else None
