"""``RealKube`` over real HTTP (and WebSocket, for exec) against a local API server double, and the
translation of API errors."""

from __future__ import annotations

import json

import pytest

from doubles.mock_apiserver import MockApiServer
from spectrn.kube.api import KubeApiError, api_error, translate_api_exception
from spectrn.kube.client import RealKube


@pytest.fixture
def server():
    with MockApiServer() as s:
        yield s


@pytest.fixture
def kube(server):
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = server.url
    cfg.api_key = {"authorization": "t0ken-for-tests"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    api = client.ApiClient(cfg)
    yield RealKube(api_client=api, context="mock")
    api.close()


DEP = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "qwen-vllm", "namespace": "spectrn", "labels": {"app.kubernetes.io/managed-by": "spectrn"}},
    "spec": {"replicas": 1},
}


def test_apply_is_server_side_apply_with_field_manager_and_force(kube, server):
    live = kube.apply(DEP)
    assert live["metadata"]["resourceVersion"]
    req = server.requests[-1]
    assert (req.method, req.path) == ("PATCH", "/apis/apps/v1/namespaces/spectrn/deployments/qwen-vllm")
    assert req.query == {"fieldManager": ["spectrn"], "force": ["true"]}
    assert req.headers["content-type"] == "application/apply-patch+yaml"
    assert req.headers["authorization"] == "Bearer t0ken-for-tests"
    assert req.body == DEP


def test_apply_dry_run_asks_the_server_not_to_persist(kube, server):
    kube.apply(DEP, dry_run=True)
    assert server.requests[-1].query["dryRun"] == ["All"]


def test_get_returns_none_when_missing(kube, server):
    assert kube.get("apps/v1", "Deployment", "nope", "spectrn") is None
    kube.apply(DEP)
    assert kube.get("apps/v1", "Deployment", "qwen-vllm", "spectrn")["spec"] == {"replicas": 1}


def test_list_follows_continue_tokens_and_restores_kind(kube, server):
    for i in range(5):
        kube.apply({**DEP, "metadata": {**DEP["metadata"], "name": f"d{i}"}})
    items, rv = kube.list_meta("apps/v1", "Deployment", "spectrn", "app.kubernetes.io/managed-by=spectrn")
    assert [o["metadata"]["name"] for o in items] == [f"d{i}" for i in range(5)]
    assert all(o["kind"] == "Deployment" and o["apiVersion"] == "apps/v1" for o in items)
    lists = [r for r in server.requests if r.method == "GET" and r.path.endswith("/deployments")]
    assert len(lists) == 3  # 2 + 2 + 1
    assert lists[0].query["labelSelector"] == ["app.kubernetes.io/managed-by=spectrn"]
    assert rv == str(server.rv)


def test_delete_sends_propagation_and_reports_absence(kube, server):
    kube.apply(DEP)
    assert kube.delete("apps/v1", "Deployment", "qwen-vllm", "spectrn", propagation="Foreground") is True
    assert server.requests[-1].body["propagationPolicy"] == "Foreground"
    assert kube.delete("apps/v1", "Deployment", "qwen-vllm", "spectrn") is False


def test_forbidden_keeps_the_servers_message(kube, server):
    server.forbidden.add("qwen-vllm")
    with pytest.raises(KubeApiError) as err:
        kube.apply(DEP)
    e = err.value
    assert e.status == 403 and e.reason == "Forbidden"
    assert 'User "dev" cannot patch resource "deployments"' in e.message
    assert "apply Deployment spectrn/qwen-vllm" in e.message
    assert "RBAC" in e.hint


def test_unknown_kinds_are_resolved_through_discovery(kube, server):
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "spectrn"}}
    kube.apply(widget)
    assert server.requests[-1].path == "/apis/example.com/v1/namespaces/spectrn/widgets/w"
    with pytest.raises(KubeApiError, match="serves no kind Gadget"):
        kube.list("example.com/v1", "Gadget", "spectrn")
    assert kube.get("example.com/v1", "Gadget", "g", "spectrn") is None  # like any 404


def test_watch_streams_events_and_raises_gone(kube, server):
    pod = {"metadata": {"name": "p", "resourceVersion": "12"}}
    server.watch_events = [{"type": "ADDED", "object": pod}, {"type": "MODIFIED", "object": pod}]
    events = list(kube.watch("v1", "Pod", "spectrn", "a=b", resource_version="11", timeout_s=3))
    assert [t for t, _ in events] == ["ADDED", "MODIFIED"]
    q = server.requests[-1].query
    assert q["watch"] == ["true"] and q["resourceVersion"] == ["11"] and q["timeoutSeconds"] == ["3"]
    server.watch_events = [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "code": 410,
                "reason": "Expired",
                "message": "too old resource version: 11 (40)",
            },
        }
    ]
    with pytest.raises(KubeApiError) as err:
        list(kube.watch("v1", "Pod", "spectrn"))
    assert err.value.gone and "too old resource version" in err.value.message


