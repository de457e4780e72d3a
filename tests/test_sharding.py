"""Sharding: a replica keeps the targets whose name hashes to its index, as Prometheus's hashmod
does; shards split a fleet with no target in two and none in none."""

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sglang_tuner.config.discovery import in_shard, shard_of, shard_targets
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.config.settings import ShardSettings
from sglang_tuner.model.target_spec import TargetSpec

from tests.prometheus_process import PrometheusProcess, needs_prometheus

FLEET = [f"10.{i // 250}.{i % 250}.7:30000" for i in range(10_000)]


def test_two_shards_split_the_fleet_with_none_in_both_and_none_in_neither():
    shards = [{n for n in FLEET if in_shard(n, ShardSettings(index=i, count=2))} for i in (0, 1)]
    assert not shards[0] & shards[1]
    assert shards[0] | shards[1] == set(FLEET)
    assert abs(len(shards[0]) - len(shards[1])) < 300  # MD5 spreads names evenly


@pytest.mark.parametrize("count", [1, 3, 7])
def test_every_target_is_in_exactly_one_of_count_shards(count: int):
    owners = [
        [i for i in range(count) if in_shard(n, ShardSettings(index=i, count=count))]
        for n in FLEET[:2000]
    ]
    assert all(len(o) == 1 for o in owners)


def test_shard_targets_keeps_this_replicas_share():
    specs = [TargetSpec(n, f"http://{n}") for n in FLEET[:100]]
    kept = shard_targets(specs, ShardSettings(index=1, count=4))
    assert kept and all(shard_of(t.name, 4) == 1 for t in kept)
    assert shard_targets(specs, ShardSettings()) == specs


@needs_prometheus
def test_shard_of_is_prometheus_hashmod(tmp_path: Path):
    addresses = FLEET[:40]
    relabel = [
        {
            "source_labels": ["__address__"],
            "modulus": 5,
            "target_label": "__tmp_hash",
            "action": "hashmod",
        },
        {"source_labels": ["__tmp_hash"], "target_label": "shard"},
    ]
    job = {
        "job_name": "fleet",
        "static_configs": [{"targets": addresses}],
        "relabel_configs": relabel,
    }
    prometheus = PrometheusProcess(tmp_path, [job], interval="1h")
    try:
        deadline, active = time.monotonic() + 30, []
        while time.monotonic() < deadline and len(active) < len(addresses):
            try:
                body = httpx.get(f"{prometheus.url}/api/v1/targets", timeout=2).json()
                active = body["data"]["activeTargets"]
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.25)
    finally:
        prometheus.stop()
    theirs = {t["labels"]["instance"]: int(t["labels"]["shard"]) for t in active}
    assert theirs == {a: shard_of(a, 5) for a in addresses}


def test_shard_from_file_env_and_flags_merges_field_by_field(tmp_path: Path, monkeypatch):
    path = tmp_path / "config.yml"
    path.write_text("shard: {count: 4}\n")
    assert load_settings(path).shard == ShardSettings(index=0, count=4)
    monkeypatch.setenv("SGLANG_TUNER_SHARD__INDEX", "2")
    assert load_settings(path).shard == ShardSettings(index=2, count=4)
    assert load_settings(path, {"shard": {"index": 3}}).shard == ShardSettings(index=3, count=4)
    monkeypatch.setenv("SGLANG_TUNER_SHARD__COUNT", "8")
    assert load_settings(path).shard == ShardSettings(index=2, count=8)


