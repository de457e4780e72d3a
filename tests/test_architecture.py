"""The design's walls, checked on the code; and the checker, checked on crossings planted in a copy.

The walls and their tables live in `tests/tools/walls.py`: floors, what each package's docstring
says it may import, no I/O and no clock in the pure middle (nor in anything it reaches, nor in the
physics package), the physics package and the simulator sealed off from the daemon, only the
command line importing the simulator, the outputs reading only the published evaluation.
"""

import ast
import shutil
from pathlib import Path

import pytest

from tests.tools import walls
from tests.tools.walls import Crossing

DAEMON = Path(__file__).resolve().parents[1] / "daemon"
PACKAGE = DAEMON / walls.DAEMON_PACKAGE
CROSSINGS = walls.crossings(DAEMON)


def _crossed(wall: str) -> list[str]:
    return [str(c) for c in CROSSINGS if c.wall == wall]


def test_imports_go_down_the_floors_never_back_up():
    assert _crossed("floors") == []


def test_each_package_imports_only_what_its_docstring_says():
    assert _crossed("declared") == []


def test_the_middle_and_the_physics_reach_no_io_and_no_clock_through_any_import():
    assert _crossed("pure") == []


def test_the_physics_and_the_simulator_import_nothing_of_the_daemon():
    assert _crossed("sealed") == []


def test_only_the_command_line_imports_the_simulator():
    assert _crossed("simulator") == []


def test_outputs_read_only_the_published_evaluation():
    assert _crossed("outputs") == []


def test_the_top_level_holds_the_middle_and_few_modules():
    flat = [p.name for p in PACKAGE.glob("*.py")]
    assert len(flat) <= 12, flat


def test_the_physics_docstring_says_what_the_sealed_table_says():
    modules = walls.load(DAEMON)
    assert walls.declared("sglang_physics", modules) == {
        "sglang_physics",
        *walls.SEALED["sglang_physics"],
    }


# --- the checker catches each crossing, planted in a copy of daemon/ ---------------------------

T = "sglang_tuner/"
Expected = tuple[str, int | None, str] | tuple[str, str, int | None, str]


def case(name: str, file: str, text: str, *expected: Expected, more: dict[str, str] | None = None):
    """A plant: `text` written into `file` under daemon/ (after what it holds, when it exists) and
    in `more`; what the checker must then report, each (wall, line in the plant or None, what
    the report says), in `file` unless a file is named first."""
    want = [e if len(e) == 4 else (e[0], file, *e[1:]) for e in expected]
    return pytest.param({file: text, **(more or {})}, want, id=name)


