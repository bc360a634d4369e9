"""What apply reports and returns at its edges: the names of unchanged objects, the whole message and hint of a
failure whose roll-back itself fails, how a replacement waits for the old object (poll interval, default time
limit, hint) and what it says when the delete of the old object is refused.

Objects are written by hand; each expected message, hint and list is written out in the test."""

from __future__ import annotations

from typing import Any

import pytest

from doubles.kube_fake import FakeKube, RecordingKube
from spectrn.deploy.apply import apply_plan
from spectrn.deploy.objects import stamp
from spectrn.deploy.plan import Plan, PlanItem
from spectrn.errors import DeployError

Obj = dict[str, Any]
NS = "spectrn"
OURS = {"app.kubernetes.io/managed-by": "spectrn"}


def config_map(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": dict(OURS)},
        "data": {"k": name},
    }


def service(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "labels": dict(OURS)},
        "spec": {"selector": {"app": name}, "ports": [{"port": 8000}]},
    }


def deployment(name: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "labels": dict(OURS)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "vllm", "image": "vllm:1"}]},
            },
        },
    }


def namespace() -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": dict(OURS)}}


def test_unchanged_and_kept_objects_are_returned_by_name_and_not_applied() -> None:
    fake = FakeKube()
    plan = Plan([PlanItem(namespace(), "unchanged"), PlanItem(service("old"), "keep")])
    result = apply_plan(fake, plan)
    assert (result.created, result.updated, result.replaced, result.unchanged) == (
        [],
        [],
        [],
        ["Namespace spectrn", "Service spectrn/old"],
    )
    assert [op for op, _ in fake.calls if op == "apply"] == []


def test_a_failure_whose_roll_back_is_refused_names_every_object_left_behind() -> None:
    """Two created ConfigMaps whose roll-back deletes both fail, two updated Services, and the third Service's
    apply fails with a status that has no hint of its own: the message lists each group joined by ", ", the
    created ones newest first, and the hint is apply's own."""
    fake = FakeKube()
    fake.put(namespace())
    for name in ("s1", "s2", "s3"):
        fake.put(stamp(service(name)))
    plan = Plan(
        [
            PlanItem(config_map("a"), "create"),
            PlanItem(config_map("b"), "create"),
            PlanItem(service("s1"), "update"),
            PlanItem(service("s2"), "update"),
            PlanItem(service("s3"), "update"),
        ]
    )
    fake.fail_next("apply", kind="Service", name="s3", status=400, reason="BadRequest", message="bad")
    fake.fail_next("delete", kind="ConfigMap", status=403, reason="Forbidden", message="no", times=2)
    with pytest.raises(DeployError) as err:
        apply_plan(fake, plan)
    assert err.value.message == (
        "applying Service spectrn/s3 failed: apply Service s3: HTTP 400 BadRequest: bad. "
        "applied: ConfigMap spectrn/a, ConfigMap spectrn/b, Service spectrn/s1, Service spectrn/s2; "
        "rolled back (deleted again): nothing; "
        "COULD NOT roll back: ConfigMap spectrn/b, ConfigMap spectrn/a (run `spectrn teardown`); "
        "left updated (existed before): Service spectrn/s1, Service spectrn/s2"
    )
    assert err.value.hint == "fix the cause and re-run `spectrn deploy` (applied objects are reused)"
    assert fake.find("ConfigMap", "a", NS) is not None and fake.find("ConfigMap", "b", NS) is not None


def test_a_roll_back_that_deletes_one_object_and_not_the_other_lists_each_where_it_belongs() -> None:
    fake = FakeKube()
    fake.put(namespace())
    plan = Plan(
        [
            PlanItem(config_map("a"), "create"),
            PlanItem(config_map("b"), "create"),
            PlanItem(service("s1"), "create"),
        ]
    )
    fake.fail_next("apply", kind="Service", status=422, reason="Invalid", message="bad port")
    fake.fail_next("delete", kind="ConfigMap", name="a", status=403, reason="Forbidden", message="no")
    with pytest.raises(DeployError) as err:
        apply_plan(fake, plan)
    assert err.value.message == (
        "applying Service spectrn/s1 failed: apply Service s1: HTTP 422 Invalid: bad port. "
        "applied: ConfigMap spectrn/a, ConfigMap spectrn/b; "
        "rolled back (deleted again): ConfigMap spectrn/b; "
        "COULD NOT roll back: ConfigMap spectrn/a (run `spectrn teardown`)"
    )
    # the server's own hint for 422 is kept
    assert err.value.hint == (
        "the object was rejected as invalid: check the rendered manifest with `spectrn render` and the field named"
    )


def lingering(name: str, gets: int | None) -> tuple[RecordingKube, Plan]:
    """A deployed Deployment ``name`` that stays readable for ``gets`` more gets after its delete."""
    fake = RecordingKube()
    fake.put(namespace())
    fake.put(stamp(deployment(name)))
    fake.linger[name] = gets
    return fake, Plan([PlanItem(stamp(deployment(name)), "replace")])


def test_a_replacement_polls_for_the_old_object_every_two_seconds() -> None:
    fake, plan = lingering("qwen-sd-vllm", 2)  # seen by the first two gets, gone at the third
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        fake.sleep(seconds)

    result = apply_plan(fake, plan, clock=fake.clock, sleep=sleep)
    assert slept == [2.0, 2.0]
    assert result.replaced == ["Deployment spectrn/qwen-sd-vllm"]


def test_a_replacement_waits_five_minutes_by_default_and_hints_at_the_finalizers() -> None:
    fake, plan = lingering("qwen-sd-vllm", None)
    start = fake.clock()
    with pytest.raises(DeployError) as err:
        apply_plan(fake, plan, clock=fake.clock, sleep=fake.sleep)
    assert err.value.message == (
        "applying Deployment spectrn/qwen-sd-vllm failed: replace Deployment spectrn/qwen-sd-vllm: still being "
        "deleted after 300 s. applied: nothing; rolled back (deleted again): nothing; deleted to be replaced, not "
        "created again: Deployment spectrn/qwen-sd-vllm (re-run `spectrn deploy`)"
    )
    assert err.value.hint == "see `kubectl get deployment qwen-sd-vllm -o yaml` (finalizers); then re-run"
    assert fake.clock() - start == 302  # polled every 2 s: 0, 2, ..., 302 > 300


def test_a_replacement_whose_delete_is_refused_does_not_claim_the_old_object_was_deleted() -> None:
    """The delete of the old object fails (RBAC): it is still there, unchanged, so the message must not say it was
    deleted to be replaced."""
    fake = FakeKube()
    fake.put(namespace())
    fake.put(stamp(deployment("qwen-sd-vllm")))
    plan = Plan([PlanItem(stamp(deployment("qwen-sd-vllm")), "replace")])
    fake.fail_next("delete", kind="Deployment", status=403, reason="Forbidden", message="not allowed")
    with pytest.raises(DeployError) as err:
        apply_plan(fake, plan, clock=fake.clock, sleep=fake.sleep)
    assert err.value.message == (
        "applying Deployment spectrn/qwen-sd-vllm failed: delete Deployment qwen-sd-vllm: HTTP 403 Forbidden: "
        "not allowed. applied: nothing; rolled back (deleted again): nothing"
    )
    assert fake.find("Deployment", "qwen-sd-vllm", NS) is not None
