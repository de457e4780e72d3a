"""The container image, built and run here: deploy/Dockerfile's runtime stage, on Debian's own
packages instead of a registry's base image, with the wheel this checkout builds.

No registry is reachable from the test machines, so the base image is a minimal Debian bookworm
root made by debootstrap (python3, venv, pip: what python:3.11-slim offers), imported with podman.
The build stage (`pip wheel .`) is replaced by a wheelhouse built on the host by pip (this
checkout's wheel + its dependencies from PyPI); the runtime stage is taken from the shipped
Dockerfile verbatim and built by buildah. The image then runs as the user the Dockerfile names,
with a read-only root file system, against a simulated SGLang server on the host.

Run with `make container-test` (root, Debian: it installs debootstrap, podman, buildah, runc).
The debootstrapped root is cached in $SGLANG_TUNER_TEST_CACHE (/var/cache/sglang-tuner-tests).
"""

import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sglang_tuner.assets import collect

from tests.conftest import free_port
from tests.test_packaging import ROOT, _process, _wait_for, build_dist, run

pytestmark = pytest.mark.container
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3")
TOOLS = ("debootstrap", "podman", "buildah", "runc")
CACHE = Path(os.environ.get("SGLANG_TUNER_TEST_CACHE", "/var/cache/sglang-tuner-tests"))
# slirp4netns's address for the host's loopback (allow_host_loopback): the simulator on the host.
HOST_LOOPBACK = "10.0.2.2"
# runc, not crun: crun 1.8 refuses a host whose cgroup v1 and v2 hierarchies are both mounted
# ("cgroups in hybrid mode not supported"). Limits no higher than this process's own: podman's
# defaults (nofile 1048576) need CAP_SYS_RESOURCE, which a sandboxed root may lack.
_NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)
LIMITS = ["--ulimit", f"nofile={_NOFILE[0]}:{_NOFILE[1]}", "--ulimit", "nproc=4096:4096"]
PODMAN = ["podman", "--runtime", "runc"]


def _missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "needs root (debootstrap, rootful podman): run `make container-test` as root"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install {' '.join(TOOLS)})"
    return None


def debian_mirror() -> str:
    """The Debian archive this machine's apt already uses (no host is named in the tests)."""
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    text = "\n".join(p.read_text() for p in sources if p.is_file())
    for uri in re.findall(r"(?:^deb\s+(?:\[[^]]*\]\s+)?|^URIs:\s*)(\S+)", text, re.M):
        if re.search(r"/debian/?$", uri):
            return uri
    pytest.skip("no Debian archive in /etc/apt/sources.list*: cannot debootstrap")


def base_image() -> str:
    """A podman image of a minimal Debian root with Python: debootstrapped once, then cached."""
    key = hashlib.sha256(f"{SUITE} minbase {' '.join(PACKAGES)}".encode()).hexdigest()[:12]
    name = f"localhost/sglang-tuner-test-base:{SUITE}-{key}"
    if subprocess.run(["podman", "image", "exists", name]).returncode == 0:
        return name
    tarball = CACHE / f"{SUITE}-{key}.tar"
    if not tarball.exists():
        _debootstrap(tarball)
    run(["podman", "import", "--quiet", tarball, name], timeout=300)
    return name


