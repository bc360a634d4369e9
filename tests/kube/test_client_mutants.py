"""What ``RealKube`` makes of a kubeconfig or a pod's service account, and the requests and errors a user
sees from each call (the mutation audit of ``spectrn.kube.client``).

Kubeconfig files are written here in the format of the Kubernetes docs, with a fake token; the connection
settings and every error message, reason and hint are written out by hand. Requests are read back from the
local API server double as sent on the wire."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.mock_apiserver import MockApiServer
from spectrn.kube.api import KubeApiError
from spectrn.kube.client import RealKube, connect

CONFIG_FIX = (
    "fix the file, or pass --kubeconfig with a valid one (e.g. from `aws eks update-kubeconfig --name CLUSTER`)"
)
LOAD_HINT = "point --kubeconfig at a valid file, pick a context with --context, or run inside a pod"

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: one
  cluster:
    server: https://one.example:6443
- name: two
  cluster:
    server: https://two.example:6443
contexts:
- name: first
  context:
    cluster: one
    user: dev
- name: second
  context:
    cluster: two
    user: dev
current-context: first
users:
- name: dev
  user:
    token: fake-token-for-tests
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home (no ~/.kube/config), no KUBECONFIG, not in a pod; the client's default file is ~/.kube/config."""
    import kubernetes.config.kube_config as kc

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    # the client reads KUBECONFIG once, when imported: set its default as a process started now would have it
    monkeypatch.setattr(kc, "KUBE_CONFIG_DEFAULT_LOCATION", "~/.kube/config")
    return home


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def env_kubeconfig(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """KUBECONFIG as the process found it at start."""
    import kubernetes.config.kube_config as kc

    monkeypatch.setenv("KUBECONFIG", path)
    monkeypatch.setattr(kc, "KUBE_CONFIG_DEFAULT_LOCATION", path)


@pytest.fixture
def pod(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Inside a pod: the service host in the environment and a mounted service account (token and CA)."""
    import kubernetes.config.incluster_config as ic

    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("fake-sa-token")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(ic, "SERVICE_TOKEN_FILENAME", str(sa / "token"))
    monkeypatch.setattr(ic, "SERVICE_CERT_FILENAME", str(sa / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return sa


def settings(kube: RealKube) -> tuple[str, str]:
    return kube.context, kube.host


# ---- which configuration is loaded ---------------------------------------------------------------


def test_a_kubeconfig_file_uses_its_current_context(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path)) == ("first", "https://one.example:6443")


def test_a_named_context_picks_its_cluster(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path, context="second")) == ("second", "https://two.example:6443")


def test_connect_passes_the_kubeconfig_and_the_context(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    kube = connect(kubeconfig=path, context="second")
    assert isinstance(kube, RealKube)
    assert settings(kube) == ("second", "https://two.example:6443")


def test_the_kubeconfig_from_the_environment_is_read_without_a_path(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_kubeconfig(monkeypatch, write(tmp_path / "env.yaml", KUBECONFIG))
    assert settings(RealKube()) == ("first", "https://one.example:6443")
    assert settings(RealKube(context="second")) == ("second", "https://two.example:6443")


def test_a_path_given_wins_over_the_environment_and_the_home_file(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = KUBECONFIG.replace("one.example", "other.example").replace("two.example", "other.example")
    write(home / ".kube" / "config", other)
    env_kubeconfig(monkeypatch, write(tmp_path / "env.yaml", other))
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path)) == ("first", "https://one.example:6443")


def test_inside_a_pod_without_a_kubeconfig_the_service_account_is_used(pod: Path) -> None:
    kube = RealKube()
    assert settings(kube) == ("in-cluster", "https://10.96.0.1:443")
    assert kube._api.configuration.ssl_ca_cert == str(pod / "ca.crt")


def test_inside_a_pod_a_home_kubeconfig_wins(pod: Path, home: Path) -> None:
    write(home / ".kube" / "config", KUBECONFIG)
    assert settings(RealKube()) == ("first", "https://one.example:6443")


def test_inside_a_pod_the_kubeconfig_the_environment_names_wins(
    pod: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_kubeconfig(monkeypatch, write(tmp_path / "env.yaml", KUBECONFIG))
    assert settings(RealKube()) == ("first", "https://one.example:6443")


def test_inside_a_pod_a_kubeconfig_path_or_a_context_wins(
    pod: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path)) == ("first", "https://one.example:6443")
    env_kubeconfig(monkeypatch, path)
    assert settings(RealKube(context="second")) == ("second", "https://two.example:6443")


def test_a_given_api_client_is_used_as_is_and_names_its_context() -> None:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:1"
    api = client.ApiClient(cfg)
    try:
        assert settings(RealKube(api_client=api)) == ("custom", "http://127.0.0.1:1")
        assert settings(RealKube(api_client=api, context="kind-spectrn")) == ("kind-spectrn", "http://127.0.0.1:1")
    finally:
        api.close()


# ---- configuration errors ------------------------------------------------------------------------


def test_a_missing_kubeconfig_path_is_named(home: Path, tmp_path: Path) -> None:
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"kubeconfig {path} not found",
        "ConfigError",
        "check the --kubeconfig path, or create it (e.g. `aws eks update-kubeconfig --name CLUSTER`)",
    )


def test_no_kubeconfig_at_all_names_the_default_file(home: Path) -> None:
    with pytest.raises(KubeApiError) as err:
        RealKube()
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        "cannot load the Kubernetes configuration from kubeconfig ~/.kube/config: "
        "Invalid kube-config file. No configuration found.",
        "ConfigError",
        LOAD_HINT,
    )


def test_an_unknown_context_is_a_configuration_error(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path, context="third")
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"cannot load the Kubernetes configuration from kubeconfig {path}: "
        f"Invalid kube-config file. Expected object with name third in {path}/contexts list",
        "ConfigError",
        LOAD_HINT,
    )


def test_a_long_configuration_error_is_cut_to_300_characters(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    name = "c" * 400
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path, context=name)
    detail = f"Invalid kube-config file. Expected object with name {name}"[:300]
    assert err.value.message == f"cannot load the Kubernetes configuration from kubeconfig {path}: {detail}"


def test_a_pod_without_a_service_account_token_says_so(pod: Path) -> None:
    (pod / "token").unlink()
    with pytest.raises(KubeApiError) as err:
        RealKube()
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        "cannot load the Kubernetes configuration from the in-cluster service account: "
        "Service token file does not exist.",
        "ConfigError",
        LOAD_HINT,
    )


def test_a_kubeconfig_that_is_not_yaml_names_the_file_and_the_place(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", "clusters: [a\n")
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f'kubeconfig {path} is not valid YAML: while parsing a flow sequence in "{path}", line 1, column 11 '
        f"expected ',' or ']', but got '<stream end>' in \"{path}\", line 2, column 1",
        "ConfigError",
        CONFIG_FIX,
    )


def test_a_kubeconfig_from_the_environment_is_named_in_errors(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "env.yaml", "clusters: [a\n")
    env_kubeconfig(monkeypatch, path)
    with pytest.raises(KubeApiError) as err:
        RealKube()
    assert err.value.message.startswith(f"kubeconfig {path} is not valid YAML: while parsing a flow sequence")


def test_a_kubeconfig_of_the_wrong_shape_names_the_python_error(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", "just some words\n")
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"kubeconfig {path} is not a valid kubeconfig: TypeError: 'str' object does not support item assignment",
        "ConfigError",
        CONFIG_FIX,
    )


def test_a_missing_credential_program_is_not_reported_as_a_missing_kubeconfig(home: Path, tmp_path: Path) -> None:
    """The file exists: the program its user entry runs for a token does not."""
    text = KUBECONFIG.replace(
        "    token: fake-token-for-tests\n",
        "    auth-provider:\n      name: gcp\n      config:\n        cmd-path: /nonexistent/bin/gcloud\n"
        "        cmd-args: config config-helper --format=json\n",
    )
    path = write(tmp_path / "kc.yaml", text)
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"kubeconfig {path} is not a valid kubeconfig: FileNotFoundError: "
        "[Errno 2] No such file or directory: '/nonexistent/bin/gcloud'",
        "ConfigError",
        CONFIG_FIX,
    )


def test_loading_leaves_the_clients_process_wide_default_alone(home: Path, tmp_path: Path) -> None:
    """Each ``RealKube`` keeps its settings to itself: another client built later in the process (another
    context, or the kind helper's) must not inherit them."""
    from kubernetes import client

    before = client.Configuration.get_default().host
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert RealKube(kubeconfig=path, context="second").host == "https://two.example:6443"
    assert client.Configuration.get_default().host == before != "https://two.example:6443"


# ---- requests over HTTP ----------------------------------------------------------------------------------

CONNECTION_HINT = "check the kube context (`kubectl config current-context`), network access and that the cluster is up"


@pytest.fixture
def server() -> Iterator[MockApiServer]:
    with MockApiServer() as s:
        yield s


def recording_client(host: str) -> Any:
    """A real ``ApiClient`` that also notes the timeout of each call."""
    from kubernetes import client

    class Recording(client.ApiClient):  # type: ignore[misc]
        timeouts: list[Any]

        def call_api(self, *args: Any, **kwargs: Any) -> Any:
            self.timeouts.append(kwargs.get("_request_timeout"))
            return super().call_api(*args, **kwargs)

    cfg = client.Configuration()
    cfg.host = host
    api = Recording(cfg)
    api.timeouts = []
    return api


@pytest.fixture
def api(server: MockApiServer) -> Iterator[Any]:
    api = recording_client(server.url)
    yield api
    api.close()


@pytest.fixture
def kube(api: Any) -> RealKube:
    return RealKube(api_client=api, context="mock")


def test_each_request_waits_60_s_unless_told_otherwise(server: MockApiServer, api: Any) -> None:
    RealKube(api_client=api).get("v1", "Pod", "p", "spectrn")
    RealKube(api_client=api, request_timeout_s=5).get("v1", "Pod", "p", "spectrn")
    assert api.timeouts == [60, 5]


def test_a_watch_waits_10_s_longer_than_the_server_holds_it(kube: RealKube, server: MockApiServer, api: Any) -> None:
    list(kube.watch("apps/v1", "Deployment", "spectrn", timeout_s=3))
    list(kube.watch("v1", "Pod", "spectrn", timeout_s=0.5))
    assert api.timeouts == [13, 10.5]
    first, second = (r for r in server.requests if r.query.get("watch"))
    assert (first.path, first.query) == (
        "/apis/apps/v1/namespaces/spectrn/deployments",
        {"watch": ["true"], "timeoutSeconds": ["3"]},
    )
    assert second.query == {"watch": ["true"], "timeoutSeconds": ["1"]}  # at least a second


def test_a_watch_sends_the_selector_and_the_resource_version(kube: RealKube, server: MockApiServer) -> None:
    list(kube.watch("v1", "Pod", "spectrn", "app=x", resource_version="7", timeout_s=30))
    assert server.requests[-1].query == {
        "labelSelector": ["app=x"],
        "watch": ["true"],
        "timeoutSeconds": ["30"],
        "resourceVersion": ["7"],
    }


def test_every_request_accepts_json_and_only_a_body_has_a_content_type(kube: RealKube, server: MockApiServer) -> None:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "spectrn"}}
    kube.get("apps/v1", "Deployment", "d", "spectrn")
    kube.apply(dep)
    kube.delete("apps/v1", "Deployment", "d", "spectrn")
    kube.can_i("get", "pods")
    kube.patch_node_status("n", [{"op": "add", "path": "/status/capacity/x", "value": "1"}])
    seen = [(r.method, r.headers.get("accept"), r.headers.get("content-type")) for r in server.requests]
    assert seen == [
        ("GET", "application/json", None),
        ("PATCH", "application/json", "application/apply-patch+yaml"),
        ("DELETE", "application/json", "application/json"),
        ("POST", "application/json", "application/json"),
        ("PATCH", "application/json", "application/json-patch+json"),
    ]


def test_a_delete_sends_whole_delete_options_in_the_background_by_default(
    kube: RealKube, server: MockApiServer
) -> None:
    kube.delete("v1", "Pod", "p", "spectrn")
    assert server.requests[-1].body == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}


