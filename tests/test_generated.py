"""`make generate` owns docs/rules.md, the advice alert rules and the dashboards: none is stale."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATORS = {
    "docs/rules.md": [sys.executable, "-m", "sglang_tuner.cli.rules_doc", "--check"],
    "alerts/": [sys.executable, "alerts/generate.py", "--check"],
    "dashboards/": [sys.executable, "dashboards/generate.py", "--check"],
}


@pytest.mark.parametrize("owned", GENERATORS)
def test_generated_files_are_current(owned):
    if owned == "dashboards/" and importlib.util.find_spec("grafana_foundation_sdk") is None:
        pytest.skip("grafana-foundation-sdk (dashboards/generate.py) needs Python 3.11+")
    result = subprocess.run(
        GENERATORS[owned], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{owned} is stale, run `make generate`:\n{result.stderr}"


def test_makefile_generate_runs_every_generator():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ngenerate:", 1)[1].split("\n\n", 1)[0]
    assert "rules_doc" in recipe and "alerts/generate.py" in recipe
    assert "dashboards/generate.py" in recipe
