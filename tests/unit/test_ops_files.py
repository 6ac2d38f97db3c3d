"""Static checks of the deployment files against the code they deploy.

No container engine or cluster is needed: the files are parsed and cross-checked with the
settings (``ENVIRONMENT_VARIABLES``), the handler registry, the bus naming functions and the
metrics registry, so a renamed variable, a new job type or a new metric cannot silently
leave compose, Prometheus, Grafana or Kubernetes behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics_core import Metric

from jobscheduler.bus.base import consumer_group, dispatch_topic
from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.handlers import default_registry
from jobscheduler.observability.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "docker-compose.yml"
PROMETHEUS = DOCKER / "prometheus.yml"
GRAFANA = DOCKER / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "jobscheduler.json"
K8S = ROOT / "deploy" / "k8s"
METRICS_PORT = 9100
ROLE_COMMANDS = {"run-api", "run-scheduler", "run-executor", "run-reaper"}
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = load_yaml(COMPOSE)
    assert isinstance(data, dict)
    return data


def jobscheduler_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services built from this repository's image (roles and tools)."""
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("build", {}).get("dockerfile") == "docker/Dockerfile"
    }


def role_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services that run a role (``run-<role>``) and so serve :9100."""
    return {
        name: service
        for name, service in jobscheduler_services(compose).items()
        if set(service.get("command") or []) & ROLE_COMMANDS
    }


def exported_metric_names() -> set[str]:
    """Every series name the roles' registry can export (suffixes included)."""
    names: set[str] = set()
    metric: Metric
    for metric in Metrics().registry.collect():
        names.add(metric.name)
        names.update(sample.name for sample in metric.samples)
        if metric.type == "counter":
            names.add(f"{metric.name}_total")
        elif metric.type == "histogram":
            names.update(f"{metric.name}{suffix}" for suffix in ("_bucket", "_count", "_sum"))
    return names


def exported_families() -> dict[str, set[str]]:
    """Metric family name (as users write it) -> the series names it exports."""
    families: dict[str, set[str]] = {}
    for metric in Metrics().registry.collect():
        if metric.type == "counter":
            families[f"{metric.name}_total"] = {f"{metric.name}_total"}
        elif metric.type == "histogram":
            families[metric.name] = {f"{metric.name}{s}" for s in ("_bucket", "_count", "_sum")}
        else:
            families[metric.name] = {metric.name}
    return families


def dashboard_panels() -> Iterator[dict[str, Any]]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in panels:
            yield panel
            yield from walk(panel.get("panels", []))

    yield from walk(json.loads(DASHBOARD.read_text())["panels"])


def k8s_documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def k8s_all_documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(K8S.glob("*.yaml")) for doc in k8s_documents(path.name)]


def deployments() -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc for doc in k8s_all_documents() if doc["kind"] == "Deployment"
    }