def test_names_with_a_slash_are_escaped_in_every_path(kube: RealKube, server: MockApiServer) -> None:
    server.logs["/api/v1/namespaces/a%2Fb/pods/p%2Fq/log"] = "x\n"
    kube.get("v1", "Pod", "p/q", "a/b")
    assert kube.pod_logs("p/q", "a/b") == "x\n"
    kube.events_for("Pod", "p/q", "a/b")
    kube.patch_node_status("n/m", [])
    assert [r.path for r in server.requests] == [
        "/api/v1/namespaces/a%2Fb/pods/p%2Fq",
        "/api/v1/namespaces/a%2Fb/pods/p%2Fq/log",
        "/api/v1/namespaces/a%2Fb/events",
        "/api/v1/nodes/n%2Fm/status",
    ]


def test_logs_ask_for_the_current_container_by_default(kube: RealKube, server: MockApiServer) -> None:
    server.logs["/api/v1/namespaces/spectrn/pods/p/log"] = "a\n"
    assert kube.pod_logs("p", "spectrn") == "a\n"
    assert server.requests[-1].query == {}


def test_logs_that_are_not_utf8_are_decoded_with_replacement_characters(kube: RealKube, server: MockApiServer) -> None:
    server.logs["/api/v1/namespaces/spectrn/pods/p/log"] = b"ok \xff\xfe end\n"
    assert kube.pod_logs("p", "spectrn") == "ok \ufffd\ufffd end\n"


