"""deploy/monitoring: the Prometheus scrape configuration names every service at the ports
the compose file gives them, and every query of every Grafana panel names only metrics the
services really export, scraped from real processes after a discovery (tests/dashboard's
watched run)."""

from __future__ import annotations

import json
import re
import ssl
import urllib.request
from pathlib import Path

import pytest
import yaml
from dashboard_kit import LiveRun

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
METRIC = re.compile(r"\b((?:fedhh|process)_[a-zA-Z0-9_]+)\b")
JOB = re.compile(r'job="([^"]+)"')


def panels() -> list[dict[str, object]]:
    dashboard = json.loads((MONITORING / "grafana" / "dashboards" / "fedhh.json").read_text())
    return list(dashboard["panels"])


def exported(url: str, ca: Path | None) -> set[str]:
    """The names of the samples an endpoint exposes (histograms as _bucket/_sum/_count)."""
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    with urllib.request.urlopen(url, timeout=30, context=context) as response:
        text = response.read().decode()
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines()
            if line and not line.startswith("#")}


def test_the_scrape_configuration_names_every_service() -> None:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"coordinator", "aggregator", "selector", "devices"}
    compose = (ROOT / "deploy" / "docker-compose.yml").read_text()
    assert jobs["coordinator"]["static_configs"][0]["targets"] == ["coordinator:9100"]
    assert jobs["aggregator"]["static_configs"][0]["targets"] == ["aggregator:9101"]
    assert jobs["selector"]["dns_sd_configs"][0]["port"] == 9103  # one address per replica
    assert jobs["devices"]["dns_sd_configs"][0]["port"] == 9102
    # the name the devices job resolves is every device process's (before: a service name
    # that no longer existed once the fleet became devices-0 .. devices-3, so none was scraped)
    services = yaml.safe_load(compose)["services"]
    device_services = [name for name in services if name.startswith("devices")]
    assert len(device_services) >= 2
    for name in device_services:
        aliases = services[name]["networks"]["default"]["aliases"]
        assert jobs["devices"]["dns_sd_configs"][0]["names"] == ["devices"], name
        assert "devices" in aliases, name
    for flag in ("--metrics-port=9100", "--metrics-port=9101", "--metrics-port=9102",
                 "--metrics-port=9103"):
        assert flag in compose
    for name in ("coordinator", "aggregator", "selector"):  # HTTPS with the stack's CA
        assert jobs[name]["scheme"] == "https"
        assert jobs[name]["tls_config"]["ca_file"] == "/run/secrets/ca.pem"


def test_every_panel_queries_metrics_the_services_export(live_run: LiveRun) -> None:
    topo, ca = live_run.system.topo, live_run.system.ca
    names = set()
    for service in ("coordinator", "aggregator"):
        port = topo.services[service].ready["metrics_port"]
        names |= exported(f"https://127.0.0.1:{port}/metrics", ca)
    for service in ("devices-0", "devices-1"):
        port = topo.services[service].ready["metrics_port"]
        names |= exported(f"http://127.0.0.1:{port}/metrics", None)
    jobs = {job["job_name"] for job in yaml.safe_load(
        (MONITORING / "prometheus.yml").read_text())["scrape_configs"]}
    seen = set()
    wanted = {"round latency": "fedhh_coordinator_round_seconds_bucket",
              "stage durations": "fedhh_aggregator_stage_seconds_bucket",
              "devices per round": "fedhh_coordinator_round_devices",
              "dropout": "fedhh_aggregator_stage_devices_sum",
              "eps spent": "fedhh_coordinator_eps_spent",
              "aggregator cpu": "process_cpu_seconds_total",
              "aggregator memory": "process_resident_memory_bytes"}
    for panel in panels():
        targets = panel["targets"]
        assert targets, panel["title"]
        for target in targets:  # type: ignore[attr-defined]
            expr = target["expr"]
            used = set(METRIC.findall(expr))
            assert used, f"{panel['title']}: {expr} names no metric"
            missing = used - names
            assert not missing, f"{panel['title']}: {sorted(missing)} not exported"
            assert set(JOB.findall(expr)) <= jobs, expr
            assert target["datasource"]["uid"] == "prometheus"
            seen |= used
    assert not {what for what, metric in wanted.items() if metric not in seen}


def test_a_query_naming_an_unexported_metric_is_caught(live_run: LiveRun) -> None:
    """The check above can fail: a misspelt metric is not among the exported names."""
    port = live_run.system.topo.services["coordinator"].ready["metrics_port"]
    names = exported(f"https://127.0.0.1:{port}/metrics", live_run.system.ca)
    assert "fedhh_coordinator_round_seconds_bucket" in names
    assert not set(METRIC.findall("rate(fedhh_coordinator_round_second_bucket[5m])")) <= names
