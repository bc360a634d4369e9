"""Teardown deletes exactly spectrn's objects, with their pods, and says exactly what it kept (issue 29's audit).

The fake cluster here holds hand-written objects; every expected list is written out in the test."""

from __future__ import annotations

from typing import Any

import pytest

from doubles.kube_fake import FakeKube, RecordingKube
from doubles.kubehelp import add_slices, make_cfg, run_deploy
from spectrn.deploy.teardown import teardown, wait_namespace_gone
from spectrn.errors import DeployError
from spectrn.kube.api import KubeApiError

Obj = dict[str, Any]
NS = "spectrn"
OURS = {"app.kubernetes.io/managed-by": "spectrn"}


def namespace(fake: FakeKube, labels: dict[str, str] | None = None) -> None:
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": dict(labels or OURS)}})


def obj(api_version: str, kind: str, name: str, labels: dict[str, str] | None = None, **meta: Any) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "labels": dict(labels or {}), **meta},
    }


def test_only_loose_pods_are_deleted_by_name_and_everything_goes_in_the_foreground() -> None:
    fake = RecordingKube()
    namespace(fake)
    fake.put(obj("apps/v1", "Deployment", "qwen-vllm", OURS))
    fake.put(obj("v1", "Pod", "qwen-vllm-abc-0", OURS, ownerReferences=[{"kind": "ReplicaSet", "name": "r"}]))
    fake.put(obj("v1", "Pod", "debug", OURS))  # a loose pod spectrn made (no owner)
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.deleted == ["Deployment spectrn/qwen-vllm", "Pod spectrn/debug", "Namespace spectrn"]
    # Foreground: the owner goes once its pods are gone (no orphaned pod keeps holding Neuron devices)
    assert fake.propagations == [
        ("Deployment", "qwen-vllm", "Foreground"),
        ("Pod", "debug", "Foreground"),
        ("Namespace", "spectrn", "Foreground"),
    ]


@pytest.mark.parametrize(
    ("foreign", "kept"),
    [
        (
            5,
            "Namespace spectrn (also holds ConfigMap user-0, ConfigMap user-1, ConfigMap user-2, ConfigMap user-3, "
            "ConfigMap user-4)",
        ),
        (
            6,
            "Namespace spectrn (also holds ConfigMap user-0, ConfigMap user-1, ConfigMap user-2, ConfigMap user-3, "
            "ConfigMap user-4 ...)",
        ),
    ],
)
def test_the_kept_namespace_names_at_most_five_of_the_users_objects(foreign: int, kept: str) -> None:
    fake = FakeKube()
    namespace(fake)
    for i in range(foreign):
        fake.put(obj("v1", "ConfigMap", f"user-{i}"))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.kept == [kept]
    assert result.deleted == []


def test_every_namespaces_defaults_do_not_keep_it() -> None:
    """Kubernetes puts the kube-root-ca.crt ConfigMap and the default ServiceAccount into every namespace."""
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("v1", "ConfigMap", "kube-root-ca.crt"))
    fake.put(obj("v1", "ServiceAccount", "default"))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert (result.deleted, result.kept) == (["Namespace spectrn"], [])


def test_a_users_statefulset_keeps_the_namespace_and_its_pods_are_not_listed() -> None:
    fake = FakeKube()
    namespace(fake)
    fake.put(obj("apps/v1", "StatefulSet", "db"))
    fake.put(obj("v1", "Pod", "db-0", ownerReferences=[{"kind": "StatefulSet", "name": "db"}]))
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.kept == ["Namespace spectrn (also holds StatefulSet db)"]
    assert result.deleted == []
    assert fake.find("StatefulSet", "db", NS) is not None and fake.find("Pod", "db-0", NS) is not None


def test_a_dry_run_reports_the_namespace_but_leaves_nothing_terminating() -> None:
    fake = FakeKube()
    namespace(fake)
    result = teardown(fake, make_cfg(runtime="sim"), dry_run=True, wait_s=60)
    assert (result.deleted, result.kept, result.terminating) == (["Namespace spectrn"], [], None)
    assert fake.find("Namespace", NS)["status"]["phase"] == "Active"


def test_keep_namespace_keeps_it() -> None:
    fake = FakeKube()
    namespace(fake)
    result = teardown(fake, make_cfg(runtime="sim"), keep_namespace=True)
    assert (result.deleted, result.kept, result.terminating) == ([], ["Namespace spectrn (--keep-namespace)"], None)


