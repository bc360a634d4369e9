"""The API errors' hints and details, and the HTTP requests ``RealKube`` sends (issue 29's audit).

Expected hints are the texts a user reads, written out here; requests are read back from the local API server
double as sent on the wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from doubles.mock_apiserver import MockApiServer
from spectrn.kube.api import api_error
from spectrn.kube.client import RealKube


def status(code: int, reason: str, message: str, **extra: Any) -> str:
    return json.dumps(
        {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message, **extra}
    )


def test_any_server_failure_from_500_up_says_the_api_server_failed() -> None:
    e = api_error(
        500, "Internal Server Error", status(500, "InternalError", "etcdserver: request timed out"), action="a"
    )
    assert e.message == "a: HTTP 500 InternalError: etcdserver: request timed out"
    assert e.hint == "the API server failed: check the cluster's health and re-run"


def test_a_write_into_a_terminating_namespace_says_to_wait_for_it() -> None:
    msg = (
        'deployments.apps "x" is forbidden: unable to create new content in namespace spectrn because it is being '
        "terminated"
    )
    e = api_error(403, "Forbidden", status(403, "Forbidden", msg), action="apply Deployment spectrn/x")
    assert e.hint == (
        "the namespace is being deleted (Terminating): wait until `kubectl get namespace` no longer lists it, "
        "then re-run"
    )
    plain = api_error(403, "Forbidden", status(403, "Forbidden", "deployments.apps is forbidden"), action="a")
    assert plain.hint is not None and plain.hint.startswith("ask a cluster admin for the RBAC permissions")


def test_a_field_the_cluster_does_not_know_says_re_running_cannot_help() -> None:
    """apimachinery answers an apply of an undeclared field with a plain 500 ("failed to create typed patch
    object"), not a 422."""
    msg = "failed to create typed patch object (/v1, Kind=Pod): .spec.resourceClaims: field not declared in schema"
    e = api_error(500, "Internal Server Error", status(500, "", msg), action="a")
    assert e.reason == "Internal Server Error"  # the server sent no reason: the HTTP phrase stands
    assert e.hint is not None and e.hint.startswith("the cluster's API does not know a field of this object")
    assert e.hint.endswith("re-running cannot help")


def test_the_causes_keep_reason_message_and_field() -> None:
    details = {
        "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value: -1", "field": "spec.replicas", "extra": "x"}
        ]
    }
    e = api_error(422, "Unprocessable Entity", status(422, "Invalid", "invalid", details=details), action="a")
    assert e.causes == [{"reason": "FieldValueInvalid", "message": "Invalid value: -1", "field": "spec.replicas"}]


# ---- RealKube's requests -------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[MockApiServer]:
    with MockApiServer() as s:
        yield s


@pytest.fixture
def kube(server: MockApiServer) -> Iterator[RealKube]:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = server.url
    api = client.ApiClient(cfg)
    yield RealKube(api_client=api, context="mock")
    api.close()


def test_a_persistent_volume_is_addressed_cluster_wide(kube: RealKube, server: MockApiServer) -> None:
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "spectrn-s3-spectrn"}, "spec": {}}
    kube.apply(pv)
    assert server.requests[-1].path == "/api/v1/persistentvolumes/spectrn-s3-spectrn"
    kube.delete("v1", "PersistentVolume", "spectrn-s3-spectrn", propagation="Foreground")
    assert (server.requests[-1].method, server.requests[-1].path) == (
        "DELETE",
        "/api/v1/persistentvolumes/spectrn-s3-spectrn",
    )


def test_lists_ask_for_pages_of_500(kube: RealKube, server: MockApiServer) -> None:
    kube.list("v1", "Pod", "spectrn", "app=x")
    assert server.requests[-1].query == {"labelSelector": ["app=x"], "limit": ["500"]}


def test_events_sort_by_last_seen_then_event_time_then_creation(kube: RealKube, server: MockApiServer) -> None:
    server.events = [
        {"reason": "D", "lastTimestamp": "2026-01-01T00:00:04Z", "eventTime": "2026-01-01T00:00:00.000000Z"},
        {"reason": "C", "metadata": {"creationTimestamp": "2026-01-01T00:00:03Z"}},
        {"reason": "E", "lastTimestamp": None, "eventTime": "2026-01-01T00:00:03.500000Z",
         "metadata": {"creationTimestamp": "2026-01-01T00:00:01Z"}},
        {"reason": "B", "lastTimestamp": "2026-01-01T00:00:02Z"},
        {"reason": "A", "lastTimestamp": None, "eventTime": "2026-01-01T00:00:01.000000Z",
         "metadata": {"creationTimestamp": "2026-01-01T00:00:05Z"}},
        {"reason": "0"},  # no time at all (a hand-made object): first, as the oldest
    ]  # fmt: skip
    # D was last seen at :04 (its first occurrence, eventTime :00, does not count); A and E (events.k8s.io/v1:
    # no lastTimestamp) by their eventTime, not their creation; E at :03.5 after C at :03, though as text
    # "03.500000Z" sorts before "03Z"
    assert [e["reason"] for e in kube.events_for("Pod", "p", "spectrn")] == ["0", "A", "B", "C", "E", "D"]