def test_a_list_without_selector_asks_only_for_pages(kube: RealKube, server: MockApiServer) -> None:
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "spectrn"}})
    items = kube.list("v1", "ConfigMap", "spectrn")
    assert items == [
        {
            "metadata": {"name": "c", "namespace": "spectrn", "resourceVersion": "11"},
            "apiVersion": "v1",
            "kind": "ConfigMap",
        }
    ]
    assert (server.requests[-1].path, server.requests[-1].query) == (
        "/api/v1/namespaces/spectrn/configmaps",
        {"limit": ["500"]},
    )


def test_pages_after_the_first_carry_the_continue_token(kube: RealKube, server: MockApiServer) -> None:
    for i in range(3):
        meta = {"name": f"c{i}", "namespace": "spectrn", "labels": {"a": "b"}}
        kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    kube.list("v1", "ConfigMap", "spectrn", "a=b")
    assert [r.query for r in server.requests[3:]] == [
        {"labelSelector": ["a=b"], "limit": ["500"]},
        {"labelSelector": ["a=b"], "continue": ["2"], "limit": ["500"]},
    ]


def test_a_namespaced_kind_without_namespace_is_refused_before_any_request(
    kube: RealKube, server: MockApiServer
) -> None:
    with pytest.raises(KubeApiError) as err:
        kube.get("v1", "Pod", "p")
    e = err.value
    assert (e.message, e.reason, e.hint) == ("Pod p needs a namespace", "Invalid", "set metadata.namespace")
    with pytest.raises(KubeApiError) as err:
        kube.list("v1", "Pod")
    assert err.value.message == "Pod  needs a namespace"
    assert server.requests == []


