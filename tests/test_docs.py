"""The docs describe the code: every setting is documented, README starts with the two commands."""

import re
import textwrap
from pathlib import Path

import pytest
from sglang_tuner.config.settings import AlertmanagerSettings, Settings
from sglang_tuner.config.target_settings import FileSDSettings, TargetSettings

ROOT = Path(__file__).resolve().parent.parent


def test_configuration_doc_mentions_every_setting():
    text = (ROOT / "docs" / "configuration.md").read_text()
    for model in (Settings, TargetSettings, FileSDSettings, AlertmanagerSettings):
        missing = [name for name in model.model_fields if f"`{name}`" not in text]
        assert not missing, f"{model.__name__} fields missing from docs/configuration.md: {missing}"


def test_readme_starts_with_make_demo_and_make_test():
    lines = (ROOT / "README.md").read_text().splitlines()
    block = "\n".join(lines[:8])
    assert "make demo" in block and "make test" in block


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_contributing_rule_recipe_works_as_written():
    from helpers import evaluate, window_from
    from sglang_tuner.model.advice import Finding, Pass

    text = (ROOT / "docs" / "contributing.md").read_text()
    recipe = text.split("## Add a tuning rule", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(textwrap.dedent(recipe), "contributing.md", "exec"), namespace)
    rule = namespace["POOL_IDLE"]
    idle = window_from(token_usage="0.1x10", num_queue_reqs="0x10")
    assert isinstance(evaluate(rule, idle), Finding)
    assert isinstance(
        evaluate(rule, window_from(token_usage="0.9x10", num_queue_reqs="0x10")), Pass
    )


_WINGS = "model|config|sources|changes|rules|alerting|api|exporter|store|web|loop|cli"
_MIDDLE = "target_state|judge|plan|watch|publish|evaluation|assets"
_MODULE_PATH = re.compile(
    rf"(?<![\w/.])(?:daemon/sglang_tuner/)?((?:{_WINGS})/[\w/]*?\w+\.py|(?:{_MIDDLE})\.py)\b"
)
_TEST_PATH = re.compile(r"(?<![\w/])(tests/[\w/]+\.py)\b")


@pytest.mark.parametrize(
    "doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_docs_name_no_module_that_does_not_exist(doc):
    if doc.name == "simulator.md":  # names SGLang's own source files (managers/scheduler.py, ...)
        return
    text = doc.read_text()
    package = ROOT / "daemon" / "sglang_tuner"
    missing = [m for m in _MODULE_PATH.findall(text) if not (package / m).exists()]
    missing += [t for t in _TEST_PATH.findall(text) if not (ROOT / t).exists()]
    assert not missing, f"{doc.name} names files that do not exist: {sorted(set(missing))}"
