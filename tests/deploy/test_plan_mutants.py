"""make_plan and immutable_change, case by case: each expected plan row, reason and immutable field written out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from doubles.kube_fake import FakeKube
from spectrn.deploy.plan import Plan, PlanItem, immutable_change, make_plan
from spectrn.kube.api import KubeApiError

Obj = dict[str, Any]
NS = "spectrn"
OURS = {"app.kubernetes.io/managed-by": "spectrn"}
HASH = "spectrn.io/spec-hash"

NAMESPACE: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": dict(OURS)}}


def service(name: str, port: int = 8000) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "labels": dict(OURS)},
        "spec": {"selector": {"app": name}, "ports": [{"port": port}]},
    }


# the spec hash of service("web", 8001), as stamp() writes it (sha256 of the sorted JSON, first 16 hex digits)
WEB_8001_HASH = "d807444ffe512dd0"


def rows(plan: Plan) -> list[tuple[str, str, str, bool, bool, str]]:
    return [(i.name, i.action, i.reason, i.foreign, i.terminating, i.immutable) for i in plan.items]


def test_the_summary_counts_updates() -> None:
    obj = service("web")
    plan = Plan([PlanItem(obj, "update"), PlanItem(obj, "keep"), PlanItem(obj, "update")])
    assert plan.summary() == "2 update, 1 keep"


def test_a_forbidden_namespace_read_keeps_the_namespace_and_plans_the_rest() -> None:
    fake = FakeKube()
    fake.fail_next("get", kind="Namespace", status=403, message="forbidden", reason="Forbidden")
    plan = make_plan(fake, [NAMESPACE, service("web")])
    assert rows(plan) == [
        (
            "Namespace spectrn",
            "keep",
            "cannot read namespaces (forbidden): assumed to exist, not adopted",
            False,
            False,
            "",
        ),
        ("Service spectrn/web", "create", "", False, False, ""),
    ]


def test_a_forbidden_read_of_anything_but_a_namespace_stops_the_plan() -> None:
    fake = FakeKube()
    fake.fail_next("get", kind="Service", status=403, message="forbidden", reason="Forbidden")
    with pytest.raises(KubeApiError) as e:
        make_plan(fake, [service("web")])
    assert e.value.status == 403


def test_a_namespace_read_that_fails_otherwise_stops_the_plan() -> None:
    fake = FakeKube()
    fake.fail_next("get", kind="Namespace", status=500)
    with pytest.raises(KubeApiError) as e:
        make_plan(fake, [NAMESPACE])
    assert e.value.status == 500


def test_a_terminating_object_is_created_again_and_the_rest_is_planned() -> None:
    fake = FakeKube()
    dying = service("old")
    dying["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    fake.put(dying)
    plan = make_plan(fake, [service("old"), service("web")])
    assert rows(plan) == [
        (
            "Service spectrn/old",
            "create",
            "being deleted (Terminating): created again once it is gone",
            False,
            True,
            "",
        ),
        ("Service spectrn/web", "create", "", False, False, ""),
    ]


def test_a_namespace_spectrn_did_not_create_is_kept_with_the_reason() -> None:
    fake = FakeKube()
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    assert rows(make_plan(fake, [NAMESPACE])) == [
        ("Namespace spectrn", "keep", "exists and is not spectrn's: used as is, never deleted", False, False, "")
    ]


def test_an_update_names_the_live_hash_and_the_new_one() -> None:
    fake = FakeKube()
    old = service("web")
    old["metadata"]["annotations"] = {HASH: "0123456789abcdef"}
    fake.put(old)
    assert rows(make_plan(fake, [service("web", 8001)])) == [
        ("Service spectrn/web", "update", f"spec hash 0123456789abcdef -> {WEB_8001_HASH}", False, False, "")
    ]


def test_an_update_of_a_live_object_without_a_hash_says_none() -> None:
    fake = FakeKube()
    fake.put(service("web"))
    assert rows(make_plan(fake, [service("web", 8001)])) == [
        ("Service spectrn/web", "update", f"spec hash none -> {WEB_8001_HASH}", False, False, "")
    ]


# ---- immutable fields -----------------------------------------------------------------------------
# Job: pkg/apis/batch/validation/validation.go ValidateJobSpecUpdate keeps spec.selector, spec.template and
# spec.completionMode immutable (ValidateImmutableField); spec.parallelism may change (it scales the Job).
# https://kubernetes.io/docs/concepts/workloads/controllers/job/ ("the pod template ... is immutable").
SELECTOR = {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1"}}
TEMPLATE = {"spec": {"containers": [{"name": "load", "image": "spectrn:1"}], "restartPolicy": "Never"}}


def job(**spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench", "namespace": NS},
        "spec": copy.deepcopy(spec),
    }


def test_a_jobs_selector_change_is_immutable() -> None:
    other = {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-2"}}
    live = job(selector=SELECTOR, template=TEMPLATE)
    assert immutable_change(live, job(selector=other, template=TEMPLATE)) == "spec.selector"


def test_a_rendered_selector_the_live_job_lacks_is_a_selector_change() -> None:
    assert immutable_change(job(template=TEMPLATE), job(selector=SELECTOR, template=TEMPLATE)) == "spec.selector"


def test_a_jobs_completion_mode_change_is_immutable() -> None:
    live = job(selector=SELECTOR, template=TEMPLATE, completionMode="NonIndexed")
    indexed = job(selector=SELECTOR, template=TEMPLATE, completionMode="Indexed")
    assert immutable_change(live, indexed) == "spec.completionMode"
    same = job(selector=SELECTOR, template=TEMPLATE, completionMode="NonIndexed", parallelism=4)
    assert immutable_change(live, same) == ""


def test_a_jobs_parallelism_changes_in_place() -> None:
    live = job(selector=SELECTOR, template=TEMPLATE, parallelism=1)
    assert immutable_change(live, job(selector=SELECTOR, template=TEMPLATE, parallelism=4)) == ""


# Service: pkg/apis/core/validation/validation.go ValidateServiceUpdate keeps spec.clusterIP immutable once set
# ("field is immutable"); https://kubernetes.io/docs/concepts/services-networking/service/#headless-services
def test_a_headless_service_keeping_its_cluster_ip_none_updates_in_place() -> None:
    live = service("web")
    live["spec"]["clusterIP"] = "None"
    new = service("web", 8001)
    new["spec"]["clusterIP"] = "None"
    assert immutable_change(live, new) == ""


# PersistentVolume: ValidatePersistentVolumeUpdate (pkg/apis/core/validation/validation.go) refuses any change to
# the volume source ("spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable").
def test_a_volumes_csi_driver_change_alone_is_a_source_change() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "spectrn-s3-spectrn"},
        "spec": {"csi": {"driver": "s3.csi.aws.com", "volumeHandle": "h", "volumeAttributes": {"bucketName": "m"}}},
    }
    new = copy.deepcopy(live)
    new["spec"]["csi"]["driver"] = "efs.csi.aws.com"
    assert immutable_change(live, new) == "the volume source (spec.persistentvolumesource)"


# PersistentVolumeClaim: ValidatePersistentVolumeClaimUpdate (pkg/apis/core/validation/validation.go): "spec is
# immutable after creation except resources.requests and volumeAttributesClassName for bound claims".
def test_a_bound_claims_storage_limit_change_is_a_spec_change() -> None:
    def pvc(limit: str) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "spectrn-s3", "namespace": NS},
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "resources": {"requests": {"storage": "1Ti"}, "limits": {"storage": limit}},
                "volumeName": "pv-a",
            },
        }

    bound = {**pvc("1Ti"), "status": {"phase": "Bound"}}
    assert immutable_change(bound, pvc("2Ti")) == "spec"
    assert immutable_change(bound, pvc("1Ti")) == ""


def test_a_field_rendered_as_null_is_not_a_change_of_a_live_object_without_it() -> None:
    """The API server drops null fields, so the live object never holds one: a rendered null is no change (else
    every plan would replace the Job); a rendered value the live object lacks still is."""
    live = job(selector=SELECTOR, template=TEMPLATE)
    nulled = job(selector=SELECTOR, template={**TEMPLATE, "metadata": {"annotations": None}})
    assert immutable_change(live, nulled) == ""
    added = job(selector=SELECTOR, template={**TEMPLATE, "metadata": {"annotations": {"a": "b"}}})
    assert immutable_change(live, added) == "spec.template"
