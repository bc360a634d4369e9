"""Apply order, idempotency, rolling only what changed, ownership, and rollback of a half-applied deploy."""

from __future__ import annotations

import random

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.deploy.apply import apply_plan
from spectrn.deploy.objects import KIND_ORDER, SPEC_HASH, order_objects
from spectrn.deploy.plan import make_plan
from spectrn.deploy.service import render_for_deploy
from spectrn.errors import ConfigError, DeployError, Interrupted


def applied(fake: FakeKube) -> list[str]:
    return [what for op, what in fake.calls if op == "apply"]


def test_apply_follows_dependency_order_whatever_the_input_order(fake, neuron_cfg):
    objects = render_for_deploy(neuron_cfg)
    random.Random(3).shuffle(objects)
    plan = make_plan(fake, objects)
    apply_plan(fake, plan)
    kinds = [what.split()[0] for what in applied(fake)]
    assert kinds == sorted(kinds, key=KIND_ORDER.index)
    # the things a pod needs exist before the pods' Deployments
    assert kinds.index("ResourceClaimTemplate") < kinds.index("Deployment")
    assert kinds.index("PersistentVolumeClaim") < kinds.index("Deployment")
    assert kinds[0] == "Namespace"


def test_order_is_stable_within_a_kind():
    objs = [{"kind": "Service", "n": 1}, {"kind": "Namespace"}, {"kind": "Service", "n": 2}, {"kind": "Deployment"}]
    assert [o.get("n") for o in order_objects(objs) if o["kind"] == "Service"] == [1, 2]


def test_redeploy_with_the_same_config_changes_nothing(fake, sim_cfg):
    run_deploy(fake, sim_cfg)
    first = applied(fake)
    assert len(first) == 8
    pods_before = sorted(p["metadata"]["name"] for p in fake.kinds("Pod"))
    report = run_deploy(fake, sim_cfg)
    assert applied(fake) == first  # no apply call at all the second time
    assert report.plan.changes == []
    assert {s.phase for s in report.states} == {"Ready"}
    assert sorted(p["metadata"]["name"] for p in fake.kinds("Pod")) == pods_before


def test_new_window_rolls_only_the_speculative_service(fake, sim_cfg):
    run_deploy(fake, sim_cfg)
    base_pods = sorted(
        p["metadata"]["name"] for p in fake.kinds("Pod") if p["metadata"]["name"].startswith("qwen-vllm")
    )
    n = len(applied(fake))
    report = run_deploy(fake, make_cfg(runtime="sim", resources_mode="device-plugin", num_speculative_tokens=5))
    assert applied(fake)[n:] == ["Deployment spectrn/qwen-sd-vllm"]
    assert [i.name for i in report.plan.changes] == ["Deployment spectrn/qwen-sd-vllm"]
    assert (
        sorted(p["metadata"]["name"] for p in fake.kinds("Pod") if p["metadata"]["name"].startswith("qwen-vllm"))
        == base_pods
    )
    spec = next(s for s in report.states if s.variant == "speculative")
    assert spec.window == "5" and spec.phase == "Ready"
    # the old speculative pod is gone once the new one is ready
    sd_pods = [p for p in fake.kinds("Pod") if p["metadata"]["name"].startswith("qwen-sd-vllm")]
    assert len(sd_pods) == 1


def test_objects_carry_the_spec_hash(fake, sim_cfg):
    run_deploy(fake, sim_cfg)
    dep = fake.find("Deployment", "qwen-vllm", "spectrn")
    assert len(dep["metadata"]["annotations"][SPEC_HASH]) == 16


def test_only_deploys_one_service_and_the_shared_objects(fake, sim_cfg):
    report = run_deploy(fake, sim_cfg, only="speculative")
    names = [i.name for i in report.plan.items]
    assert "Deployment spectrn/qwen-sd-vllm" in names and "Deployment spectrn/qwen-vllm" not in names
    assert "Namespace spectrn" in names
    assert [s.variant for s in report.states] == ["speculative"]


def test_only_rejects_unknown_service(sim_cfg):
    with pytest.raises(ConfigError, match="--only baseline or --only speculative"):
        render_for_deploy(sim_cfg, "both")