PLANTS = [
    case("subprocess", T + "model/planted.py", "import subprocess\n\nsubprocess.run(['true'])\n",
         ("pure", 3, "model.planted uses subprocess.run")),
    case("subprocess imported only", T + "rules/planted.py", "from subprocess import Popen\n",
         ("pure", 1, "uses subprocess.Popen")),
    case("open", T + "rules/planted.py",
         "def read(path):\n    with open(path) as f:\n        return f.read()\n",
         ("pure", 2, "rules.planted uses open()")),
    case("Path.exists", T + "changes/planted.py",
         "from pathlib import Path\n\n\ndef seen(path: Path) -> bool:\n    return path.exists()\n",
         ("pure", 5, "uses .exists()")),
    case("Path.read_text", T + "predict/planted.py",
         "from pathlib import Path\n\nTEXT = Path('x').read_text()\n",
         ("pure", 3, "predict.planted uses .read_text()")),
    *[
        case(f"Path.{method}", T + "rules/sglang/planted.py",
             f"def touch(path):\n    return path.{method}({args})\n",
             ("pure", 2, f"rules.sglang.planted uses .{method}()"))
        for method, args in [("write_text", "'x'"), ("iterdir", ""), ("stat", ""), ("mkdir", ""),
                             ("unlink", ""), ("glob", "'*.py'")]
    ],
    case("time.time, appended to a module", T + "plan.py", "import time\n\nNOW = time.time()\n",
         ("pure", 3, "plan uses time.time")),
    case("from time import time", T + "model/planted.py",
         "from time import time\n\n\ndef now():\n    return time()\n",
         ("pure", 5, "uses time.time")),
    case("time.monotonic under an alias", T + "model/planted.py",
         "from time import monotonic as clock\n\nSTART = clock()\n",
         ("pure", 3, "uses time.monotonic")),
    case("time.perf_counter, module aliased", T + "judge.py",
         "import time as t\n\nSTART = t.perf_counter()\n",
         ("pure", 3, "judge uses time.perf_counter")),
    case("time.sleep", T + "target_state.py", "import time\n\n\ndef wait():\n    time.sleep(1)\n",
         ("pure", 5, "target_state uses time.sleep")),
    case("datetime.now", T + "rules/planted.py",
         "from datetime import datetime\n\nNOW = datetime.now()\n",
         ("pure", 3, "uses datetime.datetime.now")),
    case("datetime.utcnow, module aliased", T + "rules/planted.py",
         "import datetime as dt\n\nNOW = dt.datetime.utcnow()\n",
         ("pure", 3, "uses datetime.datetime.utcnow")),
    case("date.today", T + "changes/planted.py",
         "from datetime import date\n\nTODAY = date.today()\n",
         ("pure", 3, "uses datetime.date.today")),
    case("socket", T + "publish.py",
         "import socket\n\n\ndef probe(host):\n    return socket.create_connection((host, 80))\n",
         ("pure", 5, "publish uses socket.create_connection")),
    case("os.environ", T + "watch.py", "import os\n\nTOKEN = os.environ.get('TOKEN')\n",
         ("pure", 3, "watch uses os.environ.get")),
    case("from os import environ", T + "model/planted.py",
         "from os import environ\n\nTOKEN = environ['TOKEN']\n",
         ("pure", 3, "uses os.environ")),
    case("os.getenv", T + "evaluation.py", "import os\n\nTOKEN = os.getenv('TOKEN')\n",
         ("pure", 3, "evaluation uses os.getenv")),
    case("os.listdir", T + "alerting/texts.py", "import os\n\nFILES = os.listdir('.')\n",
         ("pure", 3, "alerting.texts uses os.listdir")),
    case("os.path.exists", T + "model/planted.py", "import os.path\n\nHERE = os.path.exists('x')\n",
         ("pure", 3, "uses os.path.exists")),
    case("I/O reached through a chain of imports", T + "judge.py",
         "from sglang_tuner.config import planted\n",
         ("pure", T + "config/planted.py", 3, "judge -> config.planted uses os.environ"),
         more={T + "config/planted.py": "import os\n\nTOKEN = os.environ['TOKEN']\n"}),
    case("nested package up to its parent", T + "rules/sglang/planted.py",
         "from sglang_tuner.rules.latency import SOURCE\n",
         ("declared", 1, "rules.sglang imports rules.latency")),
    case("nested package up, relative", T + "rules/sglang/planted.py",
         "from ..latency import SOURCE\n",
         ("declared", 1, "rules.sglang imports rules.latency")),
    case("nested package up, relative module", T + "rules/sglang/planted.py",
         "from .. import memory\n",
         ("declared", 1, "rules.sglang imports rules.memory")),
    case("nested package across to a sibling", T + "sources/log/planted.py",
         "from sglang_tuner.sources.prometheus import promql\n",
         ("declared", 1, "sources.log imports sources.prometheus.promql")),
    case("nested package up to a module of its wing", T + "sources/log/planted.py",
         "from sglang_tuner.sources.http import HttpClient\n",
         ("declared", 1, "sources.log imports sources.http")),
    case("a wing importing what its docstring does not name", T + "alerting/planted.py",
         "from sglang_tuner.changes import record\n",
         ("declared", 1, "alerting imports changes.record")),
    case("a package that does not say what it may import", T + "rules/planted/__init__.py",
         '"""Planted."""\n',
         ("declared", None, "rules.planted: say what the package may import")),
    case("sglang_physics importing the daemon", "sglang_physics/planted.py",
         "from sglang_tuner.model import signals\n",
         ("sealed", 1, "sglang_physics imports sglang_tuner.model.signals")),
    case("sglang_physics importing the simulator", "sglang_physics/planted.py",
         "from sglang_sim import gpus\n",
         ("sealed", 1, "sglang_physics imports sglang_sim.gpus")),
    case("sglang_physics reading the clock", "sglang_physics/step.py",
         "import time\n\nSTART = time.monotonic()\n",
         ("pure", 3, "sglang_physics.step uses time.monotonic")),
    case("sglang_physics opening a file", "sglang_physics/planted.py",
         "def load(path):\n    return open(path).read()\n",
         ("pure", 2, "sglang_physics.planted uses open()")),
    case("the simulator importing the daemon", "sglang_sim/planted.py",
         "from sglang_tuner.model import signals\n",
         ("sealed", 1, "sglang_sim imports sglang_tuner.model.signals")),
    case("an import back up the floors", T + "judge.py", "from sglang_tuner import watch\n",
         ("floors", 1, "judge (floor 5) imports watch (floor 8)")),
    case("a module with no floor", T + "planted.py", "X = 1\n",
         ("floors", None, "planted has no floor")),
    case("an output reading the judge", T + "api/planted.py",
         "from sglang_tuner.judge import Judge\n",
         ("declared", 1, "api imports judge"), ("outputs", 1, "api reads judge")),
    case("a source importing the simulator", T + "sources/planted.py",
         "from sglang_sim import gpus\n",
         ("declared", 1, "sources imports sglang_sim.gpus"),
         ("simulator", 1, "sources imports sglang_sim.gpus")),
]  # fmt: skip


