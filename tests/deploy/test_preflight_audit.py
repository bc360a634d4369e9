"""Pre-flight's capacity arithmetic, permission checks and configuration findings on hand-written objects (issue
29's audit): every expected count is worked out in the test from the objects it writes."""

from __future__ import annotations

from typing import Any

from doubles.kube_fake import FakeKube
from doubles.kubehelp import add_slices, make_cfg
from spectrn.deploy.plan import Plan, PlanItem
from spectrn.deploy.preflight import Finding, config_findings, preflight

Obj = dict[str, Any]
NS = "spectrn"
OURS = {"app.kubernetes.io/managed-by": "spectrn"}
NEURON = "aws.amazon.com/neuron"


def deployment(name: str, *, devices: int = 0, replicas: int = 1, claim: str = "") -> Obj:
    container: Obj = {"name": "server", "image": "x"}
    if devices:
        container["resources"] = {"limits": {NEURON: str(devices)}}
    pod: Obj = {"containers": [container]}
    if claim:
        pod["resourceClaims"] = [{"name": "neuron", "resourceClaimTemplateName": claim}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "labels": dict(OURS)},
        "spec": {"replicas": replicas, "template": {"spec": pod}},
    }


def claim_template(name: str, request: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def capacity(fake: FakeKube, objects: list[Obj], runtime: str = "neuron") -> list[Finding]:
    cfg = make_cfg(runtime=runtime) if runtime == "sim" else make_cfg()
    found = preflight(fake, cfg, Plan([PlanItem(o, "create") for o in objects]))
    return [f for f in found if f.check == "capacity"]


def test_dra_capacity_counts_each_replica_and_a_request_without_count_as_one_device() -> None:
    fake = FakeKube()
    add_slices(fake, devices=16)
    objects = [
        claim_template("four", {"name": "n", "exactly": {"deviceClassName": "neuron.aws.com", "count": 4}}),
        claim_template("one", {"name": "n", "exactly": {"deviceClassName": "neuron.aws.com"}}),
        deployment("big", replicas=2, claim="four"),  # 2 pods x 4 devices
        deployment("small", claim="one"),  # 1 pod x 1 device
    ]
    # want = 8 + 1 = 9; 16 devices on one node
    assert capacity(fake, objects) == [Finding("capacity", "ok", "16 Neuron devices on 1 node(s) for 9 requested")]


def test_dra_capacity_ignores_other_drivers_devices() -> None:
    fake = FakeKube()
    add_slices(fake, node="node-0", devices=8)
    fake.put(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "node-1-gpu"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "node-1",
                "devices": [{"name": f"g{i}"} for i in range(16)],
            },
        }
    )
    objects = [claim_template("eight", {"name": "n", "exactly": {"count": 8}}), deployment("d", claim="eight")]
    assert capacity(fake, objects) == [Finding("capacity", "ok", "8 Neuron devices on 1 node(s) for 8 requested")]


def test_exactly_enough_devices_is_enough() -> None:
    """One node with 8 devices, one pod asking for 8: the largest node fits the pod, the cluster holds the total
    and all 8 are free."""
    fake = FakeKube(nodes=1, neuron_per_node=8)
    assert capacity(fake, [deployment("d", devices=8)], "sim") == [
        Finding("capacity", "ok", "8 Neuron devices on 1 node(s) for 8 requested")
    ]


def pod(name: str, resources: Obj, *, phase: str = "Running", labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "other", "labels": dict(labels or {})},
        "spec": {"containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


def test_free_devices_count_only_other_running_workloads() -> None:
    fake = FakeKube(nodes=1, neuron_per_node=16)
    fake.put(pod("spectrn-old", {"limits": {NEURON: "8"}}, labels=OURS))  # spectrn's own: replaced by this deploy
    fake.put(pod("finished", {"limits": {NEURON: "8"}}, phase="Succeeded"))  # holds nothing any more
    fake.put(pod("training", {"requests": {NEURON: "4"}}))  # requests only: still 4 devices
    # 16 - 4 = 12 free, the services need 16
    assert capacity(fake, [deployment("d", devices=16)], "sim") == [
        Finding(
            "capacity",
            "warn",
            "16 Neuron devices in the cluster but only 12 free of other workloads; the services need 16",
            "free devices or the pods will stay Pending",
        )
    ]


class AskingKube(FakeKube):
    """The fake, remembering every access review pre-flight asks for."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.asked: list[tuple[str, str, str, str | None, str]] = []

    def can_i(
        self, verb: str, resource: str, *, group: str = "", namespace: str | None = None, subresource: str = ""
    ) -> bool:
        self.asked.append((verb, resource, group, namespace, subresource))
        return super().can_i(verb, resource, group=group, namespace=namespace, subresource=subresource)


def test_permissions_are_asked_per_resource_group_and_scope() -> None:
    fake = AskingKube()
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": NS}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {}},
        deployment("a"),
        deployment("b"),  # same resource: asked once
    ]
    fake.deny("patch", "persistentvolumes")
    found = preflight(fake, make_cfg(runtime="sim"), Plan([PlanItem(o, "create") for o in objects]))
    assert fake.asked == [
        ("create", "namespaces", "", None, ""),
        ("patch", "serviceaccounts", "", NS, ""),
        ("delete", "serviceaccounts", "", NS, ""),
        ("patch", "persistentvolumes", "", None, ""),
        ("delete", "persistentvolumes", "", None, ""),
        ("patch", "deployments", "apps", NS, ""),
        ("delete", "deployments", "apps", NS, ""),
        ("list", "pods", "", NS, ""),
        ("get", "pods", "", NS, "log"),
        ("list", "events", "", NS, ""),
    ]
    (denied,) = [f for f in found if f.check == "permissions"]
    assert denied == Finding(
        "permissions",
        "error",
        "missing permissions in namespace 'spectrn': patch persistentvolumes (cluster)",
        "ask a cluster admin to bind the spectrn-user Role from docs/kubernetes.md",
    )


def test_an_existing_namespace_needs_no_permission_to_create_namespaces() -> None:
    fake = AskingKube()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    preflight(fake, make_cfg(runtime="sim"), Plan([PlanItem(ns, "keep")]))
    assert ("create", "namespaces", "", None, "") not in fake.asked


def test_the_placeholder_bucket_is_an_error_before_anything_is_applied() -> None:
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv"},
        "spec": {"csi": {"driver": "s3.csi.aws.com", "volumeAttributes": {"bucketName": "REPLACE-WITH-YOUR-BUCKET"}}},
    }
    assert config_findings(make_cfg(), [pv]) == [
        Finding(
            "storage",
            "error",
            "s3.bucket is still the placeholder 'REPLACE-WITH-YOUR-BUCKET': the model volume would mount a bucket "
            "that is not yours",
            "set s3.bucket in spectrn.yaml (or --set s3.bucket=NAME) to the bucket holding the model weights",
        )
    ]
    pv["spec"]["csi"]["volumeAttributes"]["bucketName"] = "my-models"
    assert config_findings(make_cfg(), [pv]) == []


def test_each_replica_must_fit_on_a_node_not_all_of_them_on_one() -> None:
    """Two replicas of 8 devices on two 8-device nodes: each pod fits a node, the cluster holds 2 x 8 = 16.
    (Pre-flight once asked one node for all 16, the Deployment's total, and refused this cluster.)"""
    fake = FakeKube(nodes=2, neuron_per_node=8)
    assert capacity(fake, [deployment("d", devices=8, replicas=2)], "sim") == [
        Finding("capacity", "ok", "16 Neuron devices on 2 node(s) for 16 requested")
    ]
