"""What ``spectrn deploy``/``status`` report while a service comes up (issue 29's audit): Ready only when the
rollout is complete, the least advanced pod's phase, the fatal diagnosis first, and when the wait gives up.

Deployments and pods are written by hand into the fake cluster (no controller runs: the fake's clock never
ticks in ``observe_service``), so each expected state is read off the objects in the test."""

from __future__ import annotations

from typing import Any

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.deploy.wait import observe_service, wait_ready, window_of
from spectrn.errors import DeployError
from spectrn.kube.api import KubeApiError

Obj = dict[str, Any]
NS = "spectrn"
MANAGED = {"app.kubernetes.io/managed-by": "spectrn", "app": "qwen-sd-vllm"}


def put_deployment(fake: FakeKube, status: Obj, *, replicas: int = 1, args: list[str] | None = None) -> None:
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    fake.put(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "qwen-sd-vllm", "namespace": NS, "labels": dict(MANAGED)},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "qwen-sd-vllm"}},
                "template": {"spec": {"containers": [{"name": "server", "image": "vllm:1", "args": args or []}]}},
            },
            "status": status,
        }
    )  # put() sets metadata.generation = 1


def put_pod(fake: FakeKube, name: str, status: Obj, **meta: Any) -> None:
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": dict(MANAGED), **meta},
            "spec": {"containers": [{"name": "server"}]},
            "status": status,
        }
    )


SCHEDULED = {"type": "PodScheduled", "status": "True"}
UNSCHEDULED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
NOT_READY = {"type": "Ready", "status": "False"}
COMPLETE = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}


def observe(fake: FakeKube) -> Any:
    return observe_service(fake, NS, "speculative", "qwen-sd-vllm")


def test_a_complete_rollout_of_the_current_generation_is_ready() -> None:
    fake = FakeKube()
    put_deployment(fake, dict(COMPLETE), args=["--window", "5"])
    s = observe(fake)
    assert (s.phase, s.ready, s.desired, s.image, s.window, s.detail) == ("Ready", 1, 1, "vllm:1", "5", "")


@pytest.mark.parametrize(
    "change",
    [
        {"observedGeneration": 0},  # the controller has not seen the new template yet
        {"updatedReplicas": 0},  # the ready pod is the old template's
        {"replicas": 2},  # the old pod still runs beside the new one
    ],
)
def test_an_unfinished_rollout_is_not_ready(change: Obj) -> None:
    fake = FakeKube()
    put_deployment(fake, {**COMPLETE, **change})
    s = observe(fake)
    # no pod that is not ready: the new pod is still to come, the old one (ready) serves
    assert (s.phase, s.ready, s.detail) == ("Creating", 1, "rolling update: waiting for the new pod")


def test_ready_counts_ready_replicas_not_all_replicas() -> None:
    fake = FakeKube()
    put_deployment(fake, {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1})
    put_pod(fake, "new-0", {"conditions": [{"type": "PodScheduled", "status": "False", "message": "queued"}]})
    s = observe(fake)
    assert (s.phase, s.ready, s.desired, s.detail) == ("Scheduling", 1, 1, "rolling update (old pod serving): queued")


def test_without_any_ready_pod_it_is_waiting_for_the_pod() -> None:
    fake = FakeKube()
    put_deployment(fake, {"observedGeneration": 1, "replicas": 0})
    s = observe(fake)
    assert (s.phase, s.ready, s.detail) == ("Creating", 0, "waiting for the pod")


def test_a_pod_being_deleted_is_not_observed() -> None:
    fake = FakeKube()
    put_deployment(fake, {"observedGeneration": 1, "replicas": 1})
    put_pod(fake, "old-0", {"conditions": [UNSCHEDULED]}, deletionTimestamp="2026-01-01T00:00:00Z")
    s = observe(fake)
    assert (s.phase, s.detail, s.diagnosis) == ("Creating", "waiting for the pod", None)


def test_a_first_image_pull_error_is_still_pulling() -> None:
    fake = FakeKube()
    put_deployment(fake, {"observedGeneration": 1, "replicas": 1})
    cs = {"name": "server", "image": "vllm:1", "state": {"waiting": {"reason": "ErrImagePull", "message": "x"}}}
    put_pod(fake, "new-0", {"conditions": [SCHEDULED], "containerStatuses": [cs]})
    s = observe(fake)
    assert s.phase == "Pulling"  # not fatal yet: the kubelet retries
    assert s.detail == "ErrImagePull: image vllm:1 cannot be pulled: x"


