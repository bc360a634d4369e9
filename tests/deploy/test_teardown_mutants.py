"""Teardown at its edges: the exact requests it sends (versions, namespaces, label selectors), which of the user's
objects keep spectrn's namespace (every kind, past the ones it skips, when a list is refused), a namespace already
Terminating, another namespace left alone, a cluster without the ``resource.k8s.io/v1`` API; and the wait for a
deleted namespace: its watch, when it polls instead, and the whole message and hint when the namespace stays.

Objects are written by hand; every expected list, request and message is written out in the test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from doubles.kube_fake import DEFAULT_VERSIONS, FakeKube
from doubles.kubehelp import make_cfg
from spectrn.deploy.teardown import teardown, wait_namespace_gone
from spectrn.errors import DeployError
from spectrn.kube.api import KubeApi, KubeApiError, Propagation

Obj = dict[str, Any]
NS = "spectrn"
OURS = {"app.kubernetes.io/managed-by": "spectrn"}
MANAGED = "app.kubernetes.io/managed-by=spectrn"


def namespace(fake: FakeKube, name: str = NS, labels: dict[str, str] | None = None, **meta: Any) -> None:
    labels = dict(OURS) if labels is None else labels
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels, **meta}})


def obj(
    api_version: str, kind: str, name: str, labels: dict[str, str] | None = None, ns: str = NS, **fields: Any
) -> Obj:
    meta = fields.pop("metadata", {})
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {}), **meta},
        **fields,
    }


class RequestLog(FakeKube):
    """The fake, recording each get, list, delete and watch with every argument as sent."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.requests: list[tuple[Any, ...]] = []

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self.requests.append(("get", api_version, kind, name, namespace))
        return super().get(api_version, kind, name, namespace)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        self.requests.append(("list", api_version, kind, namespace, label_selector))
        return super().list(api_version, kind, namespace, label_selector)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> bool:
        self.requests.append(("delete", api_version, kind, name, namespace, propagation))
        return super().delete(api_version, kind, name, namespace, propagation)


# ---- the requests a teardown sends ---------------------------------------------------------------


def test_a_teardown_sends_exactly_these_requests() -> None:
    fake = RequestLog()
    namespace(fake)
    fake.put(obj("v1", "ConfigMap", "spectrn-prompts", OURS))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.deleted == ["ConfigMap spectrn/spectrn-prompts", "Namespace spectrn"]
    assert fake.requests == [
        ("list", "batch/v1", "Job", "spectrn", MANAGED),
        ("list", "apps/v1", "Deployment", "spectrn", MANAGED),
        ("list", "v1", "Service", "spectrn", MANAGED),
        ("list", "v1", "Pod", "spectrn", MANAGED),
        ("list", "resource.k8s.io/v1", "ResourceClaimTemplate", "spectrn", MANAGED),
        ("list", "resource.k8s.io/v1beta1", "ResourceClaimTemplate", "spectrn", MANAGED),
        ("list", "v1", "ConfigMap", "spectrn", MANAGED),
        ("list", "v1", "PersistentVolumeClaim", "spectrn", MANAGED),
        ("list", "v1", "ServiceAccount", "spectrn", MANAGED),
        ("list", "v1", "PersistentVolume", None, "app.kubernetes.io/managed-by=spectrn,spectrn.io/namespace=spectrn"),
        ("delete", "v1", "ConfigMap", "spectrn-prompts", "spectrn", "Foreground"),
        ("get", "v1", "Namespace", "spectrn", None),
        # what else the namespace holds: every object of these kinds, whoever made it
        ("list", "apps/v1", "Deployment", "spectrn", None),
        ("list", "apps/v1", "StatefulSet", "spectrn", None),
        ("list", "batch/v1", "Job", "spectrn", None),
        ("list", "v1", "Pod", "spectrn", None),
        ("list", "v1", "Service", "spectrn", None),
        ("list", "v1", "ConfigMap", "spectrn", None),
        ("list", "v1", "Secret", "spectrn", None),
        ("list", "v1", "PersistentVolumeClaim", "spectrn", None),
        ("list", "v1", "ServiceAccount", "spectrn", None),
        ("delete", "v1", "Namespace", "spectrn", None, "Foreground"),
    ]


