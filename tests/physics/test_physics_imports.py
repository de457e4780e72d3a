"""sglang_physics stands alone: the daemon and the simulator import it, never the reverse."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "daemon" / "sglang_physics"
FORBIDDEN = ("sglang_tuner", "sglang_sim")


def _imported(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    absolute = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0]
    names += [n.module or "" for n in absolute]
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_physics_module_imports_neither_daemon_nor_simulator(path):
    assert not [m for m in _imported(path) if m.split(".")[0] in FORBIDDEN]
