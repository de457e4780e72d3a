"""The design's walls, checked on the code: one direction through the flow, no I/O in the middle.

The package is a few wings (sub-packages) and the pure middle (top-level modules). Each sits on
a floor and may import only from floors below its own; each wing's docstring says what it may
import, and that sentence is checked against its imports. The pure steps may not reach, through
any chain of imports, a module that does I/O or reads the clock.
"""

import ast
import re
from collections import deque
from pathlib import Path

import pytest

DAEMON = Path(__file__).resolve().parents[1] / "daemon"
PACKAGE = DAEMON / "sglang_tuner"
SIM = DAEMON / "sglang_sim"

# Wings and top-level modules, on the floor of the flow they serve (0 = the shared vocabulary).
FLOORS: dict[str, int] = {
    "__init__": 0,  # the package's face: its version
    "assets": 0,  # standard library only: setup.py loads it from its file
    "model": 0,  # signals, windows, scrape results, server config, flags, advice, plans
    "config": 1,  # settings, targets, credentials
    "changes": 1,  # the change record and its verdict
    "rule": 2,  # the tuning-rule contract
    "sources": 2,  # everything that reads an SGLang server
    "alerting": 2,  # alert lifecycle, what an alert says, the Alertmanager client
    "web": 2,  # the daemon's TLS / auth front
    "predict": 3,  # the predictor: what a change would do to this server
    "target_state": 3,
    "evaluation": 3,  # the published evaluation every output reads
    "rules": 4,  # the tuning rules and SGLang's per-version facts (rules/sglang/)
    "store": 4,
    "exporter": 4,
    "judge": 5,
    "plan": 6,
    "publish": 6,
    "api": 6,
    "server": 7,  # one watched server: state, judgement, plan, what was asked
    "watch": 8,
    "loop": 9,
    "cli": 10,
    "__main__": 11,
}
# The outputs see only what was published: never the sources, target state, judge or plan.
OUTPUTS = ("api", "exporter", "store", "web")
UPSTREAM_OF_OUTPUTS = ("sources", "target_state", "judge", "plan", "watch", "publish", "loop")
# The pure middle: these, and every module they reach, do no I/O and read no clock.
PURE = (
    "model", "changes", "rule", "predict", "rules", "server", "target_state", "judge", "plan",
    "watch", "publish", "evaluation", "alerting.lifecycle", "alerting.texts", "alerting.alertmanager_status",
)  # fmt: skip
IO_MODULES = ("asyncio", "httpx", "aiohttp", "socket", "sqlite3", "urllib.request", "time", "os")
IO_CALLS = ("open(", "time.time(", "datetime.now(", "perf_counter(", ".read_text(", ".read_bytes(")
CLI = ("cli",)


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> str:
    """`daemon/sglang_tuner/rules/queue.py` -> `rules.queue`; a package's `__init__` -> it."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES = {_dotted(p): p for p in _modules(PACKAGE)}


def _unit(dotted: str) -> str:
    """The wing or top-level module a module belongs to: `rules.sglang.flags` -> `rules`."""
    return dotted.split(".")[0]


def _imports(path: Path) -> list[tuple[str, int]]:
    """(module of ours, line) for every import of the package in the file; a name imported from
    a module counts as that module, a module imported from a package as that module."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(DAEMON).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                inner = candidate.removeprefix("sglang_tuner.")
                found.append((candidate if inner in MODULES else module, node.lineno))
    return found


def _ours(module: str) -> str | None:
    """`sglang_tuner.rules.queue` -> `rules.queue`; `sglang_tuner` -> `__init__`; else None."""
    if module == "sglang_tuner":
        return "__init__"
    if not module.startswith("sglang_tuner."):
        return None
    return module.removeprefix("sglang_tuner.")


def _violations(path: Path) -> list[str]:
    here = _unit(_dotted(path))
    out = []
    for module, line in _imports(path):
        there = _ours(module)
        if there is None or _unit(there) == here:
            continue
        if FLOORS[_unit(there)] >= FLOORS[here]:
            out.append(f"{path.relative_to(DAEMON)}:{line} {here} imports {module}")
    return out


def _io_of(path: Path) -> list[str]:
    """What in one module does I/O or reads the clock: I/O modules imported, calls made."""
    imported = {m for m, _ in _imports(path)}
    found = sorted(m for m in imported if m.split(".")[0] in IO_MODULES or m in IO_MODULES)
    source = path.read_text()
    return found + [call for call in IO_CALLS if call in source]


def _impurities(start: str) -> list[str]:
    """Every module reached from `start` by imports that does I/O, with the chain that reaches
    it (`judge -> config.discovery: os`)."""
    chains, queue, out = {start: [start]}, deque([start]), []
    while queue:
        here = queue.popleft()
        io = _io_of(MODULES[here])
        if io:
            out.append(f"{' -> '.join(chains[here])}: {', '.join(io)}")
        for module, _ in _imports(MODULES[here]):
            there = _ours(module)
            if there is not None and there in MODULES and there not in chains:
                chains[there] = [*chains[here], there]
                queue.append(there)
    return out