def _debootstrap(tarball: Path) -> None:
    root = tarball.with_suffix(".root")
    shutil.rmtree(root, ignore_errors=True)
    include = ",".join(PACKAGES)
    run(["debootstrap", "--variant=minbase", f"--include={include}", SUITE, root, debian_mirror()],
        timeout=900)  # fmt: skip
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (root / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
    with tarfile.open(tarball.with_suffix(".part"), "w") as tar:
        tar.add(root, arcname=".")
    tarball.with_suffix(".part").rename(tarball)
    shutil.rmtree(root)


def containerfile(dockerfile: str) -> str:
    """The shipped Dockerfile's runtime stage, verbatim, after a build stage holding /wheels."""
    lines = dockerfile.splitlines()
    arg = next(ln for ln in lines if ln.startswith("ARG PYTHON_IMAGE="))
    runtime = max(i for i, ln in enumerate(lines) if ln.startswith("FROM "))
    build = ["FROM scratch AS build", "COPY wheels/ /wheels/"]
    return "\n".join([arg, *build, *lines[runtime:]]) + "\n"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = _missing_prerequisite()
    if reason:
        pytest.skip(reason)
    CACHE.mkdir(parents=True, exist_ok=True)
    base = base_image()
    work = tmp_path_factory.mktemp("image")
    wheel = build_dist(work / "dist")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet"]
    run([*pip_wheel, "--wheel-dir", work / "context" / "wheels", wheel], cwd=work)
    (work / "context" / "Containerfile").write_text(containerfile(DOCKERFILE.read_text()))
    tag = f"localhost/sglang-tuner:test-{os.getpid()}"
    bud = ["buildah", "bud", "--quiet", "--format", "docker", "--runtime", "runc", *LIMITS]
    run([*bud, "--build-arg", f"PYTHON_IMAGE={base}", "-t", tag, work / "context"], timeout=600)
    yield tag
    subprocess.run(["podman", "rmi", "--force", tag], capture_output=True)


def _dockerfile_says(instruction: str) -> str:
    """The runtime stage's (the last) value of an instruction."""
    values = re.findall(rf"^{instruction} (.+)$", DOCKERFILE.read_text(), re.M)
    assert values, instruction
    return str(values[-1])


def _inspect(image: str) -> dict[str, Any]:
    return dict(json.loads(run(["podman", "image", "inspect", image]).stdout)[0])


def test_image_has_the_dockerfiles_user_ports_entrypoint_and_command(image: str):
    inspected = _inspect(image)
    config = inspected["Config"]
    assert config["User"] == _dockerfile_says("USER") and not config["User"].startswith("0")
    assert set(config["ExposedPorts"]) == {f"{_dockerfile_says('EXPOSE')}/tcp"}
    assert config["Entrypoint"] == json.loads(_dockerfile_says("ENTRYPOINT"))
    assert config["Cmd"] == json.loads(_dockerfile_says("CMD"))
    assert config["WorkingDir"] == _dockerfile_says("WORKDIR")
    health = re.findall(r"^\s+CMD (\[.+\])$", DOCKERFILE.read_text(), re.M)
    assert inspected["Healthcheck"]["Test"] == ["CMD", *json.loads(health[0])]


def test_image_carries_the_wheels_assets(image: str):
    listed = run(
        [*PODMAN, "run", "--rm", *LIMITS, "--network", "none", image, "assets", "list"]
    ).stdout
    assert listed.split() == collect(ROOT)


@pytest.fixture
def sim_port(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    cmd = [Path(sys.executable).parent / "sglang-tuner", "sim", "--scenario", "healthy",
           "--port", str(port), "--warmup", "60"]  # fmt: skip
    with _process(cmd, tmp_path / "sim.log", tmp_path):
        _wait_for(f"http://127.0.0.1:{port}/health")
        yield port


@pytest.fixture
def container(image: str, sim_port: int) -> Iterator[tuple[str, str]]:
    """The image run as it ships (its entrypoint, command and user), read-only, port published,
    configured by environment variables alone."""
    target = {"url": f"http://{HOST_LOOPBACK}:{sim_port}", "name": "sim-healthy"}
    env = {
        "SGLANG_TUNER_TARGETS": json.dumps([target]),
        "SGLANG_TUNER_SCRAPE_INTERVAL_SECONDS": "500ms",
        "SGLANG_TUNER_SCRAPE_TIMEOUT_SECONDS": "400ms",
        "SGLANG_TUNER_EVALUATION_INTERVAL_SECONDS": "500ms",
        "SGLANG_TUNER_MIN_SAMPLES": "2",
    }
    port, volume = free_port(), f"sglang-tuner-test-state-{os.getpid()}"
    network = ["--network", "slirp4netns:allow_host_loopback=true"]
    cid = run([*PODMAN, "run", "--detach", *LIMITS, "--read-only", "--read-only-tmpfs=false",
               "--health-interval", "disable",  # no systemd timers here: checked by hand below
               *network, "--publish", f"127.0.0.1:{port}:9877",
               *(f"--env={k}={v}" for k, v in env.items()),
               "--volume", f"{volume}:/var/lib/sglang-tuner", image]).stdout.strip()  # fmt: skip
    try:
        yield cid, f"http://127.0.0.1:{port}"
    finally:
        logs = subprocess.run(["podman", "logs", cid], capture_output=True, text=True).stderr
        subprocess.run(["podman", "rm", "--force", "--time", "2", cid], capture_output=True)
        subprocess.run(["podman", "volume", "rm", "--force", volume], capture_output=True)
        print(logs[-3000:])  # noqa: T201  (shown with a failure)


def test_container_serves_health_metrics_and_advice_from_outside(container: tuple[str, str]):
    cid, base = container
    _wait_for(f"{base}/readyz", timeout=60)
    assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
    assert 'sglang_tuner_target_up{target="sim-healthy"} 1.0' in httpx.get(f"{base}/metrics").text
    advice = httpx.get(f"{base}/advice").json()
    assert advice["count"] == 0 and isinstance(advice["no_data"], list)
    assert "swagger-ui-bundle.js" in httpx.get(f"{base}/docs").text
    run(["podman", "healthcheck", "run", cid])  # the Dockerfile's HEALTHCHECK, inside


def test_container_runs_as_the_image_user_on_a_read_only_root(container: tuple[str, str]):
    cid, base = container
    _wait_for(f"{base}/healthz", timeout=60)
    pid = run(["podman", "inspect", "--format", "{{.State.Pid}}", cid]).stdout.strip()
    status = Path(f"/proc/{pid}/status").read_text()
    uid, gid = _dockerfile_says("USER").split(":")
    assert re.search(rf"^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", status, re.M)
    assert re.search(rf"^Gid:\s+{gid}\s+{gid}\s+{gid}\s+{gid}$", status, re.M)
    denied = subprocess.run(
        ["podman", "exec", cid, "touch", "/opt/sglang-tuner/x"], capture_output=True, text=True
    )
    assert denied.returncode != 0 and "Read-only file system" in denied.stderr
    run(["podman", "exec", cid, "touch", "/var/lib/sglang-tuner/writable"])  # the state volume
    stop = run(["podman", "stop", "--time", "15", cid])
    assert stop.stdout.strip() == cid
    exit_code = run(["podman", "inspect", "--format", "{{.State.ExitCode}}", cid]).stdout.strip()
    assert exit_code == "0"  # SIGTERM as PID 1: a clean shutdown
