"""Why a pod or Deployment is not becoming ready: one DeployError naming the cause and the next step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectrn.kube.api import Obj

if TYPE_CHECKING:
    pass


@dataclass
class Diagnosis:
    cause: str
    detail: str
    next_step: str
    fatal: bool
    pod: str = ""
    events: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)


def _event_lines(events: Sequence[Obj], limit: int = 6) -> list[str]:
    lines = []
    for ev in events[-limit:]:
        count = ev.get("count") or 1
        times = f" (x{count})" if count and int(count) > 1 else ""
        lines.append(f"{ev.get('type', '')} {ev.get('reason', '')}: {ev.get('message', '')}{times}".strip())
    return lines


def _tail(text: str, n: int) -> list[str]:
    return [line for line in text.splitlines() if line.strip()][-n:]


def _statuses(pod: Obj) -> list[Obj]:
    st = pod.get("status") or {}
    return list(st.get("initContainerStatuses") or []) + list(st.get("containerStatuses") or [])


def diagnose_pod(pod: Obj, events: Sequence[Obj], previous_logs: str = "", logs: str = "") -> Diagnosis | None:
    """The failure a pod shows, from its conditions, container states and events (pure)."""
    name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    ev_lines = _event_lines(events)

    def d(cause: str, detail: str, next_step: str, fatal: bool, log_lines: list[str] | None = None) -> Diagnosis:
        return Diagnosis(cause, detail, next_step, fatal, name, ev_lines, log_lines or [])

    for cond in status.get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            msg = str(cond.get("message") or "")
            if not msg:
                msg = next(
                    (e.get("message", "") for e in reversed(events) if e.get("reason") == "FailedScheduling"), ""
                )
            low = msg.lower()
            if "insufficient aws.amazon.com/neuron" in low:
                return d(
                    "Unschedulable: insufficient Neuron devices",
                    msg,
                    "free Neuron devices or add a trn2.48xlarge node (check `kubectl describe nodes`), "
                    "or lower resources.neuron_devices; deploy one service at a time with --only",
                    True,
                )
            if "claim" in low and "persistentvolumeclaim" not in low:
                return d(
                    "Unschedulable: Neuron device claim not allocatable",
                    msg,
                    "check the Neuron DRA driver pods and `kubectl get resourceslices`: the devices must be free, "
                    "match the claim's selector (instance type) and the device-group constraint; "
                    "lower resources.neuron_devices or free devices held by other claims",
                    True,
                )
            if "persistentvolumeclaim" in low:
                return d(
                    "Unschedulable: volume claim not bound",
                    msg,
                    "check the S3 PersistentVolume and claim (`kubectl get pv,pvc`) and the Mountpoint for S3 "
                    "CSI driver",
                    True,
                )
            return d(
                "Unschedulable",
                msg or "the scheduler found no node",
                "read the scheduler message above and "
                "check node capacity, taints and selectors (`kubectl describe pod`)",
                True,
            )

    startup_kill = next(
        (e for e in reversed(events) if e.get("reason") == "Killing" and "startup probe" in str(e.get("message", ""))),
        None,
    )
    for cs in _statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason", "")
        if reason in ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"):
            # The "Failed" event carries the registry's reason; "BackOff" only says that kubelet waits.
            failed = next((e.get("message", "") for e in reversed(events) if e.get("reason") == "Failed"), "")
            return d(
                f"{reason}: image {cs.get('image', '?')} cannot be pulled",
                failed or str(waiting.get("message", "")),
                "check the image name and tag (config keys image / spectrn_image / sim.image) and that the nodes "
                "may pull from the registry (ECR pull permissions on the node role); on kind, `kind load "
                "docker-image` the image first",
                reason != "ErrImagePull",
            )
        last = (cs.get("lastState") or {}).get("terminated") or {}
        term = (cs.get("state") or {}).get("terminated") or {}
        if "OOMKilled" in (last.get("reason"), term.get("reason")):
            return d(
                f"OOMKilled: container {cs.get('name')} ran out of memory",
                f"exit code {last.get('exitCode') or term.get('exitCode')}, restarts {cs.get('restartCount', 0)}",
                "raise resources.memory (and the node's memory), or lower max_model_len / max_num_seqs",
                True,
                _tail(previous_logs, 10),
            )
        if startup_kill is not None:
            return d(
                "startup probe failed: the container was restarted before it became healthy",
                str(startup_kill.get("message", "")),
                "raise probes.startup_budget_s (Neuron compilation can take hours), or pre-compile into the "
                "artifacts folder on S3 so the server loads instead of compiling",
                True,
                _tail(previous_logs or logs, 10),
            )
        if reason == "CrashLoopBackOff":
            return d(
                f"CrashLoopBackOff: container {cs.get('name')} keeps exiting (exit code {last.get('exitCode', '?')}, "
                f"restarts {cs.get('restartCount', 0)})",
                str(waiting.get("message", "")),
                "read the last log lines (`kubectl logs --previous`); a bad vLLM flag, model path or speculation "
                "setting is the usual cause: fix it in spectrn.yaml and re-run `spectrn deploy`",
                True,
                _tail(previous_logs, 20),
            )
        if reason in ("CreateContainerConfigError", "CreateContainerError", "RunContainerError"):
            return d(
                f"{reason}: container {cs.get('name')} cannot be created",
                str(waiting.get("message", "")),
                "a referenced Secret, ConfigMap or volume is missing or invalid (e.g. hf_token_secret): create it "
                "or fix the reference",
                True,
            )
    if status.get("phase") == "Failed":
        return d(
            f"pod failed: {status.get('reason', 'Failed')}",
            str(status.get("message", "")),
            "read the recent events; an evicted pod usually means the node ran out of memory or disk",
            True,
        )
    mount = next((e for e in reversed(events) if e.get("reason") in ("FailedMount", "FailedAttachVolume")), None)
    if mount is not None:
        return d(
            "volume cannot be mounted",
            str(mount.get("message", "")),
            "check the S3 bucket name/region, the CSI driver and its IAM role (s3 keys in spectrn.yaml)",
            False,
        )
    return None


def diagnose_deployment(dep: Obj) -> Diagnosis | None:
    """Failures that stop a Deployment before any pod exists: admission, quota, progress deadline (pure)."""
    for cond in (dep.get("status") or {}).get("conditions") or []:
        msg = str(cond.get("message") or "")
        if cond.get("type") == "ReplicaFailure" and cond.get("status") == "True":
            low = msg.lower()
            if "podsecurity" in low:
                step = "the namespace's Pod Security level rejects the pod: use a namespace that allows it"
            elif "quota" in low:
                step = "a ResourceQuota forbids the pod: raise the quota or lower the requests in spectrn.yaml"
            else:
                step = "read the message: an admission webhook or policy rejected the pod"
            return Diagnosis(f"pods cannot be created ({cond.get('reason', 'FailedCreate')})", msg, step, True)
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return Diagnosis(
                "Deployment exceeded its progress deadline",
                msg,
                "inspect the pods with `kubectl describe pod`; re-run `spectrn deploy` once fixed",
                True,
            )
    return None