def test_the_least_advanced_pod_decides_the_phase() -> None:
    fake = FakeKube()
    put_deployment(fake, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    put_pod(fake, "a-starting", {"phase": "Running", "conditions": [SCHEDULED, NOT_READY]})
    put_pod(fake, "b-scheduling", {"conditions": [UNSCHEDULED]})
    s = observe(fake)
    assert s.phase == "Failed"  # the unschedulable pod's fatal diagnosis
    assert s.detail == "Unschedulable: 0/1 nodes"
    fake2 = FakeKube()
    put_deployment(fake2, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    put_pod(fake2, "a-starting", {"phase": "Running", "conditions": [SCHEDULED, NOT_READY]})
    put_pod(
        fake2,
        "b-pulling",
        {
            "conditions": [SCHEDULED],
            "containerStatuses": [{"name": "server", "state": {"waiting": {"reason": "ContainerCreating"}}}],
        },
    )
    assert (observe(fake2).phase, observe(fake2).detail) == ("Pulling", "ContainerCreating")


def test_a_fatal_diagnosis_wins_over_an_earlier_pods_passing_one() -> None:
    fake = FakeKube()
    put_deployment(fake, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    put_pod(fake, "a-mount", {"phase": "Pending", "conditions": [SCHEDULED]})
    fake.events.append(
        {
            "involvedObject": {"kind": "Pod", "name": "a-mount", "namespace": NS},
            "type": "Warning",
            "reason": "FailedMount",
            "message": "bucket not found",
            "count": 1,
        }
    )
    crash = {
        "name": "server",
        "restartCount": 3,
        "lastState": {"terminated": {"exitCode": 1}},
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
    }
    put_pod(fake, "b-crash", {"phase": "Running", "conditions": [SCHEDULED, NOT_READY], "containerStatuses": [crash]})
    s = observe(fake)
    assert s.phase == "Failed"
    assert s.detail == "CrashLoopBackOff: container server keeps exiting (exit code 1, restarts 3): back-off"


def test_an_old_pod_serving_during_a_rollout_is_named() -> None:
    fake = FakeKube()
    put_deployment(fake, {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1})
    put_pod(
        fake,
        "new-0",
        {
            "phase": "Pending",
            "conditions": [SCHEDULED],
            "containerStatuses": [{"name": "server", "state": {"waiting": {"reason": "ContainerCreating"}}}],
        },
    )
    s = observe(fake)
    assert (s.phase, s.detail) == ("Pulling", "rolling update (old pod serving): ContainerCreating")


@pytest.mark.parametrize(
    ("args", "window"),
    [
        (["--window", "5"], "5"),
        (["--window=6"], "6"),
        (["--num-speculative-tokens", "3"], "3"),
        (["--speculative-config", '{"model": "d", "num_speculative_tokens": 4}'], "4"),
        (["--max-num-seqs", "4"], "-"),
    ],
)
def test_the_window_is_read_from_every_way_a_server_is_given_it(args: list[str], window: str) -> None:
    dep = {"spec": {"template": {"spec": {"containers": [{"args": args}]}}}}
    assert window_of(dep) == window


# ---- wait_ready: when it gives up -----------------------------------------------------------------


def test_oom_fails_at_once_without_waiting_for_the_grace_period(fake: FakeKube, sim_cfg: Any) -> None:
    fake.behave("qwen-sd-vllm", "oom")
    start = fake.clock()
    with pytest.raises(DeployError, match="OOMKilled"):
        run_deploy(fake, sim_cfg, grace_s=600, timeout_s=3000)
    assert fake.clock() - start < 600  # final at once, unlike an unschedulable pod


def test_a_server_still_starting_at_the_timeout_is_a_startup_probe_timeout(fake: FakeKube, sim_cfg: Any) -> None:
    fake.behave("qwen-sd-vllm", "startup-timeout")
    with pytest.raises(DeployError) as err:
        run_deploy(fake, sim_cfg, timeout_s=300)
    budget = sim_cfg.probes.startup_budget_s
    assert f"startup probe timeout: still starting after 300 s (startup budget {budget} s)" in str(err.value)


def test_the_wait_gives_up_exactly_at_its_timeout() -> None:
    fake = FakeKube()  # each loop's watch advances the fake clock by one 5 s tick: 0, 5, ..., 20
    start = fake.clock()
    with pytest.raises(DeployError, match=r"not ready after 20 s \(phase Absent\)"):
        wait_ready(
            fake, NS, [("baseline", "nope")], timeout_s=20, startup_budget_s=100, clock=fake.clock, sleep=fake.sleep
        )
    assert fake.clock() - start == 20


def ready_cluster() -> tuple[FakeKube, list[tuple[str, str]]]:
    fake = FakeKube()
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    run_deploy(fake, cfg)
    return fake, [("baseline", cfg.baseline_name), ("speculative", cfg.speculative_name)]


def wait(fake: FakeKube, services: list[tuple[str, str]]) -> Any:
    return wait_ready(fake, NS, services, timeout_s=600, startup_budget_s=100, clock=fake.clock, sleep=fake.sleep)


def test_six_lost_contacts_in_a_row_are_survived_the_seventh_is_not() -> None:
    fake, services = ready_cluster()
    fake.fail_next("list", kind="Pod", status=0, times=6)  # max_transient_errors = 6
    assert all(s.done for s in wait(fake, services))
    fake.fail_next("list", kind="Pod", status=0, times=7)
    with pytest.raises(DeployError, match="lost contact with the API server while waiting"):
        wait(fake, services)


def test_an_http_500_while_waiting_is_retried() -> None:
    fake, services = ready_cluster()
    fake.fail_next("list", kind="Pod", status=500, times=2)
    assert all(s.done for s in wait(fake, services))


def test_a_forbidden_list_while_waiting_is_raised_at_once() -> None:
    fake, services = ready_cluster()
    fake.fail_next("list", kind="Pod", status=403, reason="Forbidden", message="pods is forbidden", times=5)
    with pytest.raises(KubeApiError, match="pods is forbidden"):
        wait(fake, services)
    assert fake._failures[-1].times == 4