def test_a_kind_the_cluster_does_not_serve_says_what_to_install(kube: RealKube, server: MockApiServer) -> None:
    with pytest.raises(KubeApiError) as err:
        kube.list("example.com/v1", "Gadget", "spectrn")
    e = err.value
    assert (e.message, e.status, e.reason, e.hint) == (
        "the cluster serves no kind Gadget in example.com/v1",
        404,
        "NotFound",
        "install the CRD or API group that provides it, or choose another resources_mode",
    )
    with pytest.raises(KubeApiError) as err:
        kube.list("other.example/v1", "Gadget", "spectrn")
    assert err.value.message == 'discover other.example/v1: HTTP 404 NotFound: the object "v1" was not found'


def test_the_api_versions_are_read_from_both_discovery_documents(kube: RealKube, server: MockApiServer) -> None:
    assert kube.api_versions() == {"v1", "apps/v1", "resource.k8s.io/v1beta1"}
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/api"), ("GET", "/apis")]
    kube.api_versions()
    assert len(server.requests) == 2  # asked once


def test_an_access_review_is_sent_whole(kube: RealKube, server: MockApiServer) -> None:
    assert kube.can_i("create", "pods", subresource="exec", namespace="spectrn") is True
    assert kube.can_i("list", "nodes") is True
    first, second = server.requests
    assert (first.method, first.path) == ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert first.body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "verb": "create",
                "resource": "pods",
                "group": "",
                "namespace": "spectrn",
                "subresource": "exec",
            }
        },
    }
    assert second.body["spec"] == {"resourceAttributes": {"verb": "list", "resource": "nodes", "group": ""}}