def _is_pure(dotted: str) -> bool:
    return any(dotted == p or dotted.startswith(f"{p}.") for p in PURE)


def _wing_docstring_allows(wing: str) -> set[str] | None:
    """The wings and modules a wing's docstring says it may import (None: "everything")."""
    doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text())) or ""
    match = re.search(r"May import(.*?)(?:\.\s|\.$)", doc, re.S)
    assert match, f"{wing}/__init__.py: say what the wing may import ('May import: ...')"
    if "everything" in match.group(1):
        return None
    return set(re.findall(r"`([a-z_]+)`", match.group(1)))


WINGS = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def test_every_wing_and_top_level_module_has_a_floor():
    units = {_unit(d) for d in MODULES}
    assert not units - FLOORS.keys(), (
        f"give these a floor in FLOORS: {sorted(units - FLOORS.keys())}"
    )


def test_the_top_level_holds_the_middle_and_few_modules():
    flat = [p.name for p in PACKAGE.glob("*.py")]
    assert len(flat) <= 12, flat


@pytest.mark.parametrize("wing", WINGS)
def test_each_wing_says_what_it_is_for_and_imports_only_what_it_says(wing):
    allowed = _wing_docstring_allows(wing)
    if allowed is None:
        return
    reached = {
        _unit(there)
        for dotted, path in MODULES.items()
        if _unit(dotted) == wing
        for module, _ in _imports(path)
        if (there := _ours(module)) is not None
    }
    assert reached - {wing, "__init__"} <= allowed, f"{wing} imports {sorted(reached - allowed)}"


@pytest.mark.parametrize("dotted", sorted(MODULES))
def test_imports_go_down_the_flow_never_back_up(dotted):
    assert _violations(MODULES[dotted]) == []


@pytest.mark.parametrize("dotted", sorted(MODULES))
def test_outputs_read_only_the_published_evaluation(dotted):
    if _unit(dotted) not in OUTPUTS:
        return
    reached = {_unit(t) for m, _ in _imports(MODULES[dotted]) if (t := _ours(m)) is not None}
    assert not reached & set(UPSTREAM_OF_OUTPUTS)


@pytest.mark.parametrize("dotted", sorted(d for d in MODULES if _is_pure(d)))
def test_the_middle_reaches_no_io_and_no_clock_through_any_import(dotted):
    assert _impurities(dotted) == []


@pytest.mark.parametrize("path", _modules(SIM), ids=lambda p: str(p.relative_to(SIM)))
def test_simulator_imports_nothing_of_the_daemon(path):
    assert not [m for m, _ in _imports(path) if m.split(".")[0] == "sglang_tuner"]


@pytest.mark.parametrize("dotted", sorted(MODULES))
def test_only_the_command_line_imports_the_simulator(dotted):
    uses_sim = any(m.split(".")[0] == "sglang_sim" for m, _ in _imports(MODULES[dotted]))
    assert not uses_sim or _unit(dotted) in CLI


def _planted(tmp_rel: str, text: str) -> Path:
    path = PACKAGE / tmp_rel
    path.write_text(text)
    MODULES[_dotted(path)] = path
    return path


def _unplant(path: Path) -> None:
    MODULES.pop(_dotted(path), None)
    path.unlink()


def test_the_walls_catch_an_import_going_back_up():
    rogue = _planted("rules/_rogue_for_test.py", "from sglang_tuner.loop.tuner import Tuner\n")
    try:
        assert _violations(rogue) == [
            "sglang_tuner/rules/_rogue_for_test.py:1 rules imports sglang_tuner.loop.tuner"
        ]
    finally:
        _unplant(rogue)


def test_the_purity_check_follows_a_chain_of_imports():
    # a pure module importing a harmless-looking one that imports an I/O module: two hops
    helper = _planted("model/_rogue_helper.py", "import sqlite3\n")
    rogue = _planted("model/_rogue_for_test.py", "from sglang_tuner.model import _rogue_helper\n")
    try:
        assert _impurities("model._rogue_for_test") == [
            "model._rogue_for_test -> model._rogue_helper: sqlite3"
        ]
    finally:
        _unplant(rogue)
        _unplant(helper)


def test_a_wing_importing_what_its_docstring_does_not_allow_is_caught():
    rogue = _planted("changes/_rogue_for_test.py", "from sglang_tuner.config import settings\n")
    try:
        reached = {_unit(t) for m, _ in _imports(rogue) if (t := _ours(m)) is not None}
        assert reached - (_wing_docstring_allows("changes") or set()) == {"config"}
    finally:
        _unplant(rogue)
