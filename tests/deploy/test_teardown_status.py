"""Teardown removes what spectrn created (by label) and nothing else; status shows both services."""

from __future__ import annotations

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.deploy.apply import apply_plan
from spectrn.deploy.kind import advertise_fake_neuron
from spectrn.deploy.plan import make_plan
from spectrn.deploy.service import render_for_deploy, status
from spectrn.deploy.teardown import teardown
from spectrn.errors import DeployError


def foreign(fake: FakeKube) -> None:
    fake.put(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "other-app", "namespace": "spectrn", "labels": {"app": "other"}},
            "spec": {"replicas": 1, "template": {"spec": {}}},
        }
    )
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "not-ours",
                "namespace": "spectrn",
                "labels": {"app.kubernetes.io/managed-by": "helm"},
            },
        }
    )


def test_teardown_deletes_spectrns_objects_and_the_namespace_it_created(fake, neuron_cfg):
    run_deploy(fake, neuron_cfg)
    result = teardown(fake, neuron_cfg)
    assert "Namespace spectrn" in result.deleted
    assert "PersistentVolume spectrn-s3-spectrn" in result.deleted
    assert not [k for k in fake.objects if k[2] == "spectrn"]
    assert fake.find("PersistentVolume", "spectrn-s3-spectrn") is None
    # cluster objects it did not create survive
    assert fake.find("Node", "node-0") is not None and fake.find("CSIDriver", "s3.csi.aws.com") is not None


def test_teardown_never_touches_other_objects_in_the_namespace(fake, sim_cfg):
    run_deploy(fake, sim_cfg)
    foreign(fake)
    result = teardown(fake, sim_cfg)
    assert fake.find("Deployment", "other-app", "spectrn") is not None
    assert fake.find("ConfigMap", "not-ours", "spectrn") is not None
    assert fake.find("Namespace", "spectrn") is not None
    assert any("also holds Deployment other-app" in k for k in result.kept)
    deleted = [w for op, w in fake.calls if op == "delete"]
    assert deleted and all("other-app" not in d and "not-ours" not in d for d in deleted)
    assert fake.find("Deployment", "qwen-vllm", "spectrn") is None


def test_teardown_keeps_a_namespace_spectrn_did_not_create(fake, sim_cfg):
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "spectrn"}})
    run_deploy(fake, sim_cfg)
    result = teardown(fake, sim_cfg)
    assert result.kept == ["Namespace spectrn (not created by spectrn)"]
    assert fake.find("Namespace", "spectrn") is not None


def test_teardown_spares_another_namespaces_install(fake):
    a, b = make_cfg(namespace="team-a"), make_cfg(namespace="team-b")
    for cfg in (a, b):
        apply_plan(fake, make_plan(fake, render_for_deploy(cfg)))
    teardown(fake, a)
    assert fake.find("PersistentVolume", "spectrn-s3-team-a") is None
    assert fake.find("PersistentVolume", "spectrn-s3-team-b") is not None
    assert fake.find("Deployment", "qwen-vllm", "team-b") is not None


def test_teardown_dry_run_deletes_nothing(fake, sim_cfg):
    run_deploy(fake, sim_cfg)
    n = len(fake.objects)
    result = teardown(fake, sim_cfg, dry_run=True)
    assert len(result.deleted) == 8 and result.deleted[-1] == "Namespace spectrn"  # what deploy created
    assert len(fake.objects) == n and not [c for c in fake.calls if c[0] == "delete"]


def test_teardown_keep_namespace(fake, sim_cfg):
    run_deploy(fake, sim_cfg)
    result = teardown(fake, sim_cfg, keep_namespace=True)
    assert fake.find("Namespace", "spectrn") is not None and "--keep-namespace" in result.kept[0]


def test_status_shows_both_services(fake, sim_cfg):
    states = status(fake, sim_cfg)
    assert [(s.variant, s.phase) for s in states] == [("baseline", "Absent"), ("speculative", "Absent")]
    run_deploy(fake, sim_cfg)
    base, spec = status(fake, sim_cfg)
    assert (base.phase, base.ready, base.desired, base.window) == ("Ready", 1, 1, "-")
    assert (spec.phase, spec.window, spec.image) == ("Ready", "7", "spectrn:0.1.0")


def test_age_is_human_readable():
    from spectrn.deploy.wait import age_of

    t0 = "2026-01-01T00:00:00Z"
    base = 1767225600.0  # 2026-01-01T00:00:00Z
    assert age_of(t0, base + 75) == "1m15s"
    assert age_of(t0, base + 2 * 3600 + 5 * 60) == "2h05m"
    assert age_of(t0, base + 3 * 86400 + 3600) == "3d01h"
    assert age_of("garbage", base) == ""


def test_status_of_a_failing_service_carries_the_diagnosis(fake, sim_cfg):
    fake.behave("qwen-sd-vllm", "oom")
    with pytest.raises(DeployError, match="OOMKilled"):
        run_deploy(fake, sim_cfg)
    _, spec = status(fake, sim_cfg)
    assert spec.phase == "Failed" and spec.detail.startswith("OOMKilled")


def test_fake_neuron_capacity_patches_node_status():
    fake = FakeKube(nodes=2, neuron_per_node=0)
    names = advertise_fake_neuron(fake, neuron=16, neuroncore=128)
    assert names == ["node-0", "node-1"]
    node = fake.find("Node", "node-1")
    for section in ("capacity", "allocatable"):
        assert node["status"][section]["aws.amazon.com/neuron"] == "16"
        assert node["status"][section]["aws.amazon.com/neuroncore"] == "128"
    assert [c for c in fake.calls if c[0] == "patch_node_status"] == [
        ("patch_node_status", "node-0"),
        ("patch_node_status", "node-1"),
    ]


def test_namespace_scoped_users_deploy_and_tear_down_without_namespace_access(sim_cfg):
    fake = FakeKube()
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "spectrn"}})
    fake.fail_next("get", kind="Namespace", status=403, reason="Forbidden", message="namespaces is forbidden", times=99)
    report = run_deploy(fake, sim_cfg)
    assert report.plan.items[0].action == "keep" and "forbidden" in report.plan.items[0].reason
    result = teardown(fake, sim_cfg)
    assert result.kept == ["Namespace spectrn (cannot read namespaces: forbidden)"]
    assert fake.find("Namespace", "spectrn") is not None and fake.find("Deployment", "qwen-vllm", "spectrn") is None
