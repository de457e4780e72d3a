"""The design's walls, checked on the code: one direction through the flow, no I/O in the rules.

Each module of `sglang_tuner` sits on a floor; it may import only from floors below its own.
The floors follow the flow: shared values, then sources and rules, target state, judge,
alert state, publish, outputs, the loop, and the command line on top.
"""

import ast
from pathlib import Path

import pytest

DAEMON = Path(__file__).resolve().parents[1] / "daemon"
PACKAGE = DAEMON / "sglang_tuner"
SIM = DAEMON / "sglang_sim"

FLOORS: dict[str, int] = {
    "values": 0,
    "values_scrape": 1,  # what a read of a server ends as: failure reasons, limits, results
    "assets": 0,  # standard library only: setup.py loads it from its file
    "signals": 0,
    "logsetup": 0,
    "window": 1,
    "config_fleet": 0,
    "config_problems": 0,  # the settings' problems: the YAML read, 'path: message' lines
    "config_targets": 1,  # the settings of one target and of file_sd
    "config": 2,
    "verdicts": 2,
    "verdicts_bootstrap": 0,  # the ratio of means and its bootstrap interval
    "changes": 3,
    "httpauth": 3,
    # the API's web config: TLS, the file, and the middleware that checks passwords
    "webtls": 1,
    "webconfig": 2,
    "webauth": 3,
    "targets": 3,
    "rules": 4,
    "sources": 4,
    "target_state": 5,
    "judge": 6,
    "transitions": 6,
    "plan": 7,
    "alerting": 7,
    "alert_texts": 6,  # what an alert says: its name, labels and annotations
    "evaluation": 8,
    "watch": 8,  # the watched targets' tables: state, source, judgement, plan
    "publish": 9,
    # outputs: they read the published evaluation (and the static rule catalogue)
    "schemas": 10,
    "schemas_inventory": 11,
    "schemas_changes": 11,
    "advice_text": 11,
    "advice_report": 12,
    "exporter": 10,
    "exporter_labels": 9,  # the collector's info labels: a target's, an advice's and its change
    "metric_families": 9,
    "alertmanager": 10,
    "store": 10,
    "store_rows": 9,  # the store's rows written and read back
    "store_schema": 9,  # the store's file: its tables, opened checked, moved aside if corrupt
    "runbook": 12,
    "apidocs": 12,
    "api_context": 13,
    "api_advice": 14,
    "api_changes": 14,
    "api": 15,
    "outputs": 16,
    "fleet": 16,  # the loop's Prometheus mode: source rounds -> target state
    "server_reads": 16,  # the loop's /server_info reads -> target state
    "schedule": 0,  # when the loop's work runs: knows nothing of the work
    "loop_reload": 17,  # the loop's targets and settings applied: file_sd, reload, retime
    "loop": 18,
    "server": 19,
    "check": 20,
    "demo": 20,
    "cli_parser": 20,  # the command line's arguments
    "__main__": 21,
    "__init__": 0,
}
# The outputs see only what was published: never the sources, target state or judge.
OUTPUTS = (
    "schemas", "schemas_inventory", "advice_report", "advice_text", "exporter", "store",
    "api_context", "api_advice", "api_changes", "api", "schemas_changes", "runbook", "store_rows",
    "store_schema", "exporter_labels",
)  # fmt: skip
UPSTREAM_OF_OUTPUTS = (
    "sources", "target_state", "judge", "loop", "loop_reload", "publish", "outputs",
)  # fmt: skip
# Judging is pure: these may not do I/O or read the clock.
PURE = (
    "rules", "window", "values", "values_scrape", "signals", "judge", "plan", "target_state",
    "publish", "alerting", "alert_texts", "verdicts", "verdicts_bootstrap", "changes", "watch",
)  # fmt: skip
IO_MODULES = ("asyncio", "httpx", "aiohttp", "socket", "sqlite3", "urllib.request", "time", "os")
CLI = ("__main__", "demo", "check")


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _floor_name(path: Path) -> str:
    """`rules/queue.py` -> `rules`; `loop.py` -> `loop` (a package is one floor)."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in the file."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(DAEMON).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names = [f"{module}.{a.name}" for a in node.names] if not node.module else [module]
            found += [(name, node.lineno) for name in names]
    return found


def _internal_floor(module: str) -> str | None:
    """The floor an absolute `sglang_tuner...` import lands on (None: not ours)."""
    parts = module.split(".")
    if parts[0] != "sglang_tuner":
        return None
    if len(parts) == 1 or not any(
        (PACKAGE / name).exists() for name in (parts[1], f"{parts[1]}.py")
    ):
        return "__init__"  # a name from the package's face (`from . import __version__`)
    return parts[1]


def _violations(path: Path) -> list[str]:
    here = _floor_name(path)
    out = []
    for module, line in _imports(path):
        there = _internal_floor(module)
        if there is None or there == here:
            continue
        if FLOORS[there] >= FLOORS[here]:
            out.append(f"{path.relative_to(DAEMON)}:{line} {here} imports {module} ({there})")
    return out


def test_every_module_has_a_floor():
    unknown = {_floor_name(p) for p in _modules(PACKAGE)} - FLOORS.keys()
    assert not unknown, f"give these modules a floor in FLOORS: {sorted(unknown)}"


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_flow_never_back_up(path):
    assert _violations(path) == []


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_outputs_read_only_the_published_evaluation(path):
    if _floor_name(path) not in OUTPUTS:
        return
    reached = {_internal_floor(m) for m, _ in _imports(path)}
    assert not reached & set(UPSTREAM_OF_OUTPUTS)


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_judging_does_no_io_and_reads_no_clock(path):
    if _floor_name(path) not in PURE:
        return
    source = path.read_text()
    imported = {m for m, _ in _imports(path)}
    assert not {m for m in imported if m.split(".")[0] in IO_MODULES or m in IO_MODULES}
    for call in ("open(", "time.time(", "datetime.now(", "perf_counter("):
        assert call not in source, f"{path.name} calls {call}"


@pytest.mark.parametrize("path", _modules(SIM), ids=lambda p: str(p.relative_to(SIM)))
def test_simulator_imports_nothing_of_the_daemon(path):
    assert not [m for m, _ in _imports(path) if m.split(".")[0] == "sglang_tuner"]


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_command_line_imports_the_simulator(path):
    uses_sim = any(m.split(".")[0] == "sglang_sim" for m, _ in _imports(path))
    assert not uses_sim or _floor_name(path) in CLI


def test_the_walls_catch_an_import_going_back_up(tmp_path):
    rogue = PACKAGE / "rules" / "_rogue_for_test.py"
    rogue.write_text("from ..loop import Tuner\n")
    try:
        assert _violations(rogue) == [
            "sglang_tuner/rules/_rogue_for_test.py:1 rules imports sglang_tuner.loop.tuner (loop)"
        ]
    finally:
        rogue.unlink()
