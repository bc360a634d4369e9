"""``FakeKube`` refuses what a real API server refuses, with the real status code, reason and message shape.

Each test is one rule of ``doubles.kube_rules`` / ``doubles.kube_fake`` (the source of each is quoted there).
The errors are the ones ``RealKube`` raises for the same Status body, because the fake builds them with the
client's own translation (``api_error``) and, for watches, the client's own event parser.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from doubles.kube_fake import FakeKube
from spectrn.kube.api import KubeApiError

NS = "spectrn"


def ns_obj(name: str = NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def deployment(name: str = "web", **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    body: dict[str, Any] = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "server", "image": "spectrn:0.1.0"}]},
        },
    }
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS}, "spec": body}


def job(name: str = "load", image: str = "spectrn:0.1.0") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "load", "image": image}]}},
        },
    }


def configmap(name: str = "cm", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}}


@pytest.fixture
def kube() -> FakeKube:
    fake = FakeKube()
    fake.apply(ns_obj())
    return fake


def refused(call: Any, *args: Any, **kw: Any) -> KubeApiError:
    with pytest.raises(KubeApiError) as err:
        call(*args, **kw)
    return err.value


# ---- unknown fields and types -------------------------------------------------------------------------------


def test_server_side_apply_of_an_unknown_field_is_a_500_without_reason(kube: FakeKube) -> None:
    dep = deployment()
    dep["spec"]["topologyKeys"] = ["x"]
    e = refused(kube.apply, dep)
    assert e.status == 500
    assert e.reason == "Internal Server Error"  # the HTTP phrase: the Status body carries no reason
    assert (
        "failed to create typed patch object (spectrn/web; apps/v1, Kind=Deployment): "
        ".spec.topologyKeys: field not declared in schema" in e.message
    )
    assert "re-running cannot help" in (e.hint or "")
    assert kube.find("Deployment", "web", NS) is None


def test_unknown_fields_deep_in_a_pod_template_are_named_by_their_path(kube: FakeKube) -> None:
    dep = deployment()
    dep["spec"]["template"]["spec"]["containers"][0]["startupProbe"] = {"httpGet": {"port": 8000}, "bogus": 1}
    dep["spec"]["paused2"] = True
    e = refused(kube.apply, dep)
    assert e.status == 500
    assert "errors: .spec.paused2: field not declared in schema" in e.message  # several: "errors:" then each
    assert '.spec.template.spec.containers[name="server"].startupProbe.bogus: field not declared' in e.message


def test_server_side_apply_of_a_wrong_type_is_refused_the_same_way(kube: FakeKube) -> None:
    e = refused(kube.apply, deployment(replicas="one"))
    assert e.status == 500 and ".spec.replicas: expected int, got str" in e.message


def test_a_cluster_scoped_object_has_an_empty_namespace_in_the_typed_patch_message() -> None:
    e = refused(FakeKube().apply, {**ns_obj("other"), "spec": {"bogus": 1}})
    assert "(/other; /v1, Kind=Namespace): .spec.bogus: field not declared in schema" in e.message


def test_update_with_strict_field_validation_is_a_400_bad_request(kube: FakeKube) -> None:
    kube.apply(deployment())
    dep = deployment()
    dep["spec"]["serviceAccount"] = "x"
    dep["spec"]["template"]["spec"]["containers"][0]["bogus"] = 1
    e = refused(kube.update, dep, field_validation="Strict")
    assert (e.status, e.reason) == (400, "BadRequest")
    assert e.message.endswith(
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.serviceAccount", unknown field "spec.template.spec.containers[0].bogus"'
    )


def test_update_with_the_default_warn_drops_unknown_fields(kube: FakeKube) -> None:
    kube.apply(deployment())
    dep = deployment()
    dep["spec"]["serviceAccount"] = "x"
    live = kube.update(dep)
    assert "serviceAccount" not in live["spec"]
    assert kube.warnings == ['unknown field "spec.serviceAccount"']


def test_rendered_objects_of_every_mode_pass_every_rule(fake: FakeKube) -> None:
    """The rules are not stricter than a real server: everything spectrn renders, the load Job included, applies."""
    from doubles.kubehelp import make_cfg
    from spectrn.render.load_job import render_load_job
    from spectrn.render.manifests import render_objects

    for cfg in (
        make_cfg(),
        make_cfg(runtime="sim", resources_mode="device-plugin"),
        make_cfg(resources_mode="dra-v1beta1", bench={"loadgen_pods": 2}),
    ):
        objects = render_objects(cfg, run_id="r-1") + render_load_job(cfg, "r-2", "llmperf")
        for obj in objects:
            fake.apply(obj, dry_run=obj["kind"] != "Namespace")


# ---- validation (422) ---------------------------------------------------------------------------------------


def test_a_pod_template_without_containers_is_invalid(kube: FakeKube) -> None:
    dep = deployment()
    dep["spec"]["template"]["spec"]["containers"] = []
    e = refused(kube.apply, dep)
    assert (e.status, e.reason) == (422, "Invalid")
    assert e.message.endswith('Deployment.apps "web" is invalid: spec.template.spec.containers: Required value')
    assert e.causes == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template.spec.containers"}
    ]
    j = job()
    j["spec"]["template"]["spec"]["containers"] = []
    e = refused(kube.apply, j)
    assert e.status == 422 and 'Job.batch "load" is invalid: spec.template.spec.containers: Required value' in e.message


def test_several_errors_are_bracketed(kube: FakeKube) -> None:
    dep = deployment("Web_1")
    dep["spec"]["template"]["spec"]["containers"] = []
    e = refused(kube.apply, dep)
    assert (
        'Deployment.apps "Web_1" is invalid: [metadata.name: Invalid value: "Web_1": a lowercase RFC 1123' in e.message
    )
    assert e.message.endswith("spec.template.spec.containers: Required value]")
    assert [c["field"] for c in e.causes] == ["metadata.name", "spec.template.spec.containers"]


@pytest.mark.parametrize(
    ("obj", "field", "needle"),
    [
        (
            deployment("Web_1"),
            "metadata.name",
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is",
        ),
        (ns_obj("team.a"), "metadata.name", 'Invalid value: "team.a": must not contain dots'),
        (ns_obj("x" * 64), "metadata.name", "must be no more than 63 characters"),
        (
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1web", "namespace": NS}, "spec": {}},
            "metadata.name",
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used",
        ),
        (configmap(team="x" * 64), "metadata.labels", "must be no more than 63 characters"),
        (
            configmap(team="-bad-"),
            "metadata.labels",
            'Invalid value: "-bad-": a valid label must be an empty string or consist of alphanumeric characters',
        ),
        (configmap(**{"a/b/c": "x"}), "metadata.labels", "prefix part a lowercase RFC 1123 subdomain"),
    ],
    ids=["subdomain", "label-dots", "label-length", "dns-1035", "label-value-length", "label-value-regex", "label-key"],
)
def test_names_and_labels(kube: FakeKube, obj: dict[str, Any], field: str, needle: str) -> None:
    e = refused(kube.apply, obj)
    assert (e.status, e.reason) == (422, "Invalid")
    assert f"{field}: " in e.message and needle in e.message
    assert e.causes[0]["reason"] == "FieldValueInvalid" and e.causes[0]["field"] == field


def test_container_names_are_dns_labels(kube: FakeKube) -> None:
    dep = deployment()
    dep["spec"]["template"]["spec"]["containers"][0]["name"] = "Server"
    e = refused(kube.apply, dep)
    assert e.status == 422 and 'spec.template.spec.containers[0].name: Invalid value: "Server"' in e.message


def test_deployment_selector_must_match_its_template(kube: FakeKube) -> None:
    dep = deployment()
    dep["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    e = refused(kube.apply, dep)
    assert e.status == 422
    assert "spec.template.metadata.labels: Invalid value: " in e.message
    assert "`selector` does not match template `labels`" in e.message


def test_apply_needs_a_field_manager(kube: FakeKube) -> None:
    e = refused(kube.apply, configmap(), field_manager="")
    assert (e.status, e.reason) == (422, "Invalid")
    assert "fieldManager: Required value: is required for apply patch" in e.message


# ---- immutable fields (422) ---------------------------------------------------------------------------------


def test_deployment_selector_is_immutable(kube: FakeKube) -> None:
    kube.apply(deployment())
    changed = deployment()
    changed["spec"]["selector"]["matchLabels"]["tier"] = "x"
    changed["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    e = refused(kube.apply, changed)
    assert (e.status, e.reason) == (422, "Invalid")
    assert 'Deployment.apps "web" is invalid: spec.selector: Invalid value: ' in e.message
    assert e.message.endswith(": field is immutable")


def test_job_template_and_selector_are_immutable(kube: FakeKube) -> None:
    kube.apply(job())
    kube.apply(job())  # the same template again is fine
    e = refused(kube.apply, job(image="spectrn:0.2.0"))
    assert e.status == 422 and 'Job.batch "load" is invalid: spec.template: Invalid value: ' in e.message
    assert e.message.endswith(": field is immutable")
    selected = job()
    selected["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    e = refused(kube.update, selected)
    assert "spec.selector: Invalid value: " in e.message and "field is immutable" in e.message
    assert len([p for p in kube.kinds("Pod") if p["metadata"]["name"].startswith("load-")]) == 1


def test_service_cluster_ip_may_not_change_once_set(kube: FakeKube) -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS}, "spec": {}}
    svc["spec"]["ports"] = [{"port": 8000}]
    live = kube.apply(svc)
    ip = live["spec"]["clusterIP"]
    assert ip.startswith("10.96.") and live["spec"]["clusterIPs"] == [ip]
    assert kube.apply(svc)["spec"]["clusterIP"] == ip  # re-applying without it keeps the allocated address
    moved = copy.deepcopy(svc)
    moved["spec"].update(clusterIP="10.96.9.9", clusterIPs=["10.96.9.9"])
    e = refused(kube.apply, moved)
    assert (e.status, e.reason) == (422, "Invalid")
    assert 'Service "web" is invalid: spec.clusterIPs[0]: Invalid value: ["10.96.9.9"]: may not change once set' in (
        e.message
    )


def test_persistent_volume_source_is_immutable(kube: FakeKube) -> None:
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "models"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "h", "volumeAttributes": {"bucketName": "a"}},
        },
    }
    kube.apply(pv)
    bigger = copy.deepcopy(pv)
    bigger["spec"]["capacity"]["storage"] = "2Gi"  # capacity may change
    kube.apply(bigger)
    other = copy.deepcopy(bigger)
    other["spec"]["csi"]["volumeAttributes"]["bucketName"] = "b"
    e = refused(kube.apply, other)
    assert (e.status, e.reason) == (422, "Invalid")
    assert 'PersistentVolume "models" is invalid: spec.persistentvolumesource: Forbidden: ' in e.message
    assert "spec.persistentvolumesource is immutable after creation" in e.message
    assert e.causes[0]["reason"] == "FieldValueForbidden"


def test_persistent_volume_claim_spec_is_immutable_except_requests_of_a_bound_claim(kube: FakeKube) -> None:
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "models"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "hostPath": {"path": "/m"}},
        }
    )

    def pvc(storage: str, modes: list[str], volume: str = "models") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "claim", "namespace": NS},
            "spec": {"accessModes": modes, "volumeName": volume, "resources": {"requests": {"storage": storage}}},
        }

    assert kube.apply(pvc("1Gi", ["ReadWriteMany"]))["status"]["phase"] == "Pending"
    e = refused(kube.apply, pvc("2Gi", ["ReadWriteMany"]))  # not bound yet: requests are frozen too
    assert (
        e.status == 422 and "spec: Forbidden: spec is immutable after creation except resources.requests" in e.message
    )
    kube.tick()
    assert kube.find("PersistentVolumeClaim", "claim", NS)["status"]["phase"] == "Bound"
    kube.apply(pvc("2Gi", ["ReadWriteMany"]))  # bound: a larger request is allowed
    e = refused(kube.apply, pvc("2Gi", ["ReadWriteOnce"]))
    assert (e.status, e.reason) == (422, "Invalid")
    assert 'PersistentVolumeClaim "claim" is invalid: spec: Forbidden: spec is immutable after creation except ' in (
        e.message
    )
    assert "resources.requests and volumeAttributesClassName for bound claims" in e.message


# ---- server-side apply ownership (409) -----------------------------------------------------------------------


def test_apply_without_force_conflicts_with_another_managers_field(kube: FakeKube) -> None:
    kube.apply(deployment())
    edited = kube.find("Deployment", "web", NS)
    edited = copy.deepcopy(edited)
    edited["spec"]["replicas"] = 3
    edited["metadata"].pop("resourceVersion")
    edited["metadata"].pop("managedFields")
    kube.update(edited, field_manager="kubectl-edit")
    e = refused(kube.apply, deployment(), force=False)
    assert (e.status, e.reason) == (409, "Conflict")
    assert 'Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.replicas' in e.message
    assert e.causes == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-edit" using apps/v1',
            "field": ".spec.replicas",
        }
    ]
    assert kube.find("Deployment", "web", NS)["spec"]["replicas"] == 3


def test_force_takes_the_field_over(kube: FakeKube) -> None:
    kube.apply(deployment(), field_manager="helm")
    kube.apply(deployment(replicas=2), field_manager="other")
    e = refused(kube.apply, deployment(replicas=4), field_manager="third", force=False)
    assert 'Apply failed with 1 conflict: conflict with "other": .spec.replicas' in e.message  # an Apply manager
    live = kube.apply(deployment(replicas=4), field_manager="third", force=True)
    assert live["spec"]["replicas"] == 4
    owners = {m["manager"]: m["fieldsV1"] for m in live["metadata"]["managedFields"]}
    assert "f:replicas" in owners["third"]["f:spec"]
    assert "f:replicas" not in owners.get("other", {}).get("f:spec", {})


def test_applying_the_same_value_shares_the_field_instead_of_conflicting(kube: FakeKube) -> None:
    kube.apply(deployment(), field_manager="helm")
    kube.apply(deployment(), field_manager="spectrn", force=False)  # same values: no conflict
    managers = {m["manager"] for m in kube.find("Deployment", "web", NS)["metadata"]["managedFields"]}
    assert managers == {"helm", "spectrn"}


def test_fields_no_longer_applied_are_removed_unless_someone_else_owns_them(kube: FakeKube) -> None:
    kube.apply(configmap(team="a", tier="b"))
    assert kube.apply(configmap(team="a"))["metadata"]["labels"] == {"team": "a"}
    kube.apply(configmap(team="a", extra="c"), field_manager="other")
    assert kube.apply(configmap())["metadata"]["labels"] == {"team": "a", "extra": "c"}  # still other's


# ---- optimistic concurrency (409) ----------------------------------------------------------------------------


def test_update_with_a_stale_resource_version_conflicts(kube: FakeKube) -> None:
    first = kube.apply(deployment())
    kube.apply(deployment(replicas=2))  # someone else moved it on
    stale = copy.deepcopy(first)
    stale["metadata"].pop("managedFields")
    e = refused(kube.update, stale)
    assert (e.status, e.reason) == (409, "Conflict")
    assert e.message.endswith(
        'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply your '
        "changes to the latest version and try again"
    )
    current = kube.find("Deployment", "web", NS)
    fresh = copy.deepcopy(current)
    fresh["metadata"].pop("managedFields")
    fresh["spec"]["replicas"] = 5
    assert kube.update(fresh)["spec"]["replicas"] == 5  # the latest version goes through


def test_apply_carrying_a_stale_resource_version_conflicts(kube: FakeKube) -> None:
    kube.apply(configmap())
    kube.apply(configmap(team="x"))
    old = configmap()
    old["metadata"]["resourceVersion"] = "1"
    e = refused(kube.apply, old)
    assert (e.status, e.reason) == (409, "Conflict") and 'on configmaps "cm": the object has been modified' in e.message


# ---- watch ------------------------------------------------------------------------------------------------


def test_watch_serves_the_changes_after_its_resource_version(kube: FakeKube) -> None:
    _, rv = kube.list_meta("v1", "ConfigMap", NS)
    kube.apply(configmap("a"))
    kube.apply(configmap("a", team="x"))
    kube.delete("v1", "ConfigMap", "a", NS)
    events = [(t, o["metadata"]["name"]) for t, o in kube.watch("v1", "ConfigMap", NS, resource_version=rv)]
    assert events == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch_from_a_compacted_resource_version_is_an_expired_error_event(kube: FakeKube) -> None:
    _, rv = kube.list_meta("v1", "ConfigMap", NS)
    kube.apply(configmap("a"))
    kube.compact()
    stream = kube.watch("v1", "ConfigMap", NS, resource_version=rv)  # the stream opens (HTTP 200) ...
    e = refused(list, stream)  # ... and its one event is an ERROR carrying a Status 410
    assert e.gone and (e.status, e.reason) == (410, "Expired")
    assert f"too old resource version: {rv} (" in e.message


def test_a_client_that_falls_behind_the_history_gets_410() -> None:
    fake = FakeKube()
    fake.apply(ns_obj())
    fake.history_limit = 3
    _, rv = fake.list_meta("v1", "ConfigMap", NS)
    for i in range(5):
        fake.apply(configmap(f"c{i}"))
    e = refused(list, fake.watch("v1", "ConfigMap", NS, resource_version=rv))
    assert e.status == 410 and e.reason == "Expired"
    _, rv = fake.list_meta("v1", "ConfigMap", NS)  # re-list, then watch from there
    assert list(fake.watch("v1", "ConfigMap", NS, resource_version=rv)) == []


# ---- namespaces: Terminating -------------------------------------------------------------------------------


def test_namespace_deletion_goes_through_terminating(kube: FakeKube) -> None:
    kube.apply(configmap())
    assert kube.find("Namespace", NS)["status"]["phase"] == "Active"
    assert kube.find("Namespace", NS)["spec"]["finalizers"] == ["kubernetes"]
    assert kube.delete("v1", "Namespace", NS) is True
    ns = kube.get("v1", "Namespace", NS)
    assert ns is not None and ns["metadata"]["deletionTimestamp"] and ns["status"]["phase"] == "Terminating"
    assert kube.delete("v1", "Namespace", NS) is True  # a repeated delete answers 200 with the namespace

    e = refused(kube.apply, configmap("new"))
    assert (e.status, e.reason) == (403, "Forbidden")
    assert e.message.endswith(
        'configmaps "new" is forbidden: unable to create new content in namespace spectrn because it is being '
        "terminated"
    )
    assert e.causes == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace spectrn is being terminated",
            "field": "metadata.namespace",
        }
    ]
    assert "namespace is being deleted" in (e.hint or "")
    kube.apply(configmap(team="x"))  # updating what is already there is allowed

    kube.tick()  # the namespace controller deletes the content ...
    assert kube.find("ConfigMap", "cm", NS) is None
    assert kube.get("v1", "Namespace", NS) is not None  # ... and the namespace goes on a later tick
    kube.tick()
    assert kube.get("v1", "Namespace", NS) is None
    e = refused(kube.apply, configmap("new"))
    assert (e.status, e.reason) == (404, "NotFound") and 'namespaces "spectrn" not found' in e.message
