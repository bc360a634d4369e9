"""What the plan decides for each live object, and what apply does and reports when it fails (issue 29's audit).

Live objects are written by hand into the fake cluster; each expected action, reason and message is written out
in the test from the Kubernetes rule it follows (which fields are immutable: docs/kubernetes.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from doubles.kube_fake import FakeKube, RecordingKube
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.deploy.apply import apply_plan
from spectrn.deploy.objects import order_objects, stamp
from spectrn.deploy.plan import Plan, PlanItem, immutable_change, make_plan
from spectrn.deploy.service import render_for_deploy
from spectrn.errors import DeployError, Interrupted

Obj = dict[str, Any]
NS = "spectrn"
OURS = {"app.kubernetes.io/managed-by": "spectrn"}


def live(fake: FakeKube, obj: Obj, **status: Any) -> None:
    """``obj`` as spectrn applied it earlier (stamped, labelled as spectrn's)."""
    out = stamp(obj)
    out["metadata"].setdefault("labels", {}).update(OURS)
    if status:
        out["status"] = status
    fake.put(out)


def rendered(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("labels", {}).update(OURS)
    return out


JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "bench", "namespace": NS},
    "spec": {"template": {"spec": {"containers": [{"name": "load", "image": "spectrn:1"}]}}},
}


def test_a_job_whose_pod_template_changed_is_replaced() -> None:
    fake = FakeKube()
    live(fake, JOB)
    new = rendered(JOB)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "spectrn:2"
    (item,) = make_plan(fake, [new]).items
    assert (item.action, item.reason, item.immutable) == (
        "replace",
        "spec.template cannot change in place: deleted, then created again",
        "",
    )


PV = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "spectrn-s3-spectrn"},
    "spec": {
        "capacity": {"storage": "1Ti"},
        "accessModes": ["ReadOnlyMany"],
        "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "h", "volumeAttributes": {"bucketName": "models"}},
    },
}


def test_a_volumes_capacity_may_change_in_place_its_bucket_may_not() -> None:
    fake = FakeKube()
    live(fake, PV)
    bigger = rendered(PV)
    bigger["spec"]["capacity"] = {"storage": "2Ti"}
    (item,) = make_plan(fake, [bigger]).items
    assert (item.action, item.immutable) == ("update", "")
    other = rendered(PV)
    other["spec"]["csi"]["volumeAttributes"]["bucketName"] = "other"
    (item,) = make_plan(fake, [other]).items
    assert (item.action, item.immutable) == ("update", "the volume source (spec.persistentvolumesource)")


SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "qwen-vllm", "namespace": NS},
    "spec": {"selector": {"app": "qwen-vllm"}, "ports": [{"port": 8000}]},
}


def test_a_service_whose_cluster_ip_the_server_chose_updates_in_place() -> None:
    """spectrn renders no clusterIP; the live one carries the allocator's address. Only a rendered clusterIP that
    differs from the live one is an immutable change."""
    live_svc = rendered(SERVICE)
    live_svc["spec"]["clusterIP"] = "10.96.0.7"
    new = rendered(SERVICE)
    new["spec"]["ports"] = [{"port": 8001}]
    assert immutable_change(live_svc, new) == ""
    headless = rendered(SERVICE)
    headless["spec"]["clusterIP"] = "None"
    assert immutable_change(live_svc, headless) == "spec.clusterIP"


PVC = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "spectrn-s3", "namespace": NS},
    "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Ti"}}, "volumeName": "pv-a"},
}


def test_a_bound_claim_may_grow_an_unbound_one_may_not_change() -> None:
    """A bound claim's storage request may be raised (volume expansion); every other spec field is immutable."""
    grown = copy.deepcopy(PVC)
    grown["spec"]["resources"]["requests"]["storage"] = "2Ti"
    bound = {**copy.deepcopy(PVC), "status": {"phase": "Bound"}}
    assert immutable_change(bound, grown) == ""
    pending = {**copy.deepcopy(PVC), "status": {"phase": "Pending"}}
    assert immutable_change(pending, grown) == "spec"


def test_a_claims_volume_name_is_compared_only_once_the_live_claim_has_one() -> None:
    no_volume = copy.deepcopy(PVC)
    del no_volume["spec"]["volumeName"]
    assert immutable_change(no_volume, copy.deepcopy(PVC)) == ""
    other = copy.deepcopy(PVC)
    other["spec"]["volumeName"] = "pv-b"
    assert immutable_change(copy.deepcopy(PVC), other) == "spec"


