"""The distribution: sdist + wheel build and pass twine; the wheel alone, in a fresh venv, runs.

Built once per test run (`python -m build`, pip's cache reused); the fresh venv gets only the wheel
and its dependencies, and every command runs outside the checkout so nothing comes from daemon/.
"""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from sglang_tuner import __version__
from sglang_tuner.assets import collect

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
PROMTOOL = shutil.which("promtool")
# The checkout's daemon/ must not leak into the fresh venv's commands.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}


def run(
    cmd: list[str | Path], timeout: float = 300, **kw: object
) -> subprocess.CompletedProcess[str]:
    """Run a command; fail the test with its output when it fails."""
    result = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=CLEAN_ENV, **kw
    )  # type: ignore[call-overload]
    assert result.returncode == 0, f"{cmd}: rc={result.returncode}\n{result.stdout}{result.stderr}"
    return result


def build_dist(outdir: Path) -> Path:
    """sdist + wheel of the checkout in `outdir` (the wheel is built from the sdist); the wheel."""
    run([sys.executable, "-m", "build", "--outdir", outdir, ROOT], cwd=outdir.parent)
    [wheel] = outdir.glob("sglang_tuner-*.whl")
    return wheel


def fresh_venv(where: Path, wheel: Path) -> Path:
    """A new venv holding only `wheel` and its dependencies; its bin/ directory."""
    run([sys.executable, "-m", "venv", where])
    run([where / "bin" / "python", "-m", "pip", "install", "--quiet", wheel], cwd=where)
    return where / "bin"


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outdir = tmp_path_factory.mktemp("dist") / "dist"
    build_dist(outdir)
    return outdir


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    return next(dist.glob("*.whl"))


@pytest.fixture(scope="session")
def venv_bin(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("fresh") / "venv", wheel)


def test_sdist_and_wheel_pass_twine_check(dist: Path):
    files = sorted(dist.iterdir())
    assert sorted(f.suffix for f in files) == [".gz", ".whl"]
    result = run([sys.executable, "-m", "twine", "check", "--strict", *files])
    assert result.stdout.count("PASSED") == 2


def test_wheel_carries_every_asset_the_license_and_its_metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        metadata = whl.read(f"sglang_tuner-{__version__}.dist-info/METADATA").decode()
    assets = collect(ROOT)
    assert len(assets) >= 10
    assert {f"sglang_tuner/assets/{rel}" for rel in assets} <= names
    assert f"sglang_tuner-{__version__}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in metadata
    assert "sglang_sim/__init__.py" in names  # the simulator ships too (`sglang-tuner sim`)


def test_license_file_is_the_apache_2_license_pyproject_names():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def test_dockerfile_build_stage_copies_everything_the_sdist_has(dist: Path):
    # the image's wheel is built from what the build stage copies: it must be the sdist's files
    [sdist] = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        files = [m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()]
    generated = ("PKG-INFO", "setup.cfg")
    files = [f for f in files if f not in generated and ".egg-info/" not in f]
    files = [f for f in files if not f.startswith("tests/")]  # setuptools' default; not built
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    copied = set()  # COPY keeps each source's repository path: `COPY daemon/ daemon/`
    for line in re.findall(r"^COPY (.+)$", dockerfile, re.M):
        copied |= {source.rstrip("/") for source in line.split()[:-1]}
    missing = [f for f in files if not any(f == c or f.startswith(c + "/") for c in copied)]
    assert not missing, "deploy/Dockerfile's build stage does not copy these sdist files"


def test_fresh_venv_answers_help_and_version(venv_bin: Path, tmp_path: Path):
    tuner = venv_bin / "sglang-tuner"
    assert "assets export DIR" in run([tuner, "--help"], cwd=tmp_path).stdout
    assert run([tuner, "--version"], cwd=tmp_path).stdout.strip() == f"sglang-tuner {__version__}"
    where = run([venv_bin / "python", "-c", "import sglang_tuner; print(sglang_tuner.__file__)"],
                cwd=tmp_path).stdout  # fmt: skip
    assert where.startswith(str(venv_bin.parent)), where


def test_fresh_venv_exports_assets_that_check_config_and_promtool_accept(
    venv_bin: Path, tmp_path: Path
):
    tuner = venv_bin / "sglang-tuner"
    out = tmp_path / "assets"
    run([tuner, "assets", "export", out], cwd=tmp_path)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == collect(
        ROOT
    )
    for rel in collect(ROOT):
        assert (out / rel).read_bytes() == (ROOT / rel).read_bytes(), rel
    assert "OK" in run([tuner, "check-config", out / "deploy" / "config.example.yaml"]).stdout
    if PROMTOOL is None:
        pytest.skip("promtool not installed (Debian package prometheus): rules not checked")
    rules = sorted(str(p) for p in (out / "alerts").glob("*.rules.yml"))
    assert "SUCCESS" in run([PROMTOOL, "check", "rules", *rules]).stdout
    tests = sorted(p.name for p in (out / "alerts").glob("*.rules.test.yml"))
    run([PROMTOOL, "test", "rules", *tests], cwd=out / "alerts")


@pytest.fixture
def sim_port(venv_bin: Path, tmp_path: Path) -> Iterator[int]:
    port = free_port()
    cmd = [venv_bin / "sglang-tuner", "sim", "--scenario", "healthy", "--port", str(port),
           "--warmup", "60"]  # fmt: skip
    with _process(cmd, tmp_path / "sim.log", tmp_path):
        _wait_for(f"http://127.0.0.1:{port}/health")
        yield port


def test_fresh_venv_runs_the_daemon_with_offline_docs(
    venv_bin: Path, sim_port: int, tmp_path: Path
):
    port = free_port()
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({
        "targets": [{"url": f"http://127.0.0.1:{sim_port}", "name": "sim-healthy"}],
        "listen_host": "127.0.0.1", "listen_port": port, "database": str(tmp_path / "t.db"),
        "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
        "evaluation_interval_seconds": 0.5, "min_samples": 2,
    }))  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    with _process(
        [venv_bin / "sglang-tuner", "run", "--config", config], tmp_path / "d.log", tmp_path
    ):
        _wait_for(f"{base}/readyz")
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        metrics = httpx.get(f"{base}/metrics").text
        assert 'sglang_tuner_target_up{target="sim-healthy"} 1.0' in metrics
        advice = httpx.get(f"{base}/advice").json()
        assert advice["count"] == 0 and isinstance(advice["data"], list)
        docs = httpx.get(f"{base}/docs").text
        assert "cdn." not in docs
        for src in re.findall(r'(?:src|href)="(/docs/static/[^"]+)"', docs):
            asset = httpx.get(f"{base}{src}")
            assert asset.status_code == 200 and len(asset.content) > 1000, src


class _process:
    """A background process, stopped (and its log shown on failure) on exit."""

    def __init__(self, cmd: list[str | Path], log: Path, cwd: Path) -> None:
        self.cmd, self.log, self.cwd = [str(c) for c in cmd], log, cwd

    def __enter__(self) -> subprocess.Popen[bytes]:
        self.out = self.log.open("wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     cwd=self.cwd, env=CLEAN_ENV)  # fmt: skip
        return self.proc

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.out.close()
        if exc[0] is not None:
            sys.stderr.write(f"--- {self.cmd[:3]} log:\n{self.log.read_text()[-3000:]}\n")


def _wait_for(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer 200 within {timeout}s"
        time.sleep(0.2)
