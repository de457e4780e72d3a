"""A Prometheus TSDB holding a fleet of simulated SGLang servers, for bench/fleet.py.

The simulator renders the /metrics page of a few dozen servers (a mix of scenarios and SGLang
versions) every `step` seconds; each page is written, with its timestamp, once per target that
copies it (`instance` and `job` labels added), as OpenMetrics; `promtool tsdb
create-blocks-from openmetrics` turns that into a block. So 10,000 targets have 10,000 distinct
label sets with real SGLang names, labels and values; targets sharing a page share its values.
Only the families the daemon's queries select are kept (a real page has 2-3x more series; the
queries never touch them).

    PYTHONPATH=daemon python bench/fleet_data.py --targets 1000 --out /tmp/fleet-tsdb
"""

import argparse
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from sglang_sim.exposition import render_metrics
from sglang_sim.model import ServerModel
from sglang_sim.scenarios import SCENARIOS
from sglang_tuner.sources.sglang_names import _SAMPLE_NAMES

SCENARIO_MIX = (
    "healthy", "scheduler_too_conservative", "retraction_storm", "queue_flood",
    "client_too_slow", "cuda_graph_not_covering", "mem_fraction_too_low", "idle",
)  # fmt: skip
VERSIONS = ("0.4.10", "0.5.9", "0.5.17", "0.5.23")
# sample lines of the families the queries read: `sglang:<name>{labels} value`
_KEPT = "|".join(sorted(re.escape(name) for name in _SAMPLE_NAMES))
_LINE_RE = re.compile(rf"^sglang:({_KEPT})\{{(.*)\}} (\S+)$", re.MULTILINE)


def instance(i: int) -> str:
    """The `instance` label of target `i`: a plausible host:port, unique per target."""
    return f"10.{i // 62500}.{i // 250 % 250}.{i % 250}:30000"


def models(count: int) -> list[ServerModel]:
    """`count` simulated servers, scenarios and versions mixed, started 5 minutes ago."""
    out = []
    for k in range(count):
        scenario = SCENARIO_MIX[k % len(SCENARIO_MIX)]
        version = VERSIONS[k // len(SCENARIO_MIX) % len(VERSIONS)]
        model = ServerModel(SCENARIOS[scenario].for_version(version), seed=k)
        model.advance_to(300.0)
        out.append(model)
    return out


def page_template(model: ServerModel, ts: int) -> str:
    """The kept samples of one page at `ts`, with a `\\0` where the instance goes."""
    lines = _LINE_RE.findall(render_metrics(model))
    return "".join(
        f'sglang:{name}{{instance="\0",job="sglang",{labels}}} {value} {ts}\n'
        for name, labels, value in lines
    )


def templates(distinct: int, steps: range) -> list[list[str]]:
    """Per step, the page template of each simulated server (rendered once, copied per target)."""
    sims = models(distinct)
    out = []
    for ts in steps:
        for model in sims:
            model.advance_to(model.now + steps.step)
        out.append([page_template(model, ts) for model in sims])
    return out


def openmetrics(pages: list[list[str]], steps: range, targets: range) -> Iterator[str]:
    """The samples of `targets`, oldest first (target i copies page i mod the pages' count)."""
    for ts, page in zip(steps, pages, strict=True):
        names = [(i, instance(i)) for i in targets]
        yield "".join(f'up{{instance="{n}",job="sglang"}} 1 {ts}\n' for _, n in names)
        yield "".join(page[i % len(page)].replace("\0", n) for i, n in names)
    yield "# EOF\n"


def build(
    out: Path, targets: int, distinct: int, steps: range, group: int = 1000
) -> dict[str, float]:
    """One TSDB block per `group` targets under `out/tsdb` (promtool holds a block's series in
    memory: ~1 GB per 1,000 targets); Prometheus merges the overlapping blocks once it runs."""
    began = time.monotonic()
    pages = templates(distinct, steps)
    figures = {"openmetrics_bytes": 0.0, "render_seconds": time.monotonic() - began}
    figures["promtool_seconds"] = 0.0
    out.mkdir(parents=True, exist_ok=True)
    text, tsdb = out / "fleet.om", out / "tsdb"
    for first in range(0, targets, group):
        began = time.monotonic()
        with text.open("w") as f:
            for chunk in openmetrics(pages, steps, range(first, min(first + group, targets))):
                figures["openmetrics_bytes"] += f.write(chunk)
        written = time.monotonic()
        cmd = ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text), str(tsdb)]
        subprocess.run(cmd, check=True, capture_output=True)
        figures["render_seconds"] += written - began
        figures["promtool_seconds"] += time.monotonic() - written
    text.unlink()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--distinct", type=int, default=48, help="simulated servers rendered")
    parser.add_argument("--step", type=int, default=30, help="seconds between samples")
    parser.add_argument("--past", type=int, default=450, help="seconds of history before now")
    parser.add_argument("--future", type=int, default=600, help="seconds of samples after now")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    now = int(time.time()) // args.step * args.step
    steps = range(now - args.past, now + args.future + 1, args.step)
    print(build(args.out, args.targets, args.distinct, steps))


if __name__ == "__main__":
    main()