def container_env(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {item["name"]: item.get("value") for item in container.get("env", [])}


# --------------------------------------------------------------------------- compose


def test_compose_jobscheduler_services_only_set_known_environment_variables(
    compose: dict[str, Any],
) -> None:
    known = set(ENVIRONMENT_VARIABLES)
    anchor = compose["x-jobscheduler"]["environment"]
    assert set(anchor) <= known, set(anchor) - known
    services = jobscheduler_services(compose)
    assert services, "no service builds docker/Dockerfile"
    for name, service in services.items():
        unknown = set(service.get("environment") or {}) - known
        assert not unknown, f"{name}: {sorted(unknown)} are not jobscheduler settings"


def test_compose_runs_every_role_with_the_shared_config(compose: dict[str, Any]) -> None:
    commands = {cmd for s in role_services(compose).values() for cmd in s["command"]}
    assert commands == ROLE_COMMANDS
    for name, service in role_services(compose).items():
        env = service["environment"]
        for variable in ("MONGO_URI", "KAFKA_BROKERS", "ETCD_ENDPOINTS"):
            assert variable in env, f"{name} lacks {variable}"
        assert env["METRICS_HOST"] == "0.0.0.0", f"{name}: metrics unreachable by Prometheus"
        assert str(env.get("METRICS_PORT", METRICS_PORT)) == str(METRICS_PORT)
    schedulers = [s for s in role_services(compose).values() if "run-scheduler" in s["command"]]
    assert len(schedulers) == 2


def test_every_builtin_job_type_has_exactly_one_executor_service(
    compose: dict[str, Any],
) -> None:
    executors = {
        name: service["environment"].get("JOB_TYPE")
        for name, service in role_services(compose).items()
        if "run-executor" in service["command"]
    }
    registered = set(default_registry().names())
    assert all(job_type in registered for job_type in executors.values()), executors
    assert sorted(executors.values()) == sorted(registered)
    for name, job_type in executors.items():
        assert name == f"executor-{job_type}"


def test_api_is_published_on_8080_and_seed_runs_the_seed_tool(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert any(port.endswith("8080:8080") for port in services["api"]["ports"])
    seed = services["seed"]
    assert seed["entrypoint"] == ["jobscheduler", "seed"]
    assert "tools" in seed["profiles"]
    assert "MONGO_URI" in seed["environment"]


def test_compose_dependencies_are_all_present(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in ("etcd", "kafka", "mongo", "prometheus", "grafana"):
        assert name in services
    assert "--replSet" in services["mongo"]["command"]
    kafka_env = services["kafka"]["environment"]
    assert kafka_env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    for name, service in role_services(compose).items():
        for dependency in ("mongo", "kafka", "etcd"):
            assert service["depends_on"][dependency]["condition"] == "service_healthy", name


# --------------------------------------------------------------------------- prometheus


def test_prometheus_scrapes_every_role_service_on_the_metrics_port(
    compose: dict[str, Any],
) -> None:
    config = load_yaml(PROMETHEUS)
    targets = {
        target
        for job in config["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    assert targets == {f"{name}:{METRICS_PORT}" for name in role_services(compose)}
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert jobs == {"api", "scheduler", "executor", "reaper"}


# --------------------------------------------------------------------------- grafana


def test_grafana_provisioning_files_parse_and_point_at_the_mounts(
    compose: dict[str, Any],
) -> None:
    datasources = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    providers = load_yaml(GRAFANA / "provisioning" / "dashboards" / "dashboards.yml")
    (provider,) = providers["providers"]
    mounts = dict(volume.split(":")[:2] for volume in compose["services"]["grafana"]["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    assert json.loads(DASHBOARD.read_text())["uid"] == "jobscheduler"
    for panel in dashboard_panels():
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == source["uid"], panel["title"]


def test_every_dashboard_query_uses_an_exported_metric() -> None:
    exported = exported_metric_names()
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard_panels()
        for target in panel.get("targets", [])
    ]
    assert queries
    for title, expr in queries:
        assert set(_IDENTIFIER.findall(expr)) & exported, f"{title}: {expr}"


def test_every_exported_metric_has_a_dashboard_panel() -> None:
    used = {
        name
        for panel in dashboard_panels()
        for target in panel.get("targets", [])
        for name in _IDENTIFIER.findall(target["expr"])
    }
    missing = [family for family, series in exported_families().items() if not series & used]
    assert not missing, f"metrics without a panel: {missing}"


# --------------------------------------------------------------------------- kubernetes


def test_dashboard_panels_have_their_own_ids_and_places() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "two panels share an id"
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_k8s_manifests_parse_and_cover_every_role() -> None:
    documents = k8s_all_documents()
    assert all("apiVersion" in doc and "kind" in doc for doc in documents)
    roles = {
        arg
        for deployment in deployments().values()
        for arg in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    }
    assert roles == ROLE_COMMANDS
    assert deployments()["scheduler"]["spec"]["replicas"] == 2
    services = [doc for doc in documents if doc["kind"] == "Service"]
    assert any(svc["metadata"]["name"] == "api" for svc in services)


def test_k8s_deployments_only_use_known_settings() -> None:
    known = set(ENVIRONMENT_VARIABLES)
    config_maps = {
        doc["metadata"]["name"]: doc["data"]
        for doc in k8s_all_documents()
        if doc["kind"] == "ConfigMap"
    }
    for name, data in config_maps.items():
        assert set(data) <= known, f"ConfigMap {name}: {sorted(set(data) - known)}"
    for name, deployment in deployments().items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        unknown = set(container_env(deployment)) - known
        assert not unknown, f"{name}: {sorted(unknown)} are not jobscheduler settings"
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                assert source["configMapRef"]["name"] in config_maps, name


def test_every_executor_deployment_has_a_matching_keda_scaled_object() -> None:
    scaled = {
        doc["spec"]["scaleTargetRef"]["name"]: doc
        for doc in k8s_documents("keda-scaledobjects.yaml")
        if doc["kind"] == "ScaledObject"
    }
    executors = {
        name: container_env(deployment)["JOB_TYPE"]
        for name, deployment in deployments().items()
        if "run-executor" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    }
    assert sorted(executors.values()) == sorted(default_registry().names())
    assert set(scaled) == set(executors)
    for name, job_type in executors.items():
        scaled_object = scaled[name]
        assert scaled_object["apiVersion"] == "keda.sh/v1alpha1"
        (trigger,) = scaled_object["spec"]["triggers"]
        assert trigger["type"] == "kafka"
        assert trigger["metadata"]["consumerGroup"] == consumer_group(job_type)
        assert trigger["metadata"]["topic"] == dispatch_topic(job_type)
        assert trigger["metadata"]["bootstrapServers"]
        assert int(trigger["metadata"]["lagThreshold"]) > 0
        spec = scaled_object["spec"]
        assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]


# --------------------------------------------------------------------------- image


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with comments dropped and continuations joined."""
    logical: list[str] = []
    current = ""
    for raw in (DOCKER / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    pairs = []
    for line in logical:
        name, _, args = line.partition(" ")
        pairs.append((name.upper(), args.strip()))
    return pairs


def test_dockerfile_runs_as_non_root_with_the_jobscheduler_entrypoint() -> None:
    instructions = dockerfile_instructions()
    by_name: dict[str, list[str]] = {}
    for name, args in instructions:
        by_name.setdefault(name, []).append(args)
    assert by_name["FROM"] == ["python:3.11-slim"]
    user = by_name["USER"][-1].split(":")[0]
    assert user not in ("root", "0"), user
    assert json.loads(by_name["ENTRYPOINT"][-1]) == ["jobscheduler"]
    assert "CMD" not in by_name, "no default role: compose and k8s pass run-<role>"
    assert "/healthz" in by_name["HEALTHCHECK"][-1]
    assert any("pip install --no-cache-dir ." in args for args in by_name["RUN"])
    exposed = " ".join(by_name["EXPOSE"]).split()
    assert {"8080", "9100"} <= set(exposed)
