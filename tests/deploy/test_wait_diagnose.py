"""Waiting with a live view, and the diagnosis of every failure mode: cause, evidence, next step."""

from __future__ import annotations

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import run_deploy
from spectrn.deploy.diagnose import diagnose_pod
from spectrn.deploy.wait import wait_ready
from spectrn.errors import DeployError
from spectrn.kube.api import KubeApiError


def phases_seen(fake, cfg, **kw):
    seen: dict[str, list[str]] = {}

    def record(states):
        for s in states:
            lst = seen.setdefault(s.variant, [])
            if not lst or lst[-1] != s.phase:
                lst.append(s.phase)

    report = run_deploy(fake, cfg, on_update=record, **kw)
    return report, seen


def test_ready_path_walks_through_every_phase(fake, sim_cfg):
    report, seen = phases_seen(fake, sim_cfg)
    assert seen["baseline"] == ["Scheduling", "Pulling", "Starting", "Ready"]
    assert seen["speculative"] == ["Scheduling", "Pulling", "Starting", "Ready"]
    assert all(s.done for s in report.states)


def test_neuron_runtime_calls_the_long_phase_compiling(fake, neuron_cfg):
    fake.behave("qwen-sd-vllm", "slow-compile")
    _, seen = phases_seen(fake, neuron_cfg)
    assert seen["speculative"] == ["Scheduling", "Pulling", "Compiling", "Ready"]


def fail_with(fake, cfg, scenario, variant="qwen-sd-vllm", **kw):
    fake.behave(variant, scenario)
    with pytest.raises(DeployError) as err:
        run_deploy(fake, cfg, **kw)
    return str(err.value), err.value.hint or ""


def test_unschedulable_insufficient_neuron(fake, sim_cfg):
    msg, hint = fail_with(fake, sim_cfg, "unschedulable-neuron")
    assert "speculative service qwen-sd-vllm: Unschedulable: insufficient Neuron devices" in msg
    assert "2 Insufficient aws.amazon.com/neuron" in msg  # the scheduler's own message
    assert "FailedScheduling" in msg  # the pod's events
    assert "trn2.48xlarge node" in hint and "resources.neuron_devices" in hint
    assert "spectrn teardown" in msg


def test_unschedulable_claim_not_allocatable(fake, neuron_cfg):
    msg, hint = fail_with(fake, neuron_cfg, "unschedulable-claim")
    assert "Neuron device claim not allocatable" in msg and "cannot allocate all claims" in msg
    assert "resourceslices" in hint


def test_unschedulable_waits_for_the_grace_period_first(fake, sim_cfg):
    fake.behave("qwen-sd-vllm", "unschedulable-neuron")
    start = fake.clock()
    with pytest.raises(DeployError):
        run_deploy(fake, sim_cfg, grace_s=60)
    assert fake.clock() - start >= 60  # an autoscaler gets its chance


def test_image_pull_backoff(fake, sim_cfg):
    msg, hint = fail_with(fake, sim_cfg, "image-pull", variant="qwen-vllm")
    assert "baseline service qwen-vllm: ImagePullBackOff: image spectrn:0.1.0 cannot be pulled" in msg
    assert "not found" in msg
    assert "kind load" in hint and "image" in hint


def test_crashloop_shows_last_log_lines(fake, sim_cfg):
    msg, hint = fail_with(fake, sim_cfg, "crashloop")
    assert "CrashLoopBackOff: container" in msg and "exit code 1" in msg
    assert "last log lines:" in msg
    assert "ValueError: speculative_config: num_speculative_tokens must be positive" in msg
    assert "kubectl logs --previous" in hint


def test_oom_killed(fake, sim_cfg):
    msg, hint = fail_with(fake, sim_cfg, "oom")
    assert "OOMKilled: container" in msg and "exit code 137" in msg
    assert "resources.memory" in hint and "max_num_seqs" in hint


def test_startup_probe_killed_container(fake, neuron_cfg):
    msg, hint = fail_with(fake, neuron_cfg, "startup-killed")
    assert "startup probe failed" in msg and "failed startup probe, will be restarted" in msg
    assert "probes.startup_budget_s" in hint


def test_startup_probe_timeout_exceeding_the_budget(fake, neuron_cfg):
    msg, hint = fail_with(fake, neuron_cfg, "startup-timeout", timeout_s=300)
    assert "startup probe timeout: still compiling after 300 s (startup budget 17100 s)" in msg
    assert "Startup probe failed" in msg  # the kubelet's events
    assert "compiling graph" in msg  # the last log lines
    assert "probes.startup_budget_s" in hint and "--timeout" in hint


def test_only_the_failing_service_is_reported(fake, sim_cfg):
    msg, _ = fail_with(fake, sim_cfg, "oom")
    assert "qwen-sd-vllm" in msg and "baseline service" not in msg