def test_existing_foreign_namespace_is_used_but_never_adopted(fake, sim_cfg):
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "spectrn", "labels": {"team": "ml"}}})
    report = run_deploy(fake, sim_cfg)
    ns_item = next(i for i in report.plan.items if i.obj["kind"] == "Namespace")
    assert ns_item.action == "keep"
    assert "Namespace spectrn" not in applied(fake)
    assert fake.find("Namespace", "spectrn")["metadata"]["labels"] == {"team": "ml"}


def test_foreign_object_with_a_spectrn_name_blocks_the_deploy(fake, sim_cfg):
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "spectrn"}})
    fake.put(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "qwen-vllm", "namespace": "spectrn"}, "spec": {}}
    )
    with pytest.raises(DeployError) as err:
        run_deploy(fake, sim_cfg)
    text = str(err.value)
    assert "pre-flight failed, nothing was applied" in text
    assert "Service spectrn/qwen-vllm already exists and is not managed by spectrn" in text
    assert "baseline_name" in (err.value.hint or "")
    assert applied(fake) == []


def test_failed_apply_rolls_back_what_this_call_created_only(fake, sim_cfg):
    # a ServiceAccount that spectrn applied in an earlier run exists; it must survive the rollback
    run_deploy(fake, sim_cfg, only="baseline")
    before = {k for k in fake.objects if k[1] != "Pod"}
    fake.fail_next(
        "apply",
        kind="Service",
        name="qwen-sd-vllm",
        status=403,
        reason="Forbidden",
        message='services "qwen-sd-vllm" is forbidden: User "dev" cannot patch resource "services"',
    )
    with pytest.raises(DeployError) as err:
        run_deploy(fake, sim_cfg)
    msg = str(err.value)
    assert "applying Service spectrn/qwen-sd-vllm failed" in msg
    assert 'User "dev" cannot patch resource "services"' in msg  # the server's own words
    assert "rolled back (deleted again): Deployment spectrn/qwen-sd-vllm" in msg
    assert "RBAC" in (err.value.hint or "")
    assert {k for k in fake.objects if k[1] != "Pod"} == before
    deleted = [w for op, w in fake.calls if op == "delete"]
    assert deleted == ["Deployment spectrn/qwen-sd-vllm"]


def test_ctrl_c_during_apply_rolls_back(fake, sim_cfg):
    plan = make_plan(fake, render_for_deploy(sim_cfg))
    seen = []

    def stop(item):
        seen.append(item.name)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as err:
        apply_plan(fake, plan, on_step=stop)
    assert "rolled back" in str(err.value)
    assert [k for k in fake.objects if k[1] == "ServiceAccount"] == []
    assert_namespace_deleted(fake)


def assert_namespace_deleted(fake: FakeKube) -> None:
    """Deleted, as a real API server deletes a namespace: Terminating first, gone once its content is."""
    ns = fake.find("Namespace", "spectrn")
    assert ns is not None and ns["metadata"]["deletionTimestamp"] and ns["status"]["phase"] == "Terminating"
    fake.sleep(fake.tick_s)
    fake.sleep(fake.tick_s)
    assert fake.find("Namespace", "spectrn") is None


def test_connection_reset_during_apply_names_the_cause_and_rolls_back(fake, sim_cfg):
    fake.fail_next("apply", kind="Deployment", status=0)
    with pytest.raises(DeployError) as err:
        run_deploy(fake, sim_cfg)
    assert "cannot reach the Kubernetes API server" in str(err.value)
    assert "Connection reset by peer" in str(err.value)
    assert "kube context" in err.value.hint
    assert_namespace_deleted(fake)


def test_redeploy_right_after_a_rollback_waits_for_the_terminating_namespace(fake, sim_cfg):
    """A rolled-back deploy deleted the namespace it created; it stays Terminating for a while and refuses new
    content (403). Re-running at once must wait for it to go, then create everything afresh."""
    fake.fail_next("apply", kind="Deployment", status=0)
    with pytest.raises(DeployError):
        run_deploy(fake, sim_cfg)
    assert fake.find("Namespace", "spectrn")["status"]["phase"] == "Terminating"
    notes: list[str] = []
    report = run_deploy(fake, sim_cfg, on_note=notes.append)
    assert notes == ["namespace spectrn is being deleted (Terminating): waiting until it is gone"]
    assert report.plan.summary() == "8 create" and all(s.done for s in report.states)
    assert fake.find("Namespace", "spectrn")["status"]["phase"] == "Active"