def test_an_object_another_tool_manages_is_foreign() -> None:
    fake = FakeKube()
    theirs = copy.deepcopy(SERVICE)
    theirs["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
    fake.put(theirs)
    (item,) = make_plan(fake, [rendered(SERVICE)]).items
    assert (item.action, item.reason, item.foreign) == ("update", "exists and is NOT managed by spectrn", True)


def test_the_summary_counts_each_action_in_a_fixed_order_and_changes_include_replacements() -> None:
    obj = rendered(SERVICE)
    plan = Plan(
        [
            PlanItem(obj, "unchanged"),
            PlanItem(obj, "create"),
            PlanItem(obj, "replace"),
            PlanItem(obj, "create"),
            PlanItem(obj, "keep"),
        ]
    )
    assert plan.summary() == "2 create, 1 replace, 1 unchanged, 1 keep"
    assert [i.action for i in plan.changes] == ["create", "replace", "create"]
    assert Plan([]).summary() == "nothing to do"


def test_kinds_spectrn_does_not_order_go_last() -> None:
    objs = [{"kind": "Widget"}, {"kind": "Job"}, {"kind": "Namespace"}, {"kind": "Deployment"}]
    assert [o["kind"] for o in order_objects(objs)] == ["Namespace", "Deployment", "Job", "Widget"]


# ---- apply ---------------------------------------------------------------------------------------


def test_an_interrupted_apply_deletes_what_it_created_newest_first_in_the_foreground(sim_cfg: Any) -> None:
    fake = RecordingKube()
    plan = make_plan(fake, render_for_deploy(sim_cfg))
    seen: list[str] = []

    def stop(item: PlanItem) -> None:
        seen.append(item.name)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as err:
        apply_plan(fake, plan, on_step=stop)
    # created: the Namespace, then the two ServiceAccounts; deleted in the reverse order
    assert fake.propagations == [
        ("ServiceAccount", "spectrn-loadgen", "Foreground"),
        ("ServiceAccount", "spectrn-vllm", "Foreground"),
        ("Namespace", "spectrn", "Foreground"),
    ]
    assert err.value.message == (
        "deploy stopped during apply; applied: Namespace spectrn, ServiceAccount spectrn/spectrn-vllm, "
        "ServiceAccount spectrn/spectrn-loadgen; rolled back (deleted again): ServiceAccount spectrn/spectrn-loadgen, "
        "ServiceAccount spectrn/spectrn-vllm, Namespace spectrn"
    )


def test_a_failed_apply_says_which_updated_objects_it_left(sim_cfg: Any) -> None:
    fake = FakeKube()
    run_deploy(fake, sim_cfg)
    new = make_cfg(runtime="sim", resources_mode="device-plugin", num_speculative_tokens=5, max_num_seqs=8)
    plan = make_plan(fake, render_for_deploy(new))
    assert [i.name for i in plan.changes] == ["Deployment spectrn/qwen-vllm", "Deployment spectrn/qwen-sd-vllm"]
    fake.fail_next("apply", kind="Deployment", name="qwen-sd-vllm", status=422, reason="Invalid", message="bad")
    with pytest.raises(DeployError) as err:
        apply_plan(fake, plan)
    assert err.value.message == (
        "applying Deployment spectrn/qwen-sd-vllm failed: apply Deployment qwen-sd-vllm: HTTP 422 Invalid: bad. "
        "applied: Deployment spectrn/qwen-vllm; rolled back (deleted again): nothing; "
        "left updated (existed before): Deployment spectrn/qwen-vllm"
    )


def deployed_replace(sim_cfg: Any) -> tuple[RecordingKube, Plan]:
    fake = RecordingKube()
    run_deploy(fake, sim_cfg)
    dep = next(o for o in render_for_deploy(sim_cfg) if o["kind"] == "Deployment" and "sd" in o["metadata"]["name"])
    fake.propagations.clear()
    return fake, Plan([PlanItem(stamp(dep), "replace")])


def test_a_replaced_deployment_is_created_again_only_once_the_old_one_is_gone(sim_cfg: Any) -> None:
    fake, plan = deployed_replace(sim_cfg)
    fake.linger["qwen-sd-vllm"] = 2  # two more gets see it, then it is gone
    result = apply_plan(fake, plan, clock=fake.clock, sleep=fake.sleep)
    assert result.replaced == ["Deployment spectrn/qwen-sd-vllm"]
    assert fake.propagations == [("Deployment", "qwen-sd-vllm", "Foreground")]
    assert fake.find("Deployment", "qwen-sd-vllm", NS) is not None


def test_a_replaced_deployment_that_never_goes_stops_the_apply_and_says_so(sim_cfg: Any) -> None:
    fake, plan = deployed_replace(sim_cfg)
    fake.linger["qwen-sd-vllm"] = None
    start = fake.clock()
    with pytest.raises(DeployError) as err:
        apply_plan(fake, plan, clock=fake.clock, sleep=fake.sleep, replace_timeout_s=10)
    assert err.value.message == (
        "applying Deployment spectrn/qwen-sd-vllm failed: replace Deployment spectrn/qwen-sd-vllm: still being "
        "deleted after 10 s. applied: nothing; rolled back (deleted again): nothing; deleted to be replaced, not "
        "created again: Deployment spectrn/qwen-sd-vllm (re-run `spectrn deploy`)"
    )
    assert fake.clock() - start == 12  # polled every 2 s: 0, 2, ..., 12 > 10


def test_a_replacement_that_was_created_again_is_not_reported_as_missing(sim_cfg: Any) -> None:
    fake, plan = deployed_replace(sim_cfg)
    svc = next(o for o in render_for_deploy(sim_cfg) if o["kind"] == "Service" and "sd" in o["metadata"]["name"])
    plan.items.append(PlanItem(stamp(svc), "update"))
    fake.fail_next("apply", kind="Service", status=422, reason="Invalid", message="bad")
    with pytest.raises(DeployError) as err:
        apply_plan(fake, plan, clock=fake.clock, sleep=fake.sleep)
    assert err.value.message == (
        "applying Service spectrn/qwen-sd-vllm failed: apply Service qwen-sd-vllm: HTTP 422 Invalid: bad. "
        "applied: Deployment spectrn/qwen-sd-vllm; rolled back (deleted again): nothing; "
        "left updated (existed before): Deployment spectrn/qwen-sd-vllm"
    )
