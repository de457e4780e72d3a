"""deploy/kubernetes/: every overlay renders with kustomize, passes the Kubernetes API schemas and
prometheus-operator's CRD models, and says what the daemon, the image and the shipped files say."""

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.prometheus_operator import v1 as monitoring
from pydantic import BaseModel
from sglang_tuner import __version__
from sglang_tuner.config.discovery import parse_file_sd
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.settings import Settings
from sglang_tuner.config.target_settings import FileSDSettings, TargetSettings

ROOT = Path(__file__).resolve().parent.parent
KUBE = ROOT / "deploy" / "kubernetes"
COMPONENT = KUBE / "components" / "prometheus-operator"
OVERLAYS = ("sidecar", "standalone")
KUBERNETES_VERSION = "1.32"  # the API the manifests target (pod-index label GA, 1.28 beta)
CRD_MODELS: dict[str, type[BaseModel]] = {
    "ServiceMonitor": monitoring.ServiceMonitor,
    "PrometheusRule": monitoring.PrometheusRule,
}
KUSTOMIZE = shutil.which("kustomize")
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUSTOMIZE is None and KUBECTL is None, reason="neither kustomize nor kubectl is installed"
)

Objects = dict[tuple[str, str], dict[str, Any]]


@functools.cache
def render(overlay: str, with_component: bool = False) -> Objects:
    """`kustomize build` of an overlay (plus the component, as a user's kustomization adds it)."""
    with tempfile.TemporaryDirectory() as tmp:
        kustomization = {"resources": [os.path.relpath(KUBE / "overlays" / overlay, tmp)]}
        if with_component:
            kustomization["components"] = [os.path.relpath(COMPONENT, tmp)]
        Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        cmd = [KUSTOMIZE, "build", tmp] if KUSTOMIZE else [KUBECTL or "", "kustomize", tmp]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _one(objects: Objects, kind: str) -> dict[str, Any]:
    [obj] = [o for (k, _), o in objects.items() if k == kind]
    return obj


def _pod(objects: Objects) -> dict[str, Any]:
    workloads = [o for (k, _), o in objects.items() if k in {"Deployment", "StatefulSet"}]
    [workload] = workloads
    return dict(workload["spec"]["template"])


def _container(objects: Objects, name: str) -> dict[str, Any]:
    return next(c for c in _pod(objects)["spec"]["containers"] if c["name"] == name)


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _unknown_fields(given: Any, kept: Any, path: str = "") -> list[str]:
    """Keys of `given` that a model's dump dropped: fields its schema does not have."""
    if isinstance(given, dict) and isinstance(kept, dict):
        out = [f"{path}.{k}" for k in given if k not in kept]
        return out + [
            p for k in given if k in kept for p in _unknown_fields(given[k], kept[k], f"{path}.{k}")
        ]
    if isinstance(given, list) and isinstance(kept, list):
        return [
            p
            for i, (g, k) in enumerate(zip(given, kept, strict=True))
            for p in _unknown_fields(g, k, f"{path}[{i}]")
        ]
    return []


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("with_component", [False, True], ids=["plain", "prometheus-operator"])
def test_overlay_renders_and_passes_the_schemas(overlay: str, with_component: bool):
    objects = render(overlay, with_component)
    assert ("Service", "sglang-tuner") in objects
    assert (("ServiceMonitor", "sglang-tuner") in objects) is with_component
    for (kind, name), obj in objects.items():
        model = CRD_MODELS.get(kind)
        if model is None:  # the Kubernetes API's own kinds, unknown fields rejected
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            continue
        dumped = model.model_validate(obj).model_dump(
            by_alias=True, exclude_unset=True, mode="json"
        )
        assert not _unknown_fields(obj, dumped), f"{kind}/{name}: fields its CRD does not have"