# ---- watch streams -----------------------------------------------------------------------------------------


def events_bytes(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(ev).encode() + b"\n" for ev in events)


POD_A = {"metadata": {"name": "a"}}
POD_B = {"metadata": {"name": "b"}}


def test_events_split_across_chunks_are_joined(kube: RealKube, server: MockApiServer) -> None:
    server.watch_body = events_bytes({"type": "ADDED", "object": POD_A}, {"type": "DELETED", "object": POD_B})
    server.watch_chunk = 7
    assert list(kube.watch("v1", "Pod", "spectrn")) == [("ADDED", POD_A), ("DELETED", POD_B)]


def test_several_events_in_one_chunk_keep_their_order(kube: RealKube, server: MockApiServer) -> None:
    server.watch_body = events_bytes(
        {"type": "ADDED", "object": POD_A}, {"type": "MODIFIED", "object": POD_B}, {"type": "DELETED", "object": POD_A}
    )
    assert list(kube.watch("v1", "Pod", "spectrn")) == [("ADDED", POD_A), ("MODIFIED", POD_B), ("DELETED", POD_A)]


def test_a_last_event_without_newline_and_blank_lines_are_read(kube: RealKube, server: MockApiServer) -> None:
    server.watch_body = b"\n  \n" + events_bytes({"type": "ADDED", "object": POD_A}) + b'{"type": "BOOKMARK"}'
    assert list(kube.watch("v1", "Pod", "spectrn")) == [("ADDED", POD_A), ("BOOKMARK", {})]


def test_an_error_event_is_the_servers_status(kube: RealKube, server: MockApiServer) -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 5 (9)"}
    server.watch_body = events_bytes({"type": "ADDED", "object": POD_A}, {"type": "ERROR", "object": status})
    seen = []
    with pytest.raises(KubeApiError) as err:
        for event in kube.watch("v1", "Pod", "spectrn"):
            seen.append(event)
    assert seen == [("ADDED", POD_A)]
    e = err.value
    assert (e.message, e.status, e.reason) == (
        "watch Pod in spectrn: HTTP 410 Expired: too old resource version: 5 (9)",
        410,
        "Expired",
    )


def test_an_error_event_without_code_or_reason_is_a_server_failure(kube: RealKube, server: MockApiServer) -> None:
    server.watch_body = b'{"type": "ERROR", "object": {"kind": "Status", "message": "internal error"}}'
    with pytest.raises(KubeApiError) as err:
        list(kube.watch("v1", "Node"))
    e = err.value
    assert (e.message, e.status, e.reason) == ("watch Node in the cluster: HTTP 500: internal error", 500, "")


def test_a_watch_cut_off_mid_stream_is_a_connection_error(kube: RealKube, server: MockApiServer) -> None:
    server.watch_body = events_bytes({"type": "ADDED", "object": POD_A})
    server.watch_cut = True
    seen = []
    with pytest.raises(KubeApiError) as err:
        for event in kube.watch("v1", "Pod", "spectrn"):
            seen.append(event)
    assert seen == [("ADDED", POD_A)]
    e = err.value
    assert (e.status, e.reason, e.hint) == (0, "ConnectionError", CONNECTION_HINT)
    prefix = f"watch Pod in spectrn: cannot reach the Kubernetes API server at {server.url}: ProtocolError: "
    assert e.message.startswith(prefix), e.message
    assert "Connection broken: IncompleteRead" in e.message


# ---- exec ------------------------------------------------------------------------------------------------


