"""The design's walls as a checker: `crossings(daemon)` lists every place a tree crosses one.

The daemon is a few wings (sub-packages, some with packages nested in them) and the pure middle
(top-level modules). The walls, each a table below:
- floors: a module imports only from its own wing or module and from floors below it;
- declared: every package (a wing or a package nested in one) imports only its own modules and
  what its docstring's "May import: ..." sentence names (a backquoted wing, top-level module,
  dotted module or package; "everything" lifts the limit). A nested package reaching up to its
  parent or across to a sibling must name it;
- pure: the pure middle, and every module it reaches through any chain of imports, does no I/O
  and reads no clock. Read from the syntax tree: calls and attribute uses resolved through
  imports and aliases (`from time import time as now; now()` is `time.time`), pathlib's I/O
  methods, `open`;
- sealed: the physics package and the simulator import only the packages of ours listed;
- simulator: only the command line imports the simulator;
- outputs: the outputs read only the published evaluation.

It reads files only (parses them, never imports them), so it runs as well on a copy.
"""

import ast
import functools
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# --- the walls, as data -----------------------------------------------------------------------

DAEMON_PACKAGE = "sglang_tuner"
# Wings and top-level modules of the daemon, on the floor of the flow they serve
# (0 = the shared vocabulary). A module may import only from floors below its own.
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
UPSTREAM_OF_OUTPUTS = (
    "sources", "target_state", "judge", "plan", "server", "watch", "publish", "loop",
)  # fmt: skip
# The pure middle: these (daemon wings and modules, or whole packages of ours), and every module
# they reach, do no I/O and read no clock.
PURE = (
    "model", "changes", "rule", "predict", "rules", "target_state", "judge", "plan", "server",
    "watch", "publish", "evaluation", "alerting.lifecycle", "alerting.texts",
    "alerting.alertmanager_status", "sglang_physics",
)  # fmt: skip
# Our packages besides the daemon, and which of our packages each may import.
SEALED: dict[str, tuple[str, ...]] = {
    "sglang_physics": (),  # shared by the predictor and the simulator: pure, imports neither
    "sglang_sim": ("sglang_physics",),  # the daemon's sparring partner shares no name table
}
SIMULATOR_IMPORTERS = ("cli",)  # the daemon's only wing that may import the simulator

# What is I/O or the clock: a use of one of these names (or of a name below it), resolved
# through the module's imports, unless it is below one of PURE_NAMES.
IO_NAMES = (
    "subprocess", "socket", "ssl", "select", "selectors", "asyncio", "multiprocessing", "signal",
    "sqlite3", "httpx", "aiohttp", "requests", "urllib.request", "http.client", "http.server",
    "shutil", "tempfile", "glob", "fcntl", "mmap", "importlib.resources", "io.open", "builtins",
    "codecs.open", "sys.stdin", "sys.stdout", "sys.stderr", "sys.argv", "os",
    "pathlib.Path.cwd", "pathlib.Path.home",
    # the clock
    "time", "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
    "datetime.date.today",
)  # fmt: skip
PURE_NAMES = (
    "os.path.join", "os.path.basename", "os.path.dirname", "os.path.splitext", "os.path.normpath",
    "os.path.commonprefix", "os.sep", "os.fspath", "os.PathLike", "os.linesep",
)  # fmt: skip
# Methods that touch the file system, whatever object they are called on (pathlib's I/O).
PATH_IO_METHODS = frozenset(
    "exists is_file is_dir is_symlink stat lstat read_text read_bytes write_text write_bytes "
    "iterdir glob rglob mkdir rmdir unlink touch chmod samefile readlink symlink_to "
    "hardlink_to expanduser".split()
)
BUILTIN_IO = frozenset({"open", "input", "print"})

# --- reading a tree ---------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Crossing:
    """One place a wall is crossed: which wall, where (`sglang_tuner/judge.py:12`), and what."""

    wall: str
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: [{self.wall}] {self.what}"


@dataclass(frozen=True)
class Module:
    """One source file: its dotted name (a package's `__init__` is the package) and path."""

    name: str
    path: Path
    rel: str  # relative to the daemon folder, for messages
    is_package: bool
    text: str

    @property
    def tree(self) -> ast.Module:
        return _parse(self.text)


@functools.cache
def _parse(text: str) -> ast.Module:
    """Parsed once per distinct text: the copies a test plants into share their other files."""
    return ast.parse(text)