def test_shard_index_must_name_one_of_the_shards(tmp_path: Path):
    path = tmp_path / "config.yml"
    path.write_text("shard: {index: 2, count: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert info.value.problems == ["shard: Value error, index 2 must be below count 2"]


# --- the StatefulSet example -------------------------------------------------------------------

FLEET_KUBE = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes" / "fleet"


def _fleet_kube() -> dict[str, dict[str, Any]]:
    kustomization = yaml.safe_load((FLEET_KUBE / "kustomization.yaml").read_text())
    assert {p.name for p in FLEET_KUBE.glob("*.yaml")} == {
        "kustomization.yaml",
        *kustomization["resources"],
    }
    docs = [yaml.safe_load((FLEET_KUBE / name).read_text()) for name in kustomization["resources"]]
    return {doc["kind"]: doc for doc in docs}


def test_statefulset_pod_ordinal_is_the_shard_index_and_replicas_the_count(tmp_path, monkeypatch):
    kube = _fleet_kube()
    sts = kube["StatefulSet"]
    [container] = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    index = env["SGLANG_TUNER_SHARD__INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert index == "metadata.labels['apps.kubernetes.io/pod-index']"
    assert int(env["SGLANG_TUNER_SHARD__COUNT"]["value"]) == sts["spec"]["replicas"] == 2
    assert container["args"][:3] == ["run", "--config", "/etc/sglang-tuner/config.yml"]
    # the ConfigMap's config, as replica 1 of 2 reads it
    path = tmp_path / "config.yml"
    path.write_text(kube["ConfigMap"]["data"]["config.yml"])
    monkeypatch.setenv("SGLANG_TUNER_SHARD__INDEX", "1")
    monkeypatch.setenv("SGLANG_TUNER_SHARD__COUNT", env["SGLANG_TUNER_SHARD__COUNT"]["value"])
    settings = load_settings(path)
    assert settings.shard == ShardSettings(index=1, count=2) and settings.prometheus is not None
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(settings.database).startswith(mounts["tuner-state"])
    assert container["securityContext"]["runAsNonRoot"] is True


def test_statefulset_service_and_monitor_select_the_replicas():
    kube = _fleet_kube()
    sts, service, monitor = kube["StatefulSet"], kube["Service"], kube["ServiceMonitor"]
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    [port] = sts["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert (
        service["spec"]["ports"][0]["targetPort"]
        == port["name"]
        == monitor["spec"]["endpoints"][0]["port"]
    )


# --- replicas ----------------------------------------------------------------------------------


def test_run_flags_set_the_shard_over_the_file(tmp_path: Path):
    from sglang_tuner.cli.parser import build_parser, flag_overrides

    path = tmp_path / "config.yml"
    path.write_text("shard: {index: 0, count: 2}\n")
    args = build_parser().parse_args(["run", "--config", str(path), "--shard-index", "1"])
    assert load_settings(path, flag_overrides(args)).shard == ShardSettings(index=1, count=2)
    both = build_parser().parse_args(["run", "--shard-index", "2", "--shard-count", "3"])
    assert flag_overrides(both) == {"shard": {"index": 2, "count": 3}}


def _names(daemon) -> set[str]:  # type: ignore[no-untyped-def]
    return {t["name"] for t in daemon.get("/targets").json()["data"]}


def test_two_direct_replicas_split_the_static_targets(daemon_factory, tmp_path: Path):
    targets = [{"url": f"http://127.0.0.1:9/{i}", "name": f"gpu-{i}"} for i in range(40)]
    replicas = []
    for index in (0, 1):
        config = {"targets": targets, "shard": {"index": index, "count": 2}}
        config["database"] = str(tmp_path / f"shard{index}.db")
        replicas.append(daemon_factory(config))
    first, second = (d.wait_for(lambda d: _names(d), timeout=15) for d in replicas)
    assert not first & second
    assert first | second == {t["name"] for t in targets}


def test_two_prometheus_replicas_split_the_fleet(daemon_factory, tmp_path: Path):
    from sglang_tuner.model import signals as s
    from sglang_tuner.sources.prometheus.promql import PromQL, build_queries

    from tests.prometheus_process import FakeQueryAPI, serve_api, vector

    queries = build_queries(PromQL(["instance", "job"], "", 60.0))
    api = FakeQueryAPI({q.expr: q.name for q in queries})
    rows = [({"instance": name, "job": "sglang"}, 1.0) for name in FLEET[:60]]
    api.answers[s.NUM_QUEUE_REQS] = (200, vector(rows))
    with serve_api(api):
        replicas = []
        for index in (0, 1):
            config = {
                "prometheus": {"url": api.url, "timeout_seconds": 0.5},
                "evaluation_interval_seconds": 1.0,
                "shard": {"index": index, "count": 2},
                "database": str(tmp_path / f"shard{index}.db"),
            }
            replicas.append(daemon_factory(config))
        first, second = (d.wait_for(lambda d: _names(d), timeout=10) for d in replicas)
    assert not first & second and first | second == set(FLEET[:60])
    assert all(shard_of(n, 2) == 0 for n in first)
    info = replicas[1].get("/metrics").text
    assert 'sglang_tuner_shard_info{shard="1",shard_count="2"} 1.0' in info