def test_another_namespace_is_left_alone_and_does_not_keep_ours() -> None:
    """Another deploy's namespace holds a spectrn ConfigMap of the same name, and a user's ConfigMap."""
    fake = FakeKube()
    namespace(fake)
    namespace(fake, "other")
    fake.put(obj("v1", "ConfigMap", "spectrn-prompts", OURS, ns="other"))
    fake.put(obj("v1", "ConfigMap", "settings", ns="other"))
    fake.put(obj("v1", "ConfigMap", "spectrn-prompts", OURS))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert (result.deleted, result.kept) == (["ConfigMap spectrn/spectrn-prompts", "Namespace spectrn"], [])
    assert fake.find("ConfigMap", "spectrn-prompts", "other") is not None
    assert fake.find("ConfigMap", "settings", "other") is not None


def test_a_cluster_without_resource_k8s_io_v1_still_loses_every_later_kind() -> None:
    """Only the beta DRA API is served: the v1 ResourceClaimTemplate list is skipped, nothing after it."""
    fake = FakeKube(api_versions=DEFAULT_VERSIONS - {"resource.k8s.io/v1"})
    namespace(fake)
    fake.put(obj("resource.k8s.io/v1beta1", "ResourceClaimTemplate", "spectrn-neuron-8", OURS))
    fake.put(obj("v1", "ConfigMap", "spectrn-prompts", OURS))
    fake.put(obj("v1", "ServiceAccount", "spectrn-vllm", OURS))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.deleted == [
        "ResourceClaimTemplate spectrn/spectrn-neuron-8",
        "ConfigMap spectrn/spectrn-prompts",
        "ServiceAccount spectrn/spectrn-vllm",
        "Namespace spectrn",
    ]


def test_a_namespace_already_terminating_is_kept_and_named() -> None:
    fake = FakeKube()
    namespace(fake, deletionTimestamp="2026-01-01T00:00:00Z")
    result = teardown(fake, make_cfg(runtime="sim"))
    assert (result.deleted, result.kept, result.terminating) == (
        [],
        ["Namespace spectrn (already being deleted: Terminating)"],
        "spectrn",
    )


# ---- which objects keep the namespace -------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_version", "kind", "name"),
    [
        ("apps/v1", "Deployment", "web"),
        ("apps/v1", "StatefulSet", "db"),
        ("batch/v1", "Job", "train"),
        ("v1", "Pod", "debug"),
        ("v1", "Service", "web"),
        ("v1", "ConfigMap", "settings"),
        ("v1", "Secret", "hf-token"),
        ("v1", "PersistentVolumeClaim", "data"),
        ("v1", "ServiceAccount", "ci"),
    ],
)
def test_each_kind_of_user_object_keeps_the_namespace(api_version: str, kind: str, name: str) -> None:
    fake = FakeKube()
    namespace(fake)
    fake.put(obj(api_version, kind, name))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert (result.deleted, result.kept) == ([], [f"Namespace spectrn (also holds {kind} {name})"])


def test_a_user_object_with_an_owner_still_keeps_the_namespace() -> None:
    """Only pods are skipped for having an owner (they go with it); a ConfigMap a user's operator owns stays."""
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("v1", "ConfigMap", "settings", metadata={"ownerReferences": [{"kind": "Widget", "name": "w"}]}))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.kept == ["Namespace spectrn (also holds ConfigMap settings)"]


def test_users_objects_listed_after_skipped_ones_are_still_named() -> None:
    """Within each kind the skipped object comes first (lists are by name): a default ConfigMap, an owned pod, a
    service account token; the user's object after it must still keep the namespace."""
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("v1", "ConfigMap", "kube-root-ca.crt"))
    fake.put(obj("v1", "ConfigMap", "settings"))
    fake.put(obj("v1", "Pod", "db-0", metadata={"ownerReferences": [{"kind": "StatefulSet", "name": "db"}]}))
    fake.put(obj("v1", "Pod", "debug"))
    fake.put(obj("v1", "Secret", "default-token-abcde", type="kubernetes.io/service-account-token"))
    fake.put(obj("v1", "Secret", "hf-token", type="Opaque"))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.kept == ["Namespace spectrn (also holds Pod debug, ConfigMap settings, Secret hf-token)"]