@pytest.fixture
def run_forever(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Notes the timeout of each exec; the stream still runs to its end."""
    from kubernetes.stream.ws_client import WSClient

    timeouts: list[Any] = []
    real = WSClient.run_forever

    def spy(self: Any, timeout: Any = None) -> None:
        timeouts.append(timeout)
        real(self, timeout=timeout)

    monkeypatch.setattr(WSClient, "run_forever", spy)
    return timeouts


def test_exec_runs_the_command_without_stdin_or_tty(
    kube: RealKube, server: MockApiServer, run_forever: list[Any]
) -> None:
    server.exec_handler = lambda command: (b"out", b"", 0)
    assert kube.exec("p", "spectrn", ["ls", "-l"]) == b"out"
    assert kube.exec("p", "spectrn", ["ls"], container="load", timeout_s=30) == b"out"
    first, second = server.requests
    assert (first.path, first.query) == (
        "/api/v1/namespaces/spectrn/pods/p/exec",
        {"command": ["ls", "-l"], "stderr": ["true"], "stdin": ["false"], "stdout": ["true"], "tty": ["false"]},
    )
    assert second.query["container"] == ["load"]
    assert run_forever == [300, 30]


def test_a_failed_command_names_its_first_three_words_and_its_stderr(kube: RealKube, server: MockApiServer) -> None:
    server.exec_handler = lambda command: (b"", b"\n  tar: /results/x: Cannot open \xff\n", 2)
    with pytest.raises(KubeApiError) as err:
        kube.exec("load-0", "spectrn", ["tar", "cf", "-", "-C", "/results/x", "."])
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        "exec tar cf - in pod spectrn/load-0: exit status 2: tar: /results/x: Cannot open \ufffd",
        "ExecFailed",
        "check that the pod is still running and the path exists",
    )


def test_a_failed_commands_stderr_is_cut_to_its_last_500_characters(kube: RealKube, server: MockApiServer) -> None:
    err_text = "e" * 100 + "0123456789" * 50
    server.exec_handler = lambda command: (b"", err_text.encode(), 1)
    with pytest.raises(KubeApiError) as err:
        kube.exec("p", "spectrn", ["cat", "/x"])
    assert err.value.message == "exec cat /x in pod spectrn/p: exit status 1: " + "0123456789" * 50


def test_an_exec_that_does_not_finish_in_time_is_a_timeout(
    kube: RealKube, server: MockApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubernetes.stream.ws_client import WSClient

    # the command runs on, and the wait ends with the stream still open, as when the time runs out
    hold = server.exec_hold = threading.Event()
    monkeypatch.setattr(WSClient, "run_forever", lambda self, timeout=None: None)
    real_close = WSClient.close

    def close(self: Any, **kwargs: Any) -> None:  # the command ends when the client hangs up
        hold.set()
        real_close(self, **kwargs)

    monkeypatch.setattr(WSClient, "close", close)
    try:
        with pytest.raises(KubeApiError) as err:
            kube.exec("p", "spectrn", ["sleep", "1000"])
    finally:
        hold.set()
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        "exec sleep 1000 in pod spectrn/p: did not finish within 300 s",
        "Timeout",
        "re-run; the pod may be overloaded",
    )


def test_an_exec_into_a_missing_pod_is_the_servers_404(kube: RealKube, server: MockApiServer) -> None:
    server.exec_refusal = (404, "NotFound", 'pods "gone" not found')
    with pytest.raises(KubeApiError) as err:
        kube.exec("gone", "spectrn", ["cat", "/results/x/run.json"])
    e = err.value
    assert (e.message, e.status, e.reason) == (
        'exec cat /results/x/run.json in pod spectrn/gone: HTTP 404 NotFound: pods "gone" not found',
        404,
        "NotFound",
    )
    assert e.not_found


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"", "HTTP 403 Forbidden: Forbidden"),  # no body: the status line's phrase, not websocket-client's "None"
        (b"denied at the proxy\n", "HTTP 403 Forbidden: denied at the proxy"),
    ],
    ids=["no body", "text body"],
)
def test_an_exec_refused_without_a_status_body_reads_the_status_line(
    kube: RealKube, server: MockApiServer, body: bytes, detail: str
) -> None:
    server.exec_refusal = (403, "Forbidden", body)
    with pytest.raises(KubeApiError) as err:
        kube.exec("p", "spectrn", ["ls"])
    assert (err.value.message, err.value.status) == (f"exec ls in pod spectrn/p: {detail}", 403)


def test_an_exec_to_an_unreachable_server_is_a_connection_error_on_one_line() -> None:
    api = recording_client("http://127.0.0.1:9")  # discard port: nothing listens
    try:
        with pytest.raises(KubeApiError) as err:
            RealKube(api_client=api).exec("p", "spectrn", ["ls"])
    finally:
        api.close()
    e = err.value
    assert (e.status, e.reason, e.hint) == (0, "ConnectionError", CONNECTION_HINT)
    # the client's ApiException(status 0) text spans lines ("(0)\nReason: ..."): one line here
    assert e.message == (
        "exec ls in pod spectrn/p: cannot reach the Kubernetes API server: "
        "ApiException: (0) Reason: [Errno 111] Connection refused"
    )


def test_an_exec_that_fails_before_the_client_wraps_it_names_the_error(
    kube: RealKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubernetes.stream

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConnectionResetError(104, "Connection reset by peer")  # no `reason` attribute

    monkeypatch.setattr(kubernetes.stream, "stream", refuse)
    with pytest.raises(KubeApiError) as err:
        kube.exec("p", "spectrn", ["ls"])
    assert (err.value.message, err.value.status) == (
        "exec ls in pod spectrn/p: cannot reach the Kubernetes API server: "
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        0,
    )


# ---- answers the local server does not give: a canned reply for every request ----------------------------


class Reply:
    """What ``call_api`` returns: status, reason phrase, body, and the raw response of a stream."""

    def __init__(self, status: int, reason: str | None, body: bytes) -> None:
        self.status, self.reason, self.body = status, reason, body
        self.response = self

    def read(self) -> bytes:
        return self.body

    @property
    def data(self) -> bytes:
        return self.body

    def release_conn(self) -> None:
        pass


class Canned:
    """An ``ApiClient`` stand-in that answers every request with one reply and notes (method, path)."""

    def __init__(self, status: int, reason: str | None, body: Any) -> None:
        self.reply = Reply(status, reason, body if isinstance(body, bytes) else json.dumps(body).encode())
        self.seen: list[tuple[str, str]] = []
        self.configuration = type("Cfg", (), {"host": "https://cluster.example"})()

    def param_serialize(self, method: str, path: str, **kwargs: Any) -> tuple[str, str]:
        return method, path

    def call_api(self, method: str, path: str, **kwargs: Any) -> Reply:
        self.seen.append((method, path))
        return self.reply


def canned(status: int, reason: str | None, body: Any) -> RealKube:
    return RealKube(api_client=Canned(status, reason, body))


FORBIDDEN = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "denied"}


def test_every_call_names_its_action_in_an_api_error() -> None:
    kube = canned(403, "Forbidden", FORBIDDEN)
    calls = {
        "get Pod spectrn/p": lambda: kube.get("v1", "Pod", "p", "spectrn"),
        "get Node /n": lambda: kube.get("v1", "Node", "n"),
        "list Pod in spectrn": lambda: kube.list("v1", "Pod", "spectrn"),
        "list Node in the cluster": lambda: kube.list("v1", "Node"),
        "watch Node in the cluster": lambda: list(kube.watch("v1", "Node")),
        "delete Pod spectrn/p": lambda: kube.delete("v1", "Pod", "p", "spectrn"),
        "delete Node /n": lambda: kube.delete("v1", "Node", "n"),
        "logs of pod spectrn/p": lambda: kube.pod_logs("p", "spectrn"),
        "events of Pod spectrn/p": lambda: kube.events_for("Pod", "p", "spectrn"),
        "check permission get pods": lambda: kube.can_i("get", "pods"),
        "patch status of node n": lambda: kube.patch_node_status("n", []),
        "discover the core API": kube.api_versions,
        "discover example.com/v1": lambda: kube.list("example.com/v1", "Widget", "spectrn"),
    }
    messages = []
    for call in calls.values():
        with pytest.raises(KubeApiError) as err:
            call()
        messages.append(err.value.message)
    assert messages == [f"{action}: HTTP 403 Forbidden: denied" for action in calls]


def test_the_api_groups_discovery_names_its_action() -> None:
    kube = canned(200, "OK", {})
    # /api answers, then /apis is refused
    replies = iter([Reply(200, "OK", b'{"versions": ["v1"]}'), Reply(403, "Forbidden", json.dumps(FORBIDDEN).encode())])
    kube._api.call_api = lambda method, path, **kw: next(replies)
    with pytest.raises(KubeApiError) as err:
        kube.api_versions()
    assert err.value.message == "discover API groups: HTTP 403 Forbidden: denied"


@pytest.mark.parametrize("stream", [False, True])
def test_a_2xx_answer_is_a_success_and_a_3xx_is_not(stream: bool) -> None:
    call = (lambda k: k.pod_logs("p", "spectrn")) if stream else (lambda k: k.get("v1", "Pod", "p", "spectrn"))
    assert call(canned(299, "Odd", b'{"kind": "Pod"}')) == ('{"kind": "Pod"}' if stream else {"kind": "Pod"})
    with pytest.raises(KubeApiError) as err:
        call(canned(300, "Multiple Choices", b""))
    action = "logs of pod spectrn/p" if stream else "get Pod spectrn/p"
    assert (err.value.message, err.value.status) == (f"{action}: HTTP 300 Multiple Choices: Multiple Choices", 300)


@pytest.mark.parametrize("stream", [False, True])
def test_a_failure_without_status_body_keeps_the_http_reason_and_the_text(stream: bool) -> None:
    def call(k: RealKube) -> Any:
        return k.pod_logs("p", "spectrn") if stream else k.get("v1", "Pod", "p", "spectrn")

    action = "logs of pod spectrn/p" if stream else "get Pod spectrn/p"
    with pytest.raises(KubeApiError) as err:
        call(canned(502, "Bad Gateway", b"upstream down"))
    assert (err.value.message, err.value.reason) == (f"{action}: HTTP 502 Bad Gateway: upstream down", "Bad Gateway")
    with pytest.raises(KubeApiError) as err:
        call(canned(502, None, b"upstream down"))
    assert (err.value.message, err.value.reason) == (f"{action}: HTTP 502: upstream down", "")


def test_lists_without_items_or_metadata_are_empty() -> None:
    assert canned(200, "OK", {"kind": "List", "items": None}).list_meta("v1", "Pod", "spectrn") == ([], "")
    assert canned(200, "OK", {"kind": "List"}).list_meta("v1", "Pod", "spectrn") == ([], "")
    assert canned(200, "OK", {"kind": "EventList", "items": None}).events_for("Pod", "p", "spectrn") == []


def test_the_api_versions_are_what_discovery_lists() -> None:
    kube = canned(200, "OK", {"kind": "APIVersions", "versions": []})
    assert kube.api_versions() == set()
    kube = canned(200, "OK", {"versions": ["v1"], "groups": [{"name": "x", "versions": None}]})
    assert kube.api_versions() == {"v1"}


def test_discovery_of_a_group_without_resources_finds_no_kind() -> None:
    with pytest.raises(KubeApiError) as err:
        canned(200, "OK", {"kind": "APIResourceList", "resources": None}).list("example.com/v1", "Widget", "ns")
    assert err.value.message == "the cluster serves no kind Widget in example.com/v1"


def test_an_unreachable_server_is_named_with_the_action() -> None:
    api = recording_client("http://127.0.0.1:9")  # discard port: nothing listens
    api.configuration.retries = 0
    try:
        with pytest.raises(KubeApiError) as err:
            RealKube(api_client=api).list("v1", "Node")
    finally:
        api.close()
    e = err.value
    assert (e.status, e.reason, e.hint) == (0, "ConnectionError", CONNECTION_HINT)
    prefix = "list Node in the cluster: cannot reach the Kubernetes API server at http://127.0.0.1:9: MaxRetryError: "
    assert e.message.startswith(prefix), e.message
