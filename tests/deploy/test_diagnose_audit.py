"""The diagnosis a user reads, pinned whole on hand-written pods and Deployments (issue 29's audit).

Each expected text is written out here from the cause the pod shows (the kubelet's and scheduler's own words),
never computed by spectrn's code."""

from __future__ import annotations

from typing import Any

from spectrn.deploy.diagnose import diagnose_deployment, diagnose_pod

Obj = dict[str, Any]


def pod(status: Obj) -> Obj:
    return {"metadata": {"name": "qwen-sd-vllm-abc-0"}, "status": status}


def event(reason: str, message: str, count: int = 1, etype: str = "Warning") -> Obj:
    return {"type": etype, "reason": reason, "message": message, "count": count}


def waiting(reason: str, message: str = "", **extra: Any) -> Obj:
    return {
        "containerStatuses": [{"name": "server", "state": {"waiting": {"reason": reason, "message": message}}, **extra}]
    }


def test_the_newest_six_events_are_shown_oldest_first_with_repeat_counts() -> None:
    evs = [event(f"R{i}", f"m{i}", count=3 if i == 7 else 1) for i in range(8)]  # R0..R7; R7 repeated 3 times
    d = diagnose_pod(pod({"phase": "Failed", "reason": "Evicted", "message": "low on memory"}), evs)
    assert d is not None
    # the last six of eight: R2..R7; a count of 1 shows no "(x1)"
    assert d.events == [
        "Warning R2: m2",
        "Warning R3: m3",
        "Warning R4: m4",
        "Warning R5: m5",
        "Warning R6: m6",
        "Warning R7: m7 (x3)",
    ]


def test_an_unbound_volume_claim_is_not_called_a_device_claim() -> None:
    msg = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes"
    p = pod({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}]})
    d = diagnose_pod(p, [])
    assert d is not None
    assert (d.cause, d.detail, d.fatal) == ("Unschedulable: volume claim not bound", msg, True)
    assert "kubectl get pv,pvc" in d.next_step


def test_a_scheduling_gated_pod_is_not_unschedulable() -> None:
    """PodScheduled False with reason SchedulingGated: the pod waits for its gates, the scheduler has not tried."""
    p = pod({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]})
    assert diagnose_pod(p, []) is None


def test_image_pull_detail_is_the_registrys_reason_from_the_failed_event() -> None:
    p = pod(
        {
            "containerStatuses": [
                {
                    "name": "server",
                    "image": "spectrn:9.9",
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
                }
            ]
        }
    )
    evs = [
        event("Failed", 'Failed to pull image "spectrn:9.9": not found'),
        event("BackOff", 'Back-off pulling image "spectrn:9.9"'),
    ]
    d = diagnose_pod(p, evs)
    assert d is not None
    assert d.cause == "ImagePullBackOff: image spectrn:9.9 cannot be pulled"
    assert d.detail == 'Failed to pull image "spectrn:9.9": not found'
    assert d.fatal


def test_oom_reports_the_oom_killed_exit_code_not_the_current_one() -> None:
    """The container OOM-killed last time (137) and now exited with 1: the OOM kill is what the user must see."""
    p = pod(
        {
            "containerStatuses": [
                {
                    "name": "server",
                    "restartCount": 2,
                    "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                    "state": {"terminated": {"reason": "Error", "exitCode": 1}},
                }
            ]
        }
    )
    d = diagnose_pod(p, [], previous_logs="loading weights\nKilled\n")
    assert d is not None
    assert (d.cause, d.detail) == ("OOMKilled: container server ran out of memory", "exit code 137, restarts 2")
    assert d.logs == ["loading weights", "Killed"]


def test_crashloop_shows_the_last_twenty_lines_of_the_previous_container() -> None:
    previous = "\n".join(f"line {i}" for i in range(25)) + "\n"
    p = pod(
        {
            "containerStatuses": [
                {
                    "name": "server",
                    "restartCount": 4,
                    "lastState": {"terminated": {"exitCode": 2}},
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                }
            ]
        }
    )
    d = diagnose_pod(p, [], previous_logs=previous, logs="current container line\n")
    assert d is not None
    assert d.cause == "CrashLoopBackOff: container server keeps exiting (exit code 2, restarts 4)"
    assert d.detail == "back-off 40s"
    assert d.logs == [f"line {i}" for i in range(5, 25)]  # 25 lines, the last 20: 5..24


def test_a_missing_config_reference_is_a_create_container_config_error() -> None:
    d = diagnose_pod(pod(waiting("CreateContainerConfigError", 'configmap "prompts" not found')), [])
    assert d is not None
    assert (d.cause, d.detail, d.fatal) == (
        "CreateContainerConfigError: container server cannot be created",
        'configmap "prompts" not found',
        True,
    )


def test_only_a_startup_probe_kill_is_a_startup_probe_failure() -> None:
    running = {"containerStatuses": [{"name": "server", "state": {"running": {}}}]}
    liveness = [event("Killing", "Container server failed liveness probe, will be restarted", etype="Normal")]
    assert diagnose_pod(pod(running), liveness) is None
    startup = [event("Killing", "Container server failed startup probe, will be restarted", etype="Normal")]
    d = diagnose_pod(pod(running), startup, logs="compiling graph 3/9\n")
    assert d is not None
    assert d.cause == "startup probe failed: the container was restarted before it became healthy"
    assert d.detail == "Container server failed startup probe, will be restarted"
    assert d.logs == ["compiling graph 3/9"]


def deployment(*conditions: Obj) -> Obj:
    return {"metadata": {"name": "qwen-vllm"}, "status": {"conditions": list(conditions)}}


def test_a_cleared_replica_failure_is_no_diagnosis() -> None:
    cond = {"type": "ReplicaFailure", "status": "False", "reason": "FailedCreate", "message": "old quota message"}
    assert diagnose_deployment(deployment(cond)) is None


def test_a_quota_refusal_names_the_quota() -> None:
    msg = 'pods "qwen-vllm-1" is forbidden: exceeded quota: compute, requested: aws.amazon.com/neuron=8'
    d = diagnose_deployment(
        deployment({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": msg})
    )
    assert d is not None
    assert (d.cause, d.detail, d.fatal) == ("pods cannot be created (FailedCreate)", msg, True)
    assert d.next_step == "a ResourceQuota forbids the pod: raise the quota or lower the requests in spectrn.yaml"


def test_only_an_exceeded_progress_deadline_fails_the_deployment() -> None:
    ok = {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "progressed"}
    assert diagnose_deployment(deployment(ok)) is None
    late = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "timed out"}
    d = diagnose_deployment(deployment(late))
    assert d is not None and (d.cause, d.detail) == ("Deployment exceeded its progress deadline", "timed out")