def test_spectrns_namespace_is_deleted_and_waited_for() -> None:
    fake = FakeKube()
    run_deploy(fake, make_cfg(runtime="sim", resources_mode="device-plugin"))
    result = teardown(
        fake, make_cfg(runtime="sim", resources_mode="device-plugin"), wait_s=120, clock=fake.clock, sleep=fake.sleep
    )
    assert result.deleted[-1] == "Namespace spectrn" and result.terminating is None
    assert fake.find("Namespace", NS) is None


# ---- waiting for a namespace to go ------------------------------------------------------------------


def terminating_namespace(fake: FakeKube) -> None:
    namespace(fake)
    fake.put(obj("v1", "ConfigMap", "left"))
    fake.delete("v1", "Namespace", NS)  # Terminating; the namespace controller empties it on the next ticks


def test_the_wait_ends_when_the_namespace_is_deleted() -> None:
    fake = FakeKube()
    terminating_namespace(fake)
    start = fake.clock()
    wait_namespace_gone(fake, NS, timeout_s=600, clock=fake.clock, sleep=fake.sleep, poll_s=5)
    assert fake.find("Namespace", NS) is None
    # tick 1 removes the ConfigMap, tick 2 the namespace; each watch advances one 5 s tick
    assert fake.clock() - start == 10


def test_without_permission_to_watch_namespaces_the_wait_polls() -> None:
    fake = FakeKube()
    terminating_namespace(fake)
    fake.fail_next("watch", kind="Namespace", status=403, reason="Forbidden", message="cannot watch", times=99)
    wait_namespace_gone(fake, NS, timeout_s=600, clock=fake.clock, sleep=fake.sleep, poll_s=5)
    assert fake.find("Namespace", NS) is None


def test_a_namespace_that_stays_names_only_its_true_conditions() -> None:
    fake = FakeKube()
    namespace(fake)
    ns = fake.find("Namespace", NS)
    ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ns["status"] = {
        "phase": "Terminating",
        "conditions": [
            {"type": "NamespaceDeletionDiscoveryFailure", "status": "False", "reason": "ResourcesDiscovered"},
            {"type": "NamespaceFinalizersRemaining", "status": "True", "message": "finalizer example.com/x in 1"},
        ],
    }
    fake.fail_next("watch", kind="Namespace", status=403, reason="Forbidden", message="cannot watch", times=99)
    fake.tick = lambda: None  # type: ignore[method-assign]  # nothing ever removes the finalizer
    start = fake.clock()
    with pytest.raises(DeployError) as err:
        wait_namespace_gone(fake, NS, timeout_s=30, clock=fake.clock, sleep=fake.sleep, poll_s=5)
    assert fake.clock() - start == 30  # polled every 5 s: 0, 5, ..., 30
    assert err.value.message == (
        "namespace spectrn is still Terminating after 30 s (NamespaceFinalizersRemaining: finalizer example.com/x in 1)"
    )


def test_a_namespace_teardown_cannot_read_is_kept_and_said_so() -> None:
    fake = FakeKube()
    namespace(fake)
    fake.fail_next("get", kind="Namespace", status=403, reason="Forbidden", message="forbidden", times=9)
    result = teardown(fake, make_cfg(runtime="sim"))
    assert result.kept == ["Namespace spectrn (cannot read namespaces: forbidden)"]
    broken = FakeKube()
    namespace(broken)
    broken.fail_next("get", kind="Namespace", status=500, times=9)
    with pytest.raises(KubeApiError):
        teardown(broken, make_cfg(runtime="sim"))


def test_every_object_a_neuron_deploy_created_is_deleted_even_when_the_namespace_stays() -> None:
    """The namespace stays (it holds the user's ConfigMap), so nothing relies on the namespace controller: each of
    deploy's objects must be deleted by teardown itself, owners before what they use, the volume last."""
    fake = FakeKube()
    cfg = make_cfg()  # neuron, DRA, S3 volume
    add_slices(fake)
    run_deploy(fake, cfg)
    fake.put(obj("v1", "ConfigMap", "mine"))
    result = teardown(fake, cfg)
    assert result.deleted == [
        "Deployment spectrn/qwen-sd-vllm",
        "Deployment spectrn/qwen-vllm",
        "Service spectrn/qwen-sd-vllm",
        "Service spectrn/qwen-vllm",
        "ResourceClaimTemplate spectrn/spectrn-neuron-8",
        "ConfigMap spectrn/spectrn-prompts",
        "PersistentVolumeClaim spectrn/spectrn-s3",
        "ServiceAccount spectrn/spectrn-loadgen",
        "ServiceAccount spectrn/spectrn-vllm",
        "PersistentVolume spectrn-s3-spectrn",
    ]
    assert result.kept == ["Namespace spectrn (also holds ConfigMap mine)"]
    left = sorted((k[1], k[3]) for k in fake.objects if k[2] == NS)
    assert left == [("ConfigMap", "mine")]
