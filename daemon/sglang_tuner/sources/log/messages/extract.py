"""Generate `sglang_messages.json`: every message SGLang's server can print, from its wheels.

    python -m sglang_tuner.sources.log.messages.extract [--wheels DIR] [--first 0.1.3]

Downloads each release's wheel from PyPI (`pip download --no-deps sglang==X`, cached in DIR,
default ~/.cache/sglang-wheels), parses the server's modules with `ast` (scheduler, model runner,
memory pools and allocators, CUDA-graph runners, tokenizer manager, server arguments, HTTP
server) and collects what they print: raised exceptions and assertions with a message, and the
logger's error, warning and info lines. Each message becomes a pattern (`patterns.py`), kept
with the versions that print it and its class (`classes.py`). A version that fails to download
or read is recorded as such; the others are still read.
"""

import argparse
import ast
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_tuner.sources.log.messages.classes import classify
from sglang_tuner.sources.log.messages.patterns import ANCHOR_MIN, WILD, Pattern

DATA_FILE = Path(__file__).resolve().parent / "sglang_messages.json"
DEFAULT_WHEELS = Path.home() / ".cache" / "sglang-wheels"
FIRST, LAST = "0.1.3", "0.5.23"  # 0.1.3: the first release on PyPI
MODULES_FROM = "0.4.0"  # the tree's layout as it is today (srt/managers/scheduler.py) began
# The server's modules, by area (the first matching path wins).
AREAS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cuda_graph", re.compile(r"^sglang/srt/(model_executor|speculative)/.*graph.*\.py$")),
    ("memory", re.compile(r"^sglang/srt/mem_cache/(?!storage/|sparsity/)[\w/]*\.py$")),
    ("model_runner", re.compile(r"^sglang/srt/model_executor/(?!.*mlx)[\w/]*\.py$")),
    ("model_runner", re.compile(r"^sglang/srt/managers/tp_worker[\w]*\.py$")),
    ("tokenizer", re.compile(r"^sglang/srt/managers/tokenizer_manager[\w]*\.py$")),
    ("scheduler", re.compile(r"^sglang/srt/managers/(scheduler[\w]*|schedule_\w+)\.py$")),
    ("scheduler", re.compile(r"^sglang/srt/managers/scheduler_components/\w+\.py$")),
    ("server_args", re.compile(r"^sglang/srt/(server_args|arg_groups/[\w/]+)\.py$")),
    ("http", re.compile(r"^sglang/srt/(server|entrypoints/http_server)\.py$")),
    # Before 0.2.7 the server lived under managers/router/ (0.1.3-0.1.16: model_rpc.py, the
    # scheduler and TP worker in one) and managers/controller/ (0.1.17-0.2.6), the pool in
    # srt/memory_pool.py (to 0.2.6); 0.2.7-0.3.x named its scheduler modules as below.
    ("cuda_graph", re.compile(r"^sglang/srt/managers/controller/cuda_graph_runner\.py$")),
    (
        "memory",
        re.compile(r"^sglang/srt/(memory_pool|managers/(router|controller)/radix_cache)\.py$"),
    ),
    (
        "model_runner",
        re.compile(r"^sglang/srt/managers/(router|controller)/(model_\w+|tp_worker)\.py$"),
    ),
    (
        "scheduler",
        re.compile(
            r"^sglang/srt/managers/(router/(scheduler|infer_batch|manager)|controller/(infer_batch"
            r"|schedule_heuristic|manager_\w+|dp_worker)|policy_scheduler|controller_\w+)\.py$"
        ),
    ),
)
_LOG_CALLS = {
    "error": "error",
    "exception": "error",
    "critical": "error",
    "fatal": "error",
    "warning": "warning",
    "warn": "warning",
    "warning_once": "warning",
    "info": "info",
    "info_once": "info",
}
_PERCENT = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[sdifgeErx]")
_BRACES = re.compile(r"\{[^{}]*\}")
_LETTERS_MIN = 3  # a later line of a message with fewer letters is a rule ("----") or a value