def _listing(files: dict[str, str]) -> dict[str, tuple[int, int] | None]:
    """Each file of the source tree a plant names, with its modification time and size (None:
    absent), and every file there named like a plant: what planting in the tree would change.
    (Not the whole tree: the tree may be edited while the tests run.)"""
    paths = {DAEMON / rel for rel in files} | set(DAEMON.rglob("*planted*"))
    return {
        str(p.relative_to(DAEMON)): (p.stat().st_mtime_ns, p.stat().st_size) if p.exists() else None
        for p in paths
    }


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "daemon"
    for top in (walls.DAEMON_PACKAGE, *walls.SEALED):
        shutil.copytree(DAEMON / top, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _plant(copy: Path, files: dict[str, str]) -> dict[str, int]:
    """Write each text into the copy (after what a file holds); the line each text starts at."""
    first_lines = {}
    for rel, text in files.items():
        path = copy / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        held = path.read_text() if path.exists() else ""
        held += "\n" if held and not held.endswith("\n") else ""
        first_lines[rel] = held.count("\n")
        path.write_text(held + text)
    return first_lines


@pytest.fixture(scope="module")
def unplanted(tmp_path_factory: pytest.TempPathFactory) -> list[Crossing]:
    return walls.crossings(_copy(tmp_path_factory.mktemp("unplanted")))


def test_the_checker_reports_on_a_copy_what_it_reports_on_the_tree(unplanted):
    assert unplanted == CROSSINGS


def test_the_unplanted_copy_crosses_no_wall(unplanted):
    assert [str(c) for c in unplanted] == []


@pytest.mark.parametrize(("files", "expected"), PLANTS)
def test_the_checker_catches_each_planted_crossing_and_writes_nothing_into_the_tree(
    tmp_path, unplanted, files, expected
):
    before = _listing(files)
    copy = _copy(tmp_path)
    first_lines = _plant(copy, files)
    for rel, text in files.items():
        ast.parse(text, rel)  # each plant is valid Python
    new = [c for c in walls.crossings(copy) if c not in unplanted]
    wanted = [
        (wall, rel if line is None else f"{rel}:{first_lines.get(rel, 0) + line}")
        for wall, rel, line, _what in expected
    ]
    assert sorted((c.wall, c.where) for c in new) == sorted(wanted), [str(c) for c in new]
    for (_wall, _rel, _line, what), crossing in zip(sorted(expected), sorted(new), strict=True):
        assert what in crossing.what, str(crossing)
    assert _listing(files) == before


def test_every_test_module_has_a_name_of_its_own():
    """The test folders are not packages: pytest imports each test module by its file name, so two
    modules of one name stop collection from a clean clone (a warm cache can hide it)."""
    seen: dict[str, list[str]] = {}
    for path in sorted((DAEMON.parent / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(DAEMON.parent)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