def test_schema_checks_catch_a_typo():
    deployment = json.loads(json.dumps(_one(render("sidecar"), "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][1]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    monitor = json.loads(json.dumps(_one(render("sidecar", True), "ServiceMonitor")))
    monitor["spec"]["endpoints"][0]["intervall"] = "15s"
    dumped = monitoring.ServiceMonitor.model_validate(monitor).model_dump(
        by_alias=True, exclude_unset=True
    )
    assert _unknown_fields(monitor, dumped) == [".spec.endpoints[0].intervall"]


def test_prometheus_rules_equal_the_shipped_rule_files():
    objects = render("standalone", True)
    files = sorted((ROOT / "alerts").glob("*.rules.yml"))
    assert len(files) == 2
    for path in files:
        rule = objects[("PrometheusRule", path.name.removesuffix(".rules.yml"))]
        assert rule["spec"]["groups"] == yaml.safe_load(path.read_text())["groups"], path.name


def test_dashboard_configmaps_equal_the_shipped_dashboards():
    objects = render("sidecar", True)
    files = sorted((ROOT / "dashboards").glob("*.json"))
    assert len(files) == 2
    for path in files:
        configmap = objects[("ConfigMap", f"{path.stem}-dashboard")]
        assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert configmap["data"] == {path.name: path.read_text()}


def test_generated_component_files_are_current():
    spec = importlib.util.spec_from_file_location("kube_generate", KUBE / "generate.py")
    assert spec and spec.loader
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    for path, text in generate.render().items():
        assert path.read_text() == text, (
            f"{path.name} is stale: run python deploy/kubernetes/generate.py"
        )


def _settings(objects: Objects, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The daemon's settings in the pod: the mounted config plus the container's environment."""
    config = next(
        o
        for (k, n), o in objects.items()
        if k == "ConfigMap" and n.startswith("sglang-tuner-config")
    )
    path = Path(tempfile.mkdtemp()) / "config.yml"
    path.write_text(config["data"]["config.yml"])
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings(path)


def test_sidecar_names_its_target_after_the_pod(monkeypatch: pytest.MonkeyPatch):
    objects = render("sidecar")
    env = _env(_container(objects, "sglang-tuner"))
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    # Kubernetes expands $(VAR) from variables defined earlier in the list
    names = list(env)
    assert names.index("POD_NAME") < names.index("SGLANG_TUNER_TARGETS")
    pod_values = {"POD_NAME": "sglang-7d9f-abcde", "POD_NAMESPACE": "inference"}
    targets = re.sub(
        r"\$\((\w+)\)", lambda m: pod_values[m.group(1)], env["SGLANG_TUNER_TARGETS"]["value"]
    )
    settings = _settings(objects, {"SGLANG_TUNER_TARGETS": targets}, monkeypatch)
    [target] = settings.targets
    assert target.target_name == "sglang-7d9f-abcde" and target.labels == {"namespace": "inference"}
    sglang_port = _container(objects, "sglang")["ports"][0]["containerPort"]
    assert target.url == f"http://127.0.0.1:{sglang_port}"


def test_sidecar_sglang_pod_is_runnable_as_written():
    objects = render("sidecar")
    pod = _pod(objects)["spec"]
    sglang = _container(objects, "sglang")
    assert "--enable-metrics" in sglang["args"]
    port = sglang["args"][sglang["args"].index("--port") + 1]
    assert sglang["ports"] == [{"name": "http", "containerPort": int(port)}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert sglang[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    token = _env(sglang)["HF_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert token == {"name": "hf-token", "key": "token", "optional": True}
    assert sglang["resources"]["limits"]["nvidia.com/gpu"] == 1
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in sglang["volumeMounts"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    claim = volumes[mounts["/root/.cache/huggingface"]]["persistentVolumeClaim"]["claimName"]
    assert ("PersistentVolumeClaim", claim) in objects
    service = objects[("Service", "sglang")]
    assert service["spec"]["selector"].items() <= _pod(objects)["metadata"]["labels"].items()


def test_standalone_shards_by_pod_ordinal_and_replicas(monkeypatch: pytest.MonkeyPatch):
    objects = render("standalone")
    statefulset = _one(objects, "StatefulSet")
    env = _env(_container(objects, "sglang-tuner"))
    index = env["SGLANG_TUNER_SHARD__INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert index == "metadata.labels['apps.kubernetes.io/pod-index']"
    assert env["SGLANG_TUNER_SHARD__COUNT"]["value"] == str(statefulset["spec"]["replicas"]) == "2"
    assert statefulset["spec"]["serviceName"] == "sglang-tuner"
    settings = _settings(
        objects, {"SGLANG_TUNER_FILE_SD": env["SGLANG_TUNER_FILE_SD"]["value"]}, monkeypatch
    )
    [file_sd] = settings.file_sd
    mounts = {
        m["name"]: m["mountPath"] for m in _container(objects, "sglang-tuner")["volumeMounts"]
    }
    assert file_sd.files == [f"{mounts['targets']}/*.yml"]
    targets = objects[("ConfigMap", "sglang-tuner-targets")]["data"]["targets.yml"]
    parsed = parse_file_sd(targets, FileSDSettings(files=["x"]))
    assert len(parsed) == 2 and all(t.url.startswith("http://") for t in parsed)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_tuner_container_matches_the_image_and_the_config(
    overlay: str, monkeypatch: pytest.MonkeyPatch
):
    objects = render(overlay)
    tuner = _container(objects, "sglang-tuner")
    assert tuner["image"] == f"sglang-tuner:{__version__}"
    assert tuner["args"] == ["run", "--config", "/etc/sglang-tuner/config.yml"]
    user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "deploy" / "Dockerfile").read_text(), re.M)
    assert user
    security = tuner["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"]) == (
        int(user.group(1)),
        int(user.group(2)),
    )
    assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
    assert not security["allowPrivilegeEscalation"] and security["capabilities"] == {
        "drop": ["ALL"]
    }
    assert tuner["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "tuner-http"}
    assert tuner["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "tuner-http"}
    settings = _settings(objects, {}, monkeypatch)
    assert tuner["ports"] == [{"name": "tuner-http", "containerPort": settings.listen_port}]
    mounts = {m["name"]: m["mountPath"] for m in tuner["volumeMounts"]}
    assert mounts["tuner-config"] == "/etc/sglang-tuner"
    assert settings.database.parent == Path(mounts.get("tuner-state") or mounts["state"])
    assert "sglang-tuner/tuner" in _pod(objects)["metadata"]["labels"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_and_servicemonitor_reach_every_tuner_pod(overlay: str):
    objects = render(overlay, True)
    service = objects[("Service", "sglang-tuner")]
    assert service["spec"]["selector"].items() <= _pod(objects)["metadata"]["labels"].items()
    monitor = _one(objects, "ServiceMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    # the shipped alert rules find the daemon by job="sglang-tuner"
    assert {"targetLabel": "job", "replacement": "sglang-tuner", "action": "replace"} in endpoint[
        "relabelings"
    ]
    assert 'job="sglang-tuner"' in (ROOT / "alerts" / "sglang-tuner.rules.yml").read_text()


# -- SGLang's Kubernetes forms: LeaderWorkerSet, prefill/decode, OME, the release label ----------

GATEWAY_OVERLAYS = ("pd-disaggregation", "ome")
RELEASE_OVERRIDE = """\
apiVersion: builtin
kind: LabelTransformer
metadata: {name: prometheus-release}
labels: {release: my-monitoring}
fieldSpecs:
  - {kind: ServiceMonitor, path: metadata/labels, create: true}
  - {kind: PrometheusRule, path: metadata/labels, create: true}
"""


def _build(kustomization: dict[str, Any]) -> Objects:
    """`kustomize build` of a user's kustomization; paths in it are relative to KUBE."""
    with tempfile.TemporaryDirectory() as tmp:
        for key in ("resources", "components"):
            if key in kustomization:
                kustomization[key] = [os.path.relpath(KUBE / p, tmp) for p in kustomization[key]]
        Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        cmd = [KUSTOMIZE, "build", tmp] if KUSTOMIZE else [KUBECTL or "", "kustomize", tmp]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _validate(objects: Objects) -> None:
    """Kubernetes kinds strictly; a LeaderWorkerSet's pod templates as PodTemplates; the
    Prometheus Operator's kinds through their CRD models."""
    for (kind, name), obj in objects.items():
        if kind == "LeaderWorkerSet":
            for role in ("leaderTemplate", "workerTemplate"):
                template = obj["spec"]["leaderWorkerTemplate"][role]
                meta = {"name": f"{name}-{role}"}
                wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta}
                wrapped["template"] = template
                kubernetes_validate.validate(wrapped, KUBERNETES_VERSION, strict=True)
        elif kind in CRD_MODELS:
            dumped = (
                CRD_MODELS[kind]
                .model_validate(obj)
                .model_dump(by_alias=True, exclude_unset=True, mode="json")
            )
            assert not _unknown_fields(obj, dumped), f"{kind}/{name}"
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def _pod_spec_is_consistent(objects: Objects, pod: dict[str, Any]) -> None:
    """Every mount names a volume of the pod, every ConfigMap volume a rendered ConfigMap, every
    named probe port a port of its container."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for container in pod["containers"]:
        for mount in container.get("volumeMounts", []):
            assert mount["name"] in volumes, (container["name"], mount["name"])
        ports = {p["name"] for p in container.get("ports", [])}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            port = container.get(probe, {}).get("httpGet", {}).get("port")
            assert port is None or port in ports, (container["name"], probe)
    for volume in volumes.values():
        if "configMap" in volume:
            assert ("ConfigMap", volume["configMap"]["name"]) in objects, volume


def _expanded(value: str, **values: str) -> str:
    """`$(VAR)` replaced as the kubelet does."""
    return re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], value)


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("overlay", ["leaderworkerset", *GATEWAY_OVERLAYS])
@pytest.mark.parametrize("with_component", [False, True], ids=["plain", "prometheus-operator"])
def test_sglang_form_overlay_renders_and_passes_the_schemas(overlay: str, with_component: bool):
    objects = render(overlay, with_component)
    assert ("Service", "sglang-tuner") in objects
    assert (("ServiceMonitor", "sglang-tuner") in objects) is with_component
    _validate(objects)


def test_leaderworkerset_sidecar_in_leader_template_only(monkeypatch: pytest.MonkeyPatch):
    objects = render("leaderworkerset")
    lws = _one(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    leader, worker = lws["leaderTemplate"], lws["workerTemplate"]
    assert [c["name"] for c in leader["spec"]["containers"]] == ["sglang", "sglang-tuner"]
    assert [c["name"] for c in worker["spec"]["containers"]] == ["sglang"]
    # the tuner's Service selects leaders only: the worker serves no HTTP
    tuner_service = objects[("Service", "sglang-tuner")]["spec"]["selector"]
    assert tuner_service.items() <= leader["metadata"]["labels"].items()
    assert not tuner_service.items() <= worker["metadata"]["labels"].items()
    api = objects[("Service", "sglang-leader")]["spec"]
    assert api["selector"]["role"] == leader["metadata"]["labels"]["role"] == "leader"
    for template in (leader, worker):
        _pod_spec_is_consistent(objects, template["spec"])
    # one server over the group: rank 0 on the leader, the worker's own index on the worker
    leader_args, worker_args = (t["spec"]["containers"][0]["args"] for t in (leader, worker))
    assert _arg(leader_args, "--node-rank") == "0"
    assert _arg(worker_args, "--node-rank") == "$(LWS_WORKER_INDEX)"
    for args in (leader_args, worker_args):
        assert _arg(args, "--nnodes") == "$(LWS_GROUP_SIZE)"
        assert _arg(args, "--dist-init-addr") == "$(LWS_LEADER_ADDRESS):20000"
    assert "--enable-metrics" in leader_args
    # the sidecar scrapes the leader's HTTP port, named after the leader pod
    tuner = leader["spec"]["containers"][1]
    env = _env(tuner)
    assert list(env).index("POD_NAME") < list(env).index("SGLANG_TUNER_TARGETS")
    targets = _expanded(
        env["SGLANG_TUNER_TARGETS"]["value"], POD_NAME="sglang-0", POD_NAMESPACE="llm"
    )
    settings = _settings(objects, {"SGLANG_TUNER_TARGETS": targets}, monkeypatch)
    [target] = settings.targets
    assert target.url == f"http://127.0.0.1:{_arg(leader_args, '--port')}"
    assert target.target_name == "sglang-0"
    assert tuner["image"] == f"sglang-tuner:{__version__}"
    assert tuner["ports"] == [{"name": "tuner-http", "containerPort": settings.listen_port}]


def _deployment(objects: Objects, name: str) -> dict[str, Any]:
    return dict(objects[("Deployment", name)]["spec"]["template"]["spec"])


def _gateway_target(objects: Objects, monkeypatch: pytest.MonkeyPatch) -> TargetSettings:
    tuner = _deployment(objects, "sglang-tuner")
    [container] = tuner["containers"]
    env = _env(container)
    assert list(env).index("POD_NAMESPACE") < list(env).index("SGLANG_TUNER_TARGETS")
    targets = _expanded(env["SGLANG_TUNER_TARGETS"]["value"], POD_NAMESPACE="llm")
    [target] = _settings(objects, {"SGLANG_TUNER_TARGETS": targets}, monkeypatch).targets
    assert target.source == "gateway" and target.labels["namespace"] == "llm"
    return target


def test_pd_disaggregation_tuner_watches_both_roles_through_the_gateway(
    monkeypatch: pytest.MonkeyPatch,
):
    objects = render("pd-disaggregation")
    target = _gateway_target(objects, monkeypatch)
    router = _deployment(objects, "sglang-router")["containers"][0]
    # the tuner's gateway is the router's Service, at the port the router listens on
    gateway = urlsplit(target.url)
    router_service = objects[("Service", gateway.hostname)]["spec"]
    assert [p["port"] for p in router_service["ports"]] == [gateway.port]
    assert gateway.port == int(_arg(router["args"], "--port"))
    assert "--pd-disaggregation" in router["args"]
    for role in ("prefill", "decode"):
        pod = _deployment(objects, f"sglang-{role}")
        _pod_spec_is_consistent(objects, pod)
        [sglang] = pod["containers"]  # no sidecar: the tuner reads them through the gateway
        assert _arg(sglang["args"], "--disaggregation-mode") == role
        assert "--enable-metrics" in sglang["args"]  # /engine_metrics is their /metrics
        # the router sends this role to its Service, at the server's port
        url = urlsplit(_arg(router["args"], f"--{role}"))
        service = objects[("Service", url.hostname)]["spec"]
        assert (
            service["selector"].items()
            <= objects[("Deployment", f"sglang-{role}")]["spec"]["template"]["metadata"][
                "labels"
            ].items()
        )
        http = next(p for p in service["ports"] if p["name"] == "http")
        assert http["port"] == url.port == int(_arg(sglang["args"], "--port"))
    # the prefill server's bootstrap port is the one the router names
    bootstrap = _arg(router["args"], "http://sglang-prefill:30000")
    prefill_ports = {
        p["name"]: p["port"] for p in objects[("Service", "sglang-prefill")]["spec"]["ports"]
    }
    assert prefill_ports["bootstrap"] == int(bootstrap)
    tuner_pods = [
        name for (kind, name), o in objects.items() if kind == "Deployment"
        and any(c["name"] == "sglang-tuner" for c in o["spec"]["template"]["spec"]["containers"])
    ]  # fmt: skip
    assert tuner_pods == ["sglang-tuner"]
    _pod_spec_is_consistent(objects, _deployment(objects, "sglang-tuner"))


def test_ome_overlay_is_a_tuner_beside_the_inference_service(monkeypatch: pytest.MonkeyPatch):
    objects = render("ome")
    assert {k for k, _ in objects} == {"ConfigMap", "Service", "Deployment"}  # no CRD needed
    target = _gateway_target(objects, monkeypatch)
    assert urlsplit(target.url).hostname == "llama-pd-router"  # OME's <isvc>-router Service
    assert target.target_name == "llama-pd"
    _pod_spec_is_consistent(objects, _deployment(objects, "sglang-tuner"))


def test_prometheus_operator_kinds_carry_kube_prometheus_stack_release_label():
    objects = render("sidecar", True)
    selected = {k: o for k, o in objects.items() if k[0] in {"ServiceMonitor", "PrometheusRule"}}
    assert len(selected) == 3
    for obj in selected.values():
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    others = [o for k, o in objects.items() if k not in selected]
    assert not any("release" in o["metadata"].get("labels", {}) for o in others)
    text = (COMPONENT / "kustomization.yaml").read_text()
    assert (
        "serviceMonitorSelectorNilUsesHelmValues" in text
        and "ruleSelectorNilUsesHelmValues" in text
    )
    assert RELEASE_OVERRIDE.splitlines()[-1].strip() in text  # the override shown there


def test_prometheus_operator_release_label_is_a_parameter():
    objects = _build({
        "resources": ["overlays/standalone"],
        "components": ["components/prometheus-operator"],
        "transformers": [RELEASE_OVERRIDE],
    })  # fmt: skip
    releases = {
        k: o["metadata"]["labels"].get("release")
        for k, o in objects.items()
        if k[0] in {"ServiceMonitor", "PrometheusRule"}
    }
    assert releases and set(releases.values()) == {"my-monitoring"}
    assert "release" not in objects[("StatefulSet", "sglang-tuner")]["metadata"]["labels"]