@dataclass
class Message:
    """One message as found in one or more versions."""

    pattern: str
    call: str  # raise, assert, error, warning, info
    exception: str  # the raised type ("" for log lines)
    area: str
    module: str  # the first module it was seen in (`_reading_order`)
    refs: set[str] = field(default_factory=set)  # names formatted into it
    versions: list[str] = field(default_factory=list)
    continues: str = ""  # a later line of a message printed on several: its first line


def area_of(path: str) -> str | None:
    """The server area a wheel path belongs to, None when it is not a server module we read."""
    if "/test" in path:
        return None
    return next((area for area, rule in AREAS if rule.match(path)), None)


# -- strings to patterns ----------------------------------------------------------------------
def _pieces(node: ast.AST | None, scope: dict[str, list[ast.expr]], refs: set[str]) -> list[str]:
    """The literal pieces of a string expression, WILD for anything computed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[str] = []
        for value in node.values:
            out += _pieces(value, scope, refs) if isinstance(value, ast.Constant) else [WILD]
            if isinstance(value, ast.FormattedValue):
                refs.update(_names(value.value))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pieces(node.left, scope, refs) + _pieces(node.right, scope, refs)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        refs.update(_names(node.right))
        return [_PERCENT.sub(WILD, p) for p in _pieces(node.left, scope, refs)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format":
            refs.update(name for arg in node.args for name in _names(arg))
            return [_BRACES.sub(WILD, p) for p in _pieces(node.func.value, scope, refs)]
    if isinstance(node, ast.Name) and node.id in scope:
        out = []
        for part in scope.pop(node.id):  # popped: a name assigned from itself stops here
            out += _pieces(part, scope, refs)
        return out
    if node is not None:
        refs.update(_names(node))
    return [WILD]


def _names(node: ast.AST) -> set[str]:
    """The attribute and variable names an expression reads."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Name):
            names.add(sub.id)
    return names


def pattern_text(pieces: list[str]) -> str:
    """The data-file form of a message's first line that holds enough literal text ("" where
    none does): one WILD for each run of wildcards (`pattern_lines`)."""
    lines = pattern_lines(pieces)
    return lines[0] if lines else ""


def pattern_lines(pieces: list[str]) -> list[str]:
    """The data-file form of each line of a message that holds enough literal text: one WILD
    for each run of wildcards. A message printed on several lines is one log line per line,
    each read on its own (SGLang's pool OOM: "Decode out of memory. Try to lower your batch
    size.", then "Try to allocate 148 tokens.")."""
    out = []
    for line in "".join(pieces).split("\n"):
        text = " ".join(re.sub(r"(?:\{\*\}\s*)+\{\*\}", WILD, line).split())
        if len(Pattern.parse(text).anchor) >= ANCHOR_MIN:
            out.append(text)
    return out


