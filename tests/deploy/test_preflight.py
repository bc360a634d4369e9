"""Pre-flight: what it finds, and that each problem names the fix."""

from __future__ import annotations

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import add_slices, make_cfg, run_deploy
from spectrn.deploy.plan import make_plan
from spectrn.deploy.preflight import preflight
from spectrn.deploy.service import render_for_deploy
from spectrn.errors import DeployError


def findings(fake, cfg):
    return preflight(fake, cfg, make_plan(fake, render_for_deploy(cfg)))


def errors(fake, cfg):
    return [f for f in findings(fake, cfg) if f.severity == "error"]


def test_healthy_cluster_has_no_errors(fake, neuron_cfg):
    found = findings(fake, neuron_cfg)
    assert {f.check for f in found} == {"cluster", "permissions", "dra", "storage", "capacity"}
    assert all(f.severity == "ok" for f in found)


def test_missing_dra_v1_suggests_v1beta1():
    fake = FakeKube(api_versions={"v1", "apps/v1", "batch/v1", "storage.k8s.io/v1", "resource.k8s.io/v1beta1"})
    (err,) = [f for f in errors(fake, make_cfg()) if f.check == "dra"]
    assert "does not serve resource.k8s.io/v1" in err.message
    assert "resources_mode: dra-v1beta1" in err.hint


def test_no_dra_at_all_suggests_device_plugin():
    fake = FakeKube(api_versions={"v1", "apps/v1", "batch/v1", "storage.k8s.io/v1"})
    (err,) = [f for f in errors(fake, make_cfg()) if f.check == "dra"]
    assert "device-plugin" in err.hint


def test_missing_neuron_dra_driver():
    fake = FakeKube(device_classes=())
    add_slices(fake)
    (err,) = errors(fake, make_cfg())
    assert "DeviceClass neuron.aws.com is missing" in err.message
    assert "draDriver.enabled=true" in err.hint


def test_missing_s3_csi_driver():
    fake = FakeKube(csi_drivers=())
    add_slices(fake)
    (err,) = errors(fake, make_cfg())
    assert err.check == "storage" and "s3.csi.aws.com is not installed" in err.message
    assert "Mountpoint for Amazon S3 CSI driver" in err.hint


def test_not_enough_dra_devices():
    fake = FakeKube()
    add_slices(fake, devices=8)
    (err,) = errors(fake, make_cfg())
    assert "need 16 Neuron devices, the cluster has 8" in err.message
    assert "--only" in err.hint


def test_device_plugin_capacity_per_node(sim_cfg):
    fake = FakeKube(nodes=2, neuron_per_node=4)
    (err,) = errors(fake, sim_cfg)
    assert "no node has 8 Neuron devices for one pod (largest: 4" in err.message


def test_no_neuron_nodes_on_kind_points_at_the_helper(sim_cfg):
    fake = FakeKube(neuron_per_node=0)
    (err,) = errors(fake, sim_cfg)
    assert "no Neuron devices found" in err.message and "spectrn kind fake-neuron" in err.hint


def test_devices_used_by_other_workloads_warn(sim_cfg):
    fake = FakeKube(neuron_per_node=16)
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "training", "namespace": "other"},
            "spec": {"containers": [{"name": "t", "resources": {"limits": {"aws.amazon.com/neuron": "8"}}}]},
            "status": {"phase": "Running"},
        }
    )
    cap = [f for f in findings(fake, sim_cfg) if f.check == "capacity"]
    assert cap[0].severity == "warn" and "only 8 free" in cap[0].message


def test_missing_permissions_are_listed(fake, sim_cfg):
    fake.deny("patch", "deployments")
    fake.deny("get", "pods/log")
    (err,) = errors(fake, sim_cfg)
    assert "patch deployments" in err.message and "get pods/log" in err.message
    assert "docs/kubernetes.md" in err.hint


def test_unreachable_cluster_is_one_clear_error(sim_cfg):
    fake = FakeKube()
    fake.fail_next("discovery", status=0)
    (err,) = errors(fake, sim_cfg)
    assert "does not answer" in err.message and "cannot reach the Kubernetes API server" in err.message


def test_preflight_errors_stop_the_deploy_before_any_apply(sim_cfg):
    fake = FakeKube(neuron_per_node=0)
    with pytest.raises(DeployError, match="pre-flight failed, nothing was applied"):
        run_deploy(fake, sim_cfg)
    assert [c for c in fake.calls if c[0] == "apply"] == []


def test_dry_run_applies_nothing(fake, sim_cfg):
    report = run_deploy(fake, sim_cfg, dry_run=True)
    assert report.plan.summary() == "8 create"
    assert [c for c in fake.calls if c[0] == "apply"] == []