def test_an_object_with_spectrns_label_of_a_kind_teardown_does_not_delete_does_not_keep_the_namespace() -> None:
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("v1", "Secret", "spectrn-cache", OURS, type="Opaque"))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert (result.deleted, result.kept) == (["Namespace spectrn"], [])


def test_a_kind_teardown_cannot_list_is_named_and_the_later_kinds_are_still_looked_at() -> None:
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("v1", "PersistentVolumeClaim", "data"))
    fake.fail_next("list", kind="Secret", status=403, reason="Forbidden", message="cannot list secrets")
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.kept == ["Namespace spectrn (also holds Secrets (cannot list), PersistentVolumeClaim data)"]


# ---- teardown's wait for the namespace ------------------------------------------------------------


def test_teardown_waits_with_the_clock_and_sleep_it_is_given_polling_every_five_seconds() -> None:
    """The first watch is refused: the wait sleeps one poll interval (5 s) through the given sleep, then
    watches again and sees the namespace go."""
    fake = FakeKube()
    namespace(fake)
    fake.fail_next("watch", kind="Namespace", status=403, reason="Forbidden", message="cannot watch")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        fake.sleep(seconds)

    result = teardown(fake, make_cfg(runtime="sim"), wait_s=600, clock=fake.clock, sleep=sleep)
    assert (result.deleted, result.terminating) == (["Namespace spectrn"], None)
    assert slept == [5.0]
    assert fake.find("Namespace", NS) is None


def test_teardown_measures_the_wait_on_the_clock_it_is_given() -> None:
    """The given clock reads 100 s elapsed at the first look: the wait gives up at once, before any watch."""
    fake = FakeKube()
    namespace(fake)
    fake.fail_next("watch", kind="Namespace", status=400, reason="BadRequest", message="no watch expected")
    readings = iter([0.0, 100.0])
    with pytest.raises(DeployError) as err:
        teardown(fake, make_cfg(runtime="sim"), wait_s=30, clock=lambda: next(readings), sleep=fake.sleep)
    assert err.value.message == "namespace spectrn is still Terminating after 30 s"


# ---- wait_namespace_gone ------------------------------------------------------------------------------


TERMINATING = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": NS, "resourceVersion": "41", "deletionTimestamp": "2026-01-01T00:00:00Z"},
    "status": {"phase": "Terminating"},
}


def event(etype: str, name: str) -> tuple[str, Obj]:
    return etype, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


class ScriptedNamespace:
    """A cluster whose namespace ``spectrn`` is Terminating for ``gets`` gets, then gone; each watch serves the
    next scripted stream. Every request is recorded, and each event as the wait consumes it."""

    def __init__(self, gets: int, streams: list[list[tuple[str, Obj]]]) -> None:
        self.gets_left = gets
        self.streams = streams
        self.requests: list[tuple[Any, ...]] = []
        self.consumed: list[str] = []

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self.requests.append(("get", api_version, kind, name, namespace))
        if self.gets_left == 0:
            return None
        self.gets_left -= 1
        return dict(TERMINATING)

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_s: float = 30,
    ) -> Iterator[tuple[str, Obj]]:
        self.requests.append(("watch", api_version, kind, namespace, label_selector, resource_version, timeout_s))
        for etype, o in self.streams.pop(0):
            self.consumed.append(f"{etype} {o['metadata']['name']}")
            yield etype, o


def test_the_wait_watches_namespaces_from_the_namespaces_version_and_stops_at_its_deletion() -> None:
    kube = ScriptedNamespace(
        gets=5,
        streams=[
            [
                event("MODIFIED", NS),
                event("DELETED", "other"),
                event("DELETED", NS),
                event("ADDED", "later"),
            ]
        ],
    )
    wait_namespace_gone(cast(KubeApi, kube), NS, timeout_s=600, clock=lambda: 0.0, sleep=lambda s: None)
    assert kube.requests == [
        ("get", "v1", "Namespace", "spectrn", None),
        ("watch", "v1", "Namespace", None, None, "41", 5.0),
    ]
    assert kube.consumed == ["MODIFIED spectrn", "DELETED other", "DELETED spectrn"]