def _assignments(nodes: list[ast.AST]) -> dict[str, list[ast.expr]]:
    """String-building assignments of a scope: `msg = ...` then each `msg += ...`."""
    scope: dict[str, list[ast.expr]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id not in scope:
                scope[target.id] = [node.value]
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if isinstance(node.op, ast.Add) and node.target.id in scope:
                scope[node.target.id].append(node.value)
    return scope


# -- what a module prints ---------------------------------------------------------------------
def _call_kind(node: ast.Call) -> str | None:
    """error/warning/info for a logger call (`logger.warning(...)`, `self.logger.info(...)`)."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _LOG_CALLS:
        return None
    owner = func.value
    name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
    return _LOG_CALLS[func.attr] if "log" in name.lower() else None


def _exception_name(node: ast.expr | None) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id
    return target.attr if isinstance(target, ast.Attribute) else ""


def _printed(node: ast.AST) -> tuple[str, str, ast.expr] | None:
    """(call kind, exception type, message expression) of a statement that prints one; a
    logger call's `%s` arguments are folded into the expression (`"..." % args`)."""
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        return "raise", _exception_name(node.exc), node.exc.args[0]
    if isinstance(node, ast.Assert) and node.msg is not None:
        return "assert", "AssertionError", node.msg
    if isinstance(node, ast.Call) and node.args and (kind := _call_kind(node)):
        if len(node.args) == 1:
            return kind, "", node.args[0]
        args = ast.Tuple(elts=list(node.args[1:]), ctx=ast.Load())
        return kind, "", ast.BinOp(left=node.args[0], op=ast.Mod(), right=args)
    return None


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a function's (or module's) body in source order, without those of the
    functions nested in it (each is read as its own scope)."""
    nodes, stack = [], list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        nodes.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def module_messages(source: str, module: str, area: str) -> Iterator[Message]:
    """Every message one module's source prints (none when it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *funcs]:
        nodes = _own_nodes(scope)
        assigned = _assignments(nodes)
        for node in nodes:
            printed = _printed(node)
            if printed is None:
                continue
            kind, exception, expr = printed
            refs: set[str] = set()
            scope_copy = {name: list(parts) for name, parts in assigned.items()}
            lines = pattern_lines(_pieces(expr, scope_copy, refs))
            for i, text in enumerate(lines):
                if i and len(re.findall(r"[A-Za-z]", text)) < _LETTERS_MIN:
                    continue  # a later line that is a rule or a bare value, no message of its own
                first = lines[0] if i else ""
                yield Message(text, kind, exception, area, module, set(refs), continues=first)


def server_arg_fields(source: str, module: str) -> set[str]:
    """The field names of the `ServerArgs` dataclass (each is a `--flag`); from 0.5.2x also
    those of the field groups under `arg_groups/fields/`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    fields = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and (node.name == "ServerArgs" or "/fields/" in module):
            fields |= {
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
    return fields


# -- versions and wheels ----------------------------------------------------------------------
def _key(version: str) -> tuple[int, ...]:
    """0.5.4.post3 -> (0, 5, 4, 3); 0.5.4 -> (0, 5, 4, -1)."""
    main, _, post = version.partition(".post")
    return (*(int(part) for part in main.split(".")), int(post) if post else -1)


def releases(first: str, last: str) -> list[str]:
    """SGLang's releases from `first` to `last`, oldest first (`pip index versions sglang`)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "sglang"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = re.search(r"Available versions: (.*)", out)
    if listed is None:
        raise SystemExit(f"pip index versions sglang listed no versions:\n{out}")
    found = [v.strip() for v in listed.group(1).split(",")]
    found = [v for v in found if re.fullmatch(r"\d+\.\d+\.\d+(?:\.post\d+)?", v)]
    return sorted((v for v in found if _key(first) <= _key(v) <= _key(last)), key=_key)


def wheel(version: str, wheels: Path) -> Path | None:
    """The cached wheel of `version`, downloaded when missing (None: it could not be)."""
    cached = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if cached:
        return cached[0]
    wheels.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
        + ["-q", f"sglang=={version}", "-d", str(wheels)],
        capture_output=True,
        text=True,
    )
    cached = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if done.returncode != 0 or not cached:
        sys.stderr.write(f"sglang {version}: download failed: {done.stderr.strip()[-200:]}\n")
        return None
    return cached[0]


def wheel_messages(path: Path) -> tuple[list[Message], set[str]]:
    """Every message a wheel's server modules print, and its ServerArgs fields."""
    messages: list[Message] = []
    fields: set[str] = set()
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            area = area_of(name)
            if area is None:
                continue
            source = archive.read(name).decode("utf-8", errors="replace")
            messages += module_messages(source, name.removeprefix("sglang/"), area)
            if area == "server_args":
                fields |= server_arg_fields(source, name)
    return messages, fields


# -- the data file ----------------------------------------------------------------------------
def _spans(versions: list[str], order: list[str]) -> str:
    """Versions as runs of consecutive releases: "0.4.0..0.4.3.post2, 0.5.1..0.5.23"."""
    index = sorted(order.index(v) for v in set(versions))
    runs: list[list[int]] = []
    for i in index:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(order[a] if a == b else f"{order[a]}..{order[b]}" for a, b in runs)