def test_transient_api_errors_while_waiting_are_survived(fake, sim_cfg):
    fake.fail_next("list", kind="Pod", status=0, times=2)
    fake.fail_next("watch", status=410, reason="Expired", message="too old resource version: 1 (2)")
    fake.fail_next("watch", status=503, reason="ServiceUnavailable", message="etcd leader changed")
    report = run_deploy(fake, sim_cfg)
    assert all(s.done for s in report.states)


def test_persistent_api_outage_while_waiting_is_reported(fake, sim_cfg):
    fake.fail_next("list", kind="Pod", status=0, times=100)
    with pytest.raises(DeployError) as err:
        run_deploy(fake, sim_cfg)
    assert "lost contact with the API server while waiting" in str(err.value)
    assert "re-run `spectrn deploy`" in err.value.hint


def test_forbidden_while_waiting_is_not_retried(fake, sim_cfg):
    fake.fail_next("events", status=403, reason="Forbidden", message='events is forbidden: User "dev"', times=50)
    with pytest.raises(KubeApiError, match='events is forbidden: User "dev"') as err:
        run_deploy(fake, sim_cfg)
    assert err.value.status == 403 and fake._failures[0].times == 49  # raised at the first refusal


def test_wait_ready_on_absent_deployment_times_out_clearly():
    fake = FakeKube()
    with pytest.raises(DeployError) as err:
        wait_ready(
            fake,
            "spectrn",
            [("baseline", "nope")],
            timeout_s=20,
            startup_budget_s=100,
            clock=fake.clock,
            sleep=fake.sleep,
        )
    assert "not ready after 20 s (phase Absent)" in str(err.value)


# ---- diagnose_pod on hand-written pods (pure) ------------------------------------------------------


def pod(status):
    return {"metadata": {"name": "p"}, "status": status}


def test_diagnose_healthy_pod_is_none():
    assert diagnose_pod(pod({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}), []) is None


def test_diagnose_uses_the_failed_scheduling_event_when_the_condition_has_no_message():
    p = pod({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
    ev = [{"reason": "FailedScheduling", "message": "0/3 nodes are available: 3 Insufficient aws.amazon.com/neuron."}]
    d = diagnose_pod(p, ev)
    assert d.cause == "Unschedulable: insufficient Neuron devices" and "3 Insufficient" in d.detail


def test_diagnose_err_image_pull_is_not_final_yet():
    p = pod({"containerStatuses": [{"name": "c", "image": "x:1", "state": {"waiting": {"reason": "ErrImagePull"}}}]})
    d = diagnose_pod(p, [])
    assert d.cause.startswith("ErrImagePull") and not d.fatal


def test_diagnose_missing_secret():
    p = pod(
        {
            "containerStatuses": [
                {
                    "name": "c",
                    "state": {
                        "waiting": {"reason": "CreateContainerConfigError", "message": 'secret "hf-token" not found'}
                    },
                }
            ]
        }
    )
    d = diagnose_pod(p, [])
    assert 'secret "hf-token" not found' in d.detail and "hf_token_secret" in d.next_step


def test_diagnose_evicted():
    d = diagnose_pod(
        pod({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}), []
    )
    assert d.cause == "pod failed: Evicted" and d.fatal


def test_diagnose_failed_mount_is_reported_but_not_final():
    ev = [{"type": "Warning", "reason": "FailedMount", "message": "MountVolume.SetUp failed: bucket not found"}]
    d = diagnose_pod(pod({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}), ev)
    assert d.cause == "volume cannot be mounted" and not d.fatal and "bucket" in d.next_step


def test_pod_security_rejection_before_any_pod_exists(fake, sim_cfg):
    from spectrn.deploy.wait import observe_service

    run_deploy(fake, sim_cfg)
    dep = fake.find("Deployment", "qwen-vllm", "spectrn")
    for p in [p for p in fake.kinds("Pod") if p["metadata"]["name"].startswith("qwen-vllm-")]:
        fake.objects.pop(("", "Pod", "spectrn", p["metadata"]["name"]))
    msg = 'pods "qwen-vllm-abc" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'
    dep["status"] = {
        "observedGeneration": 1,
        "replicas": 0,
        "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": msg}],
    }
    state = observe_service(fake, "spectrn", "baseline", "qwen-vllm")
    assert state.phase == "Failed" and "violates PodSecurity" in state.detail
    assert "Pod Security level" in state.diagnosis.next_step


def test_a_watch_that_falls_behind_the_servers_history_re_lists(fake, sim_cfg):
    """Every pod change in a tick overflows a 2-event history: each watch from the last list's resourceVersion
    gets 410 Expired (an ERROR event), and the wait re-lists instead of failing."""
    fake.history_limit = 2
    report = run_deploy(fake, sim_cfg)
    assert all(s.done for s in report.states)
    assert fake.expired_watches > 0