def test_a_changed_deployment_selector_replaces_the_deployment(fake, sim_cfg):
    """A Deployment's selector is immutable (422 on update). When the rendered selector differs from the live one
    (deployed by a spectrn that labelled its pods otherwise), deploy deletes the Deployment and creates it again."""
    from spectrn.deploy.objects import stamp

    old = next(o for o in render_for_deploy(sim_cfg) if o["kind"] == "Deployment" and "sd" in o["metadata"]["name"])
    old["spec"]["selector"]["matchLabels"]["spectrn.io/generation"] = "old"
    old["spec"]["template"]["metadata"]["labels"]["spectrn.io/generation"] = "old"
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "spectrn"}})
    fake.apply(stamp(old))
    report = run_deploy(fake, sim_cfg)
    item = next(i for i in report.plan.items if i.name == "Deployment spectrn/qwen-sd-vllm")
    assert item.action == "replace" and "spec.selector cannot change in place" in item.reason
    assert report.applied.replaced == ["Deployment spectrn/qwen-sd-vllm"]
    calls = [c for c in fake.calls if c[1] == "Deployment spectrn/qwen-sd-vllm" and c[0] in ("delete", "apply")]
    assert [op for op, _ in calls] == ["apply", "delete", "apply"]  # the old one (by the test), then the replace
    live = fake.find("Deployment", "qwen-sd-vllm", "spectrn")
    assert "spectrn.io/generation" not in live["spec"]["selector"]["matchLabels"]
    assert all(s.done for s in report.states)


def test_a_changed_volume_source_stops_at_preflight_with_the_way_out(fake, neuron_cfg):
    """A PersistentVolume's source (the S3 bucket) cannot change once created; applying would fail with 422 half
    way through. Pre-flight names it and nothing is applied."""
    run_deploy(fake, neuron_cfg)
    n = len(applied(fake))
    with pytest.raises(DeployError) as err:
        run_deploy(fake, make_cfg(s3={"bucket": "other-models"}))
    msg = str(err.value)
    assert "pre-flight failed, nothing was applied" in msg
    assert "[immutable] PersistentVolume spectrn-s3-spectrn: the volume source" in msg
    assert "spectrn teardown" in (err.value.hint or "")
    assert len(applied(fake)) == n


def test_dry_run_against_a_terminating_namespace_warns_that_deploy_will_wait(fake, sim_cfg):
    run_deploy(fake, sim_cfg)
    fake.delete("v1", "Namespace", "spectrn")
    report = run_deploy(fake, sim_cfg, dry_run=True)
    ns_item = report.plan.items[0]
    assert ns_item.action == "create" and "Terminating" in ns_item.reason
    (warn,) = [f for f in report.findings if f.check == "namespace"]
    assert warn.severity == "warn" and "waits until it is gone" in warn.message


def test_spectrns_apply_takes_back_a_field_someone_edited(fake, sim_cfg):
    """spectrn applies with force=true as field manager spectrn: a field another manager changed (kubectl edit)
    is set back to the configuration, and ownership returns to spectrn, whenever spectrn applies the object."""
    import copy

    run_deploy(fake, sim_cfg)
    edited = copy.deepcopy(fake.find("Deployment", "qwen-sd-vllm", "spectrn"))
    for k in ("resourceVersion", "managedFields"):
        edited["metadata"].pop(k)
    edited["spec"]["replicas"] = 3
    fake.update(edited, field_manager="kubectl-edit")
    assert run_deploy(fake, sim_cfg).plan.changes == []  # same configuration: not applied, the edit stays
    assert fake.find("Deployment", "qwen-sd-vllm", "spectrn")["spec"]["replicas"] == 3
    run_deploy(fake, make_cfg(runtime="sim", resources_mode="device-plugin", num_speculative_tokens=5))
    live = fake.find("Deployment", "qwen-sd-vllm", "spectrn")
    assert live["spec"]["replicas"] == 1
    owners = {m["manager"]: m["fieldsV1"] for m in live["metadata"]["managedFields"]}
    assert "f:replicas" in owners["spectrn"]["f:spec"]
    assert "f:replicas" not in owners.get("kubectl-edit", {}).get("f:spec", {})