def _reading_order(versions: list[str]) -> list[str]:
    """Releases from `MODULES_FROM` on first, then the older ones: a message is named by the
    module of the first release that prints it in today's layout of the tree, an older module
    only for a message no release from `MODULES_FROM` prints."""
    return sorted(versions, key=lambda v: (_key(v) < _key(MODULES_FROM), _key(v)))


def collect(versions: list[str], wheels: Path) -> dict[str, Any]:
    """The data file's content for `versions` (read from `wheels`, downloaded when missing)."""
    merged: dict[tuple[str, str, str, str], Message] = {}
    fields: set[str] = set()
    read, failed = [], []
    for version in _reading_order(versions):
        path = wheel(version, wheels)
        try:
            found, version_fields = wheel_messages(path) if path else ([], set())
        except (zipfile.BadZipFile, OSError) as exc:
            sys.stderr.write(f"sglang {version}: unreadable wheel: {exc}\n")
            path = None
        if path is None:
            failed.append(version)
            continue
        read.append(version)
        fields |= version_fields
        for message in found:
            key = (message.pattern, message.call, message.exception, message.area)
            kept = merged.setdefault(key, message)
            kept.refs |= message.refs
            if version not in kept.versions:
                kept.versions.append(version)
    return _document(sorted(read, key=_key), sorted(failed, key=_key), fields, merged.values())


def _document(
    read: list[str], failed: list[str], fields: set[str], messages: Iterable[Message]
) -> dict[str, Any]:
    rows = []
    for m in sorted(messages, key=lambda m: (m.area, m.call, m.pattern, m.exception)):
        # a later line of a message is what its first line is
        verdict = classify(m.continues or m.pattern, m.call, m.exception, m.area, m.refs, fields)
        rows.append(
            {
                "pattern": m.pattern,
                "call": m.call,
                "exception": m.exception,
                "area": m.area,
                "module": m.module,
                "refs": sorted(m.refs),
                "versions": _spans(m.versions, read),
                **({"continues": m.continues} if m.continues else {}),
                **verdict.as_data(),
            }
        )
    return {
        "source": "PyPI wheels of sglang, read by sglang_tuner.sources.log.messages.extract",
        "versions_read": read,
        "versions_failed": failed,
        "server_args_fields": sorted(fields),
        "messages": rows,
    }


def reclassify(document: dict[str, Any]) -> dict[str, Any]:
    """The document with every message classified again by today's tables (no download)."""
    fields = document["server_args_fields"]
    for row in document["messages"]:
        first = row.get("continues") or row["pattern"]  # a later line: its first line's class
        verdict = classify(first, row["call"], row["exception"], row["area"], row["refs"], fields)
        row.update(verdict.as_data())
    return document


def write(document: dict[str, Any], path: Path = DATA_FILE) -> None:
    """The data file, one message per line (diffs stay readable)."""
    head = {key: value for key, value in document.items() if key != "messages"}
    lines = [json.dumps(row, sort_keys=True) for row in document["messages"]]
    text = json.dumps(head, indent=1)[:-2] + ',\n "messages": [\n' + ",\n".join(lines) + "\n ]\n}\n"
    json.loads(text)  # the file must stay valid JSON
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Download (or reuse) the wheels, extract their messages, write the data file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS, help="wheel cache")
    parser.add_argument("--first", default=FIRST)
    parser.add_argument("--last", default=LAST)
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    parser.add_argument(
        "--reclassify", action="store_true", help="classify the data file again, download nothing"
    )
    args = parser.parse_args(argv)
    if args.reclassify:
        document = reclassify(json.loads(args.out.read_text(encoding="utf-8")))
    else:
        document = collect(releases(args.first, args.last), args.wheels)
    write(document, args.out)
    count, read = len(document["messages"]), len(document["versions_read"])
    sys.stdout.write(f"{args.out}: {count} messages from {read} versions\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