def load(daemon: Path) -> dict[str, Module]:
    """Every module of our packages under `daemon`, by dotted name."""
    modules = {}
    for top in (DAEMON_PACKAGE, *SEALED):
        for path in sorted((daemon / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(daemon).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            rel = str(path.relative_to(daemon))
            modules[name] = Module(name, path, rel, is_package, path.read_text())
    return modules


def _is_ours(name: str) -> bool:
    return name.split(".")[0] in (DAEMON_PACKAGE, *SEALED)


@functools.cache
def _statements(text: str) -> tuple[tuple[int, str | None, tuple[str, ...], int], ...]:
    """(level, module, names, line) of every import in a text; level -1 for `import a, b`."""
    found = []
    for node in ast.walk(_parse(text)):
        if isinstance(node, ast.Import):
            found.append((-1, None, tuple(a.name for a in node.names), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            found.append((node.level, node.module, names, node.lineno))
    return tuple(found)


def imports(module: Module, modules: dict[str, Module]) -> list[tuple[str, int]]:
    """(module of ours, line) for every import in the file, relative ones resolved; a name
    imported from a package counts as its module when it is one."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    found = []
    for level, source, names, line in _statements(module.text):
        if level < 0:
            found += [(name, line) for name in names]
            continue
        base = package.rsplit(".", level - 1)[0] if level else ""
        source = ".".join(p for p in (base, source or "") if p)
        for name in names:
            found.append((f"{source}.{name}" if f"{source}.{name}" in modules else source, line))
    return [(name, line) for name, line in found if _is_ours(name)]


def _full(entry: str) -> str:
    """A table's or docstring's name as a dotted name: `rules` -> `sglang_tuner.rules`."""
    return entry if _is_ours(entry) else f"{DAEMON_PACKAGE}.{entry}"


def _below(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(f"{prefix}.")


def _short(name: str) -> str:
    return name.removeprefix(f"{DAEMON_PACKAGE}.")


def unit(name: str) -> str | None:
    """The wing or top-level module of the daemon a module is in (`__init__` for the package
    itself); None outside the daemon."""
    parts = name.split(".")
    if parts[0] != DAEMON_PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else "__init__"


# --- I/O and the clock ------------------------------------------------------------------------


def _bindings(tree: ast.Module) -> dict[str, str]:
    """What each imported name stands for: `import os.path` binds `os`, `from time import
    time as now` binds `now` to `time.time`."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (`os` of `os.path.exists`), if a name."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_io(name: str) -> bool:
    return any(_below(name, io) for io in IO_NAMES) and not any(
        _below(name, ok) for ok in PURE_NAMES
    )


class _Uses(ast.NodeVisitor):
    """The I/O and clock uses of one module: (line, what), the first use of each name."""

    def __init__(self, bound: dict[str, str]) -> None:
        self.bound = bound
        self.found: dict[str, int] = {}

    def _add(self, what: str, line: int) -> None:
        self.found.setdefault(what, line)

    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802 (ast's name)
        parts, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            parts.append(root.attr)
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.bound:
            self._use(".".join([self.bound[root.id], *reversed(parts)]), node.lineno)
        else:
            self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:  # noqa: N802
        if node.id in self.bound:
            self._use(self.bound[node.id], node.lineno)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        func = node.func
        if isinstance(func, ast.Name) and func.id in BUILTIN_IO and func.id not in self.bound:
            self._add(f"{func.id}()", node.lineno)
        if isinstance(func, ast.Attribute) and func.attr in PATH_IO_METHODS:
            if _root(func.value) not in self.bound:  # else its name says (`os.path.exists`)
                self._add(f".{func.attr}()", node.lineno)
        self.generic_visit(node)

    def _use(self, name: str, line: int) -> None:
        if _is_io(name):
            self._add(name, line)


def io_uses(module: Module) -> list[tuple[int, str]]:
    """(line, what) for each I/O or clock name the module uses, an unused I/O import included."""
    return list(_io_uses(module.text))


@functools.cache
def _io_uses(text: str) -> tuple[tuple[int, str], ...]:
    tree = _parse(text)
    bound = _bindings(tree)
    uses = _Uses(bound)
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            uses.visit(node)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):  # an I/O module imported but not used (or used by `getattr`)
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if name in bound and name not in used and _is_io(bound[name]):
                    uses._add(bound[name], node.lineno)
    return tuple(sorted((line, what) for what, line in uses.found.items()))


# --- the walls --------------------------------------------------------------------------------


def floors(modules: dict[str, Module]) -> Iterator[Crossing]:
    """Each daemon module imports from its own unit or from floors below its own."""
    for module in modules.values():
        here = unit(module.name)
        if here is None:
            continue
        if here not in FLOORS:
            yield Crossing("floors", module.rel, f"{here} has no floor in FLOORS")
            continue
        for target, line in imports(module, modules):
            there = unit(target)
            if there in (None, here) or there not in FLOORS:
                continue
            if FLOORS[there] >= FLOORS[here]:
                floor, up = FLOORS[here], FLOORS[there]
                what = f"{here} (floor {floor}) imports {_short(target)} (floor {up})"
                yield Crossing("floors", f"{module.rel}:{line}", what)


def packages(modules: dict[str, Module]) -> list[str]:
    """Every package of the daemon below its top: wings and the packages nested in them (a
    folder of modules without `__init__.py` too)."""
    folders = {m.name.rpartition(".")[0] for m in modules.values() if not m.is_package}
    folders |= {m.name for m in modules.values() if m.is_package}
    return sorted(f for f in folders if unit(f) is not None and "." in f)


def declared(package: str, modules: dict[str, Module]) -> set[str] | None:
    """What a package's docstring says it may import, as dotted names (None: everything);
    raises LookupError when it does not say."""
    init = modules.get(package)
    doc = ast.get_docstring(init.tree) if init and init.is_package else None
    match = re.search(r"May import(.*?)(?:\.\s|\.$)", doc or "", re.S)
    if match is None:
        raise LookupError(package)
    if "everything" in match.group(1):
        return None
    return {_full(name) for name in re.findall(r"`([a-z_][a-z_.]*)`", match.group(1))}


def declarations(modules: dict[str, Module]) -> Iterator[Crossing]:
    """Each package imports only its own modules, the daemon's face and what it declares."""
    for package in packages(modules):
        rel = package.replace(".", "/") + "/__init__.py"
        try:
            allowed = declared(package, modules)
        except LookupError:
            what = f"{_short(package)}: say what the package may import ('May import: ...')"
            yield Crossing("declared", rel, what)
            continue
        if allowed is None:
            continue
        allowed |= {package}
        for module in modules.values():
            if not _below(module.name, package):
                continue
            for target, line in imports(module, modules):
                if target != DAEMON_PACKAGE and not any(_below(target, a) for a in allowed):
                    what = f"{_short(package)} imports {_short(target)}, not in its docstring"
                    yield Crossing("declared", f"{module.rel}:{line}", what)


def _chains(roots: Iterable[str], modules: dict[str, Module]) -> dict[str, list[str]]:
    """Every module reached from the roots by imports, with a shortest chain from a root."""
    chains = {root: [root] for root in roots}
    queue = deque(chains)
    while queue:
        here = queue.popleft()
        for target, _ in imports(modules[here], modules):
            if target in modules and target not in chains:
                chains[target] = [*chains[here], target]
                queue.append(target)
    return chains


def purity(modules: dict[str, Module]) -> Iterator[Crossing]:
    """The pure middle and all it reaches: no I/O, no clock."""
    roots = [m for m in modules if any(_below(m, _full(p)) for p in PURE)]
    for name, chain in _chains(roots, modules).items():
        for line, what in io_uses(modules[name]):
            path = " -> ".join(_short(m) for m in chain)
            yield Crossing("pure", f"{modules[name].rel}:{line}", f"{path} uses {what}")


def sealed(modules: dict[str, Module]) -> Iterator[Crossing]:
    """The physics package and the simulator import only the packages of ours they may."""
    for module in modules.values():
        top = module.name.split(".")[0]
        if top not in SEALED:
            continue
        for target, line in imports(module, modules):
            there = target.split(".")[0]
            if there != top and there not in SEALED[top]:
                yield Crossing("sealed", f"{module.rel}:{line}", f"{top} imports {target}")


def simulator(modules: dict[str, Module]) -> Iterator[Crossing]:
    """Of the daemon, only the command line imports the simulator."""
    for module in modules.values():
        here = unit(module.name)
        if here is None or here in SIMULATOR_IMPORTERS:
            continue
        for target, line in imports(module, modules):
            if target.split(".")[0] == "sglang_sim":
                yield Crossing("simulator", f"{module.rel}:{line}", f"{here} imports {target}")


def outputs(modules: dict[str, Module]) -> Iterator[Crossing]:
    """The outputs import nothing upstream of the published evaluation."""
    for module in modules.values():
        if unit(module.name) not in OUTPUTS:
            continue
        for target, line in imports(module, modules):
            if unit(target) in UPSTREAM_OF_OUTPUTS:
                what = f"{unit(module.name)} reads {_short(target)}, not the published evaluation"
                yield Crossing("outputs", f"{module.rel}:{line}", what)


def crossings(daemon: Path) -> list[Crossing]:
    """Every crossing of every wall in the tree under `daemon` (the folder holding the
    packages), sorted."""
    modules = load(daemon)
    found = [
        *floors(modules),
        *declarations(modules),
        *purity(modules),
        *sealed(modules),
        *simulator(modules),
        *outputs(modules),
    ]
    return sorted(set(found))