def test_pod_logs_tail_and_previous(kube, server):
    server.logs["/api/v1/namespaces/spectrn/pods/p/log"] = "a\nb\nc\n"
    assert kube.pod_logs("p", "spectrn", tail_lines=2, previous=True, container="server") == "b\nc\n"
    assert server.requests[-1].query == {"container": ["server"], "tailLines": ["2"], "previous": ["true"]}


def test_events_for_uses_a_field_selector_and_sorts(kube, server):
    server.events = [
        {"reason": "B", "lastTimestamp": "2026-01-01T00:00:02Z"},
        {"reason": "A", "lastTimestamp": "2026-01-01T00:00:01Z"},
    ]
    assert [e["reason"] for e in kube.events_for("Pod", "p", "spectrn")] == ["A", "B"]
    assert server.requests[-1].query["fieldSelector"] == ["involvedObject.kind=Pod,involvedObject.name=p"]


def test_exec_returns_binary_stdout_across_frames(kube, server):
    payload = bytes(range(256)) * 40  # 10 kB of every byte value: a tar stream must arrive intact

    def handler(command):
        if command[:2] == ["tar", "cf"]:
            return payload, b"", 0
        return b"", b"cat: /results/x/run.json: No such file or directory\n", 1

    server.exec_handler = handler
    out = kube.exec("load-0", "spectrn", ["tar", "cf", "-", "-C", "/results/x", "."], container="load")
    assert out == payload
    req = next(r for r in server.requests if r.path.endswith("/exec"))
    assert req.path == "/api/v1/namespaces/spectrn/pods/load-0/exec"
    assert req.query["command"] == ["tar", "cf", "-", "-C", "/results/x", "."]
    assert req.query["container"] == ["load"] and req.query["stdout"] == ["true"]
    with pytest.raises(KubeApiError) as err:
        kube.exec("load-0", "spectrn", ["cat", "/results/x/run.json"])
    assert err.value.reason == "ExecFailed" and "exit status 1" in err.value.message
    assert "No such file or directory" in err.value.message


def test_discovery_and_access_review(kube, server):
    assert kube.api_versions() == {"v1", "apps/v1", "resource.k8s.io/v1beta1"}
    assert kube.can_i("patch", "deployments", group="apps", namespace="spectrn") is True
    assert kube.can_i("delete", "deployments", group="apps", namespace="spectrn") is False
    attrs = server.requests[-1].body["spec"]["resourceAttributes"]
    assert attrs == {"verb": "delete", "resource": "deployments", "group": "apps", "namespace": "spectrn"}


def test_node_status_patch_is_a_json_patch_on_the_status_subresource(kube, server):
    kube.patch_node_status("kind-control-plane", [{"op": "add", "path": "/status/capacity/x", "value": "1"}])
    req = server.requests[-1]
    assert req.path == "/api/v1/nodes/kind-control-plane/status"
    assert req.headers["content-type"] == "application/json-patch+json"
    assert isinstance(req.body, list)


def test_unreachable_server_names_the_host_and_the_next_step():
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:9"  # discard port: nothing listens
    cfg.retries = 0
    api = client.ApiClient(cfg)
    try:
        with pytest.raises(KubeApiError) as err:
            RealKube(api_client=api, request_timeout_s=3).get("v1", "Namespace", "x")
    finally:
        api.close()
    assert err.value.status == 0 and "cannot reach the Kubernetes API server at http://127.0.0.1:9" in err.value.message
    assert "kube context" in err.value.hint


def test_missing_kubeconfig_is_a_clear_error(tmp_path):
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=str(tmp_path / "nope"))
    assert "--kubeconfig" in err.value.hint


# ---- error translation ---------------------------------------------------------------------------------


def test_api_exception_keeps_the_status_message():
    from kubernetes.client.exceptions import ApiException

    exc = ApiException(status=422, reason="Unprocessable Entity")
    exc.body = json.dumps(
        {
            "kind": "Status",
            "message": 'Deployment.apps "x" is invalid: spec.replicas: Invalid value: -1',
            "reason": "Invalid",
            "code": 422,
        }
    )
    e = translate_api_exception(exc, action="apply Deployment spectrn/x")
    assert e.status == 422 and e.reason == "Invalid"
    assert "spec.replicas: Invalid value: -1" in e.message and "spectrn render" in e.hint


def test_non_json_bodies_and_server_errors():
    e = api_error(502, "Bad Gateway", b"<html>upstream down</html>", action="get Pod x")
    assert "upstream down" in e.message and "cluster's health" in e.hint
    assert api_error(409, "Conflict", "", action="a").hint.startswith("another writer")


def test_transport_errors_become_connection_errors():
    e = translate_api_exception(ConnectionResetError(104, "Connection reset by peer"), action="list Pod")
    assert e.status == 0 and "Connection reset by peer" in e.message