def test_a_watch_that_ends_without_the_deletion_looks_again() -> None:
    kube = ScriptedNamespace(gets=1, streams=[[event("MODIFIED", NS)]])
    wait_namespace_gone(cast(KubeApi, kube), NS, timeout_s=600, clock=lambda: 0.0, sleep=lambda s: None, poll_s=2)
    assert kube.requests == [
        ("get", "v1", "Namespace", "spectrn", None),
        ("watch", "v1", "Namespace", None, None, "41", 2),
        ("get", "v1", "Namespace", "spectrn", None),
    ]


@pytest.mark.parametrize("status", [0, 403, 429, 500, 503])
def test_a_refused_or_failed_watch_falls_back_to_polling(status: int) -> None:
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("v1", "ConfigMap", "left"))
    fake.delete("v1", "Namespace", NS)
    fake.fail_next("watch", kind="Namespace", status=status, reason="Whatever", message="watch failed")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        fake.sleep(seconds)

    wait_namespace_gone(fake, NS, timeout_s=600, clock=fake.clock, sleep=sleep, poll_s=5)
    assert slept == [5]
    assert fake.find("Namespace", NS) is None


def test_a_watch_refused_as_a_bad_request_is_raised() -> None:
    fake = FakeKube()
    namespace(fake)
    fake.delete("v1", "Namespace", NS)
    fake.fail_next("watch", kind="Namespace", status=400, reason="BadRequest", message="bad")
    with pytest.raises(KubeApiError) as err:
        wait_namespace_gone(fake, NS, timeout_s=600, clock=fake.clock, sleep=fake.sleep, poll_s=5)
    assert err.value.status == 400


def test_an_expired_watch_is_started_again_and_the_wait_goes_on_until_the_namespace_is_gone() -> None:
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("v1", "ConfigMap", "left"))
    fake.delete("v1", "Namespace", NS)
    fake.fail_next("watch", kind="Namespace", status=410, reason="Expired", message="too old resource version")
    wait_namespace_gone(fake, NS, timeout_s=600, clock=fake.clock, sleep=fake.sleep, poll_s=5)
    assert fake.find("Namespace", NS) is None


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        (
            [{"type": "NamespaceContentRemaining", "status": "False", "reason": "ContentDeleted"}],
            "namespace spectrn is still Terminating after 30 s",
        ),
        (
            [{"type": "NamespaceContentRemaining", "status": "True"}],
            "namespace spectrn is still Terminating after 30 s (NamespaceContentRemaining)",
        ),
        (
            [{"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain"}],
            "namespace spectrn is still Terminating after 30 s (NamespaceContentRemaining: SomeResourcesRemain)",
        ),
        (
            [
                {"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain"},
                {
                    "type": "NamespaceFinalizersRemaining",
                    "status": "True",
                    "reason": "SomeFinalizersRemain",
                    "message": "finalizer example.com/keep-X",
                },
            ],
            "namespace spectrn is still Terminating after 30 s (NamespaceContentRemaining: SomeResourcesRemain; "
            "NamespaceFinalizersRemaining: finalizer example.com/keep-X)",
        ),
    ],
)
def test_a_namespace_that_stays_is_reported_whole(conditions: list[dict[str, str]], message: str) -> None:
    fake = FakeKube()
    namespace(fake, deletionTimestamp="2026-01-01T00:00:00Z")
    ns = fake.find("Namespace", NS)
    assert ns is not None
    ns["status"] = {"phase": "Terminating", "conditions": conditions}
    fake.fail_next("watch", kind="Namespace", status=403, reason="Forbidden", message="cannot watch", times=99)
    fake.tick = lambda: None  # type: ignore[method-assign]  # nothing ever removes it
    with pytest.raises(DeployError) as err:
        wait_namespace_gone(fake, NS, timeout_s=30, clock=fake.clock, sleep=fake.sleep, poll_s=5)
    assert err.value.message == message
    assert err.value.hint == (
        "something holds it (finalizers of its objects, an unavailable API service): see "
        "`kubectl get namespace spectrn -o yaml`; then re-run"
    )
