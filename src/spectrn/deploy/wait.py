"""Waiting for both services: per-service phase from Deployment, pods, events and logs; watches wake the loop."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectrn.deploy.diagnose import Diagnosis, _event_lines, _statuses, _tail, diagnose_deployment, diagnose_pod
from spectrn.deploy.objects import Clock, Sleep
from spectrn.errors import DeployError
from spectrn.kube.api import MANAGED_SELECTOR, KubeApi, KubeApiError, Obj

if TYPE_CHECKING:
    pass


@dataclass
class ServiceState:
    variant: str
    name: str
    phase: str = "Creating"
    ready: int = 0
    desired: int = 1
    detail: str = ""
    diagnosis: Diagnosis | None = None
    image: str = ""
    window: str = "-"
    age: str = ""
    events: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.phase == "Ready"


def _pod_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _deployment_complete(dep: Obj) -> bool:
    st = dep.get("status") or {}
    want = int((dep.get("spec") or {}).get("replicas", 1))
    return (
        int(st.get("observedGeneration", 0)) >= int(dep["metadata"].get("generation", 1))
        and int(st.get("updatedReplicas", 0)) >= want
        and int(st.get("readyReplicas", 0)) >= want
        and int(st.get("availableReplicas", 0)) >= want
        and int(st.get("replicas", 0)) <= want
    )


def _pod_phase(pod: Obj, starting_label: str) -> tuple[str, str]:
    """Phase and detail of a pod that is not ready (``observe_service`` looks at no other)."""
    status = pod.get("status") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or []}
    if (conds.get("PodScheduled") or {}).get("status") != "True":
        return "Scheduling", str((conds.get("PodScheduled") or {}).get("message", ""))
    for cs in _statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") in ("ContainerCreating", "PodInitializing", "ErrImagePull"):
            return "Pulling", str(waiting.get("reason"))
    return starting_label, ""


def age_of(timestamp: str, now: float | None = None) -> str:
    """``2h05m`` since an RFC 3339 timestamp (``""`` when missing or malformed)."""
    from datetime import datetime

    try:
        then = datetime.fromisoformat(timestamp).timestamp()  # RFC 3339's "Z" is read since Python 3.11
    except ValueError:
        return ""
    secs = max(0, int((time.time() if now is None else now) - then))
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


_WINDOW_RE = re.compile(r"(?:num_speculative_tokens\"?\s*[:=]\s*|--window[ =]|--num-speculative-tokens[ =])(\d+)")


def window_of(dep: Obj) -> str:
    for c in dep["spec"]["template"]["spec"].get("containers") or []:
        m = _WINDOW_RE.search(" ".join(map(str, (c.get("command") or []) + (c.get("args") or []))))
        if m:
            return m.group(1)
    return "-"


def observe_service(
    kube: KubeApi, namespace: str, variant: str, name: str, *, starting_label: str = "Starting", log_lines: int = 20
) -> ServiceState:
    """One snapshot of a service: phase, readiness and, when something is wrong, a diagnosis."""
    state = ServiceState(variant, name)
    dep = kube.get("apps/v1", "Deployment", name, namespace)
    if dep is None:
        state.phase = "Absent"
        return state
    spec = dep["spec"]
    state.desired = int(spec.get("replicas", 1))
    state.ready = int((dep.get("status") or {}).get("readyReplicas", 0))
    containers = spec["template"]["spec"].get("containers") or [{}]
    state.image = str(containers[0].get("image", ""))
    state.window = window_of(dep) if variant == "speculative" else "-"
    state.age = age_of(str(dep["metadata"]["creationTimestamp"]))  # the API server sets it on every object
    if _deployment_complete(dep):
        state.phase = "Ready"
        return state
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
    pods = [
        p
        for p in kube.list("v1", "Pod", namespace, selector or None)
        if not p["metadata"].get("deletionTimestamp") and not _pod_ready(p)
    ]
    if not pods:
        state.phase = "Creating"
        state.detail = "rolling update: waiting for the new pod" if state.ready else "waiting for the pod"
        diag = diagnose_deployment(dep)
        if diag is not None:
            state.phase, state.diagnosis = "Failed", diag
            state.detail = f"{diag.cause}: {diag.detail}"[:300]
        return state
    rank = ("Scheduling", "Pulling", starting_label)  # least advanced first
    worst: tuple[int, str, str] | None = None
    for pod in pods:
        pname = pod["metadata"]["name"]
        events = kube.events_for("Pod", pname, namespace)
        phase, detail = _pod_phase(pod, starting_label)
        prev = ""
        if any((cs.get("lastState") or {}).get("terminated") or cs.get("restartCount") for cs in _statuses(pod)):
            prev = _safe_logs(kube, pname, namespace, previous=True, tail=log_lines)
        current = ""
        if phase == starting_label:
            current = _safe_logs(kube, pname, namespace, previous=False, tail=log_lines)
            last = _tail(current, 1)
            detail = last[0] if last else "waiting for /health"
        diag = diagnose_pod(pod, events, prev, current)
        if diag is not None and (state.diagnosis is None or (diag.fatal and not state.diagnosis.fatal)):
            state.diagnosis = diag
        if worst is None or rank.index(phase) < worst[0]:
            worst = (rank.index(phase), phase, detail)
            state.events = _event_lines(events)
            state.logs = _tail(current or prev, 10)
    assert worst is not None
    state.phase, state.detail = worst[1], worst[2]
    if state.ready:  # an old pod serves while the new one comes up (the phase is never Ready here)
        state.detail = "rolling update (old pod serving)" + (f": {state.detail}" if state.detail else "")
    if state.diagnosis is not None:
        if state.diagnosis.fatal:
            state.phase = "Failed"
        state.detail = f"{state.diagnosis.cause}: {state.diagnosis.detail}"[:300]
    return state


def _safe_logs(kube: KubeApi, pod: str, namespace: str, *, previous: bool, tail: int) -> str:
    try:
        return kube.pod_logs(pod, namespace, tail_lines=tail, previous=previous)
    except KubeApiError:
        return ""  # no previous container yet, or logs not available: the diagnosis stands without them


def _failure_error(states: Sequence[ServiceState], *, timeout: tuple[float, int] | None) -> DeployError:
    """``timeout``: the wait's timeout and the startup budget when it timed out; None when it gives up on final
    diagnoses (every state passed then has a fatal one)."""
    parts = []
    hints = []
    for s in states:
        if s.done:
            continue
        diag = s.diagnosis
        if diag is None or (timeout is not None and not diag.fatal):
            assert timeout is not None
            timeout_s, budget_s = timeout
            if s.phase in ("Starting", "Compiling"):
                cause = (
                    f"startup probe timeout: still {s.phase.lower()} after {timeout_s:.0f} s "
                    f"(startup budget {budget_s} s)"
                )
                hint = (
                    "raise probes.startup_budget_s and --timeout (first Neuron compilation of a configuration can "
                    "take hours), or pre-compile the artifacts; `spectrn status` shows progress"
                )
            else:
                cause = f"not ready after {timeout_s:.0f} s (phase {s.phase})" + (f": {s.detail}" if s.detail else "")
                hint = "re-run with a longer --timeout, or inspect with `kubectl describe pod` / `spectrn status`"
            diag_lines = diag.events if diag else s.events
            log_lines = s.logs  # a diagnosis that is not fatal carries no log lines
        else:
            cause = f"{diag.cause}: {diag.detail}"
            hint = diag.next_step
            diag_lines, log_lines = diag.events, diag.logs
        block = [f"{s.variant} service {s.name}: {cause}"]
        if diag_lines:
            block.append("  recent events:\n" + "\n".join(f"    {line}" for line in diag_lines))
        if log_lines:
            block.append("  last log lines:\n" + "\n".join(f"    {line}" for line in log_lines))
        parts.append("\n".join(block))
        hints.append(f"{s.variant}: {hint}")
    tail = "objects are left in place for inspection; `spectrn teardown` removes them"
    return DeployError("\n".join(parts) + f"\n{tail}", hint="; ".join(hints))


def wait_ready(
    kube: KubeApi,
    namespace: str,
    services: Sequence[tuple[str, str]],
    *,
    timeout_s: float,
    startup_budget_s: int,
    starting_label: str = "Starting",
    on_update: Callable[[list[ServiceState]], None] | None = None,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    poll_s: float = 5.0,
    grace_s: float = 120.0,
    max_transient_errors: int = 6,
) -> list[ServiceState]:
    """Wait until every ``(variant, deployment)`` is Ready; raise ``DeployError`` with a diagnosis otherwise.

    A fatal diagnosis must persist for ``grace_s`` before the wait gives up (a cluster autoscaler may still
    add a node; a registry may recover), except CrashLoopBackOff and OOMKilled which are final at once.
    """
    start = clock()
    first_fatal: dict[str, float] = {}
    transient = 0
    while True:
        try:
            states = [observe_service(kube, namespace, v, n, starting_label=starting_label) for v, n in services]
            _, rv = kube.list_meta("v1", "Pod", namespace, MANAGED_SELECTOR)
            transient = 0
        except KubeApiError as e:
            if e.status in (0, 429) or e.status >= 500:
                transient += 1
                if transient > max_transient_errors:
                    raise DeployError(
                        f"lost contact with the API server while waiting: {e.message}",
                        hint="the objects are applied; re-run `spectrn deploy` (it changes nothing) to keep waiting",
                    ) from None
                sleep(poll_s)
                continue
            raise
        if on_update:
            on_update(states)
        if all(s.done for s in states):
            return states
        now = clock()
        final = []
        for s in states:
            if s.diagnosis is not None and s.diagnosis.fatal:
                first_fatal.setdefault(s.name, now)
                immediate = s.diagnosis.cause.startswith(("CrashLoopBackOff", "OOMKilled", "startup probe failed"))
                if immediate or now - first_fatal[s.name] >= grace_s:
                    final.append(s)
            else:
                first_fatal.pop(s.name, None)
        if final:
            raise _failure_error(final, timeout=None)
        if now - start >= timeout_s:
            raise _failure_error(states, timeout=(timeout_s, startup_budget_s))
        _wait_for_change(kube, namespace, rv, poll_s, sleep)


def _wait_for_change(kube: KubeApi, namespace: str, rv: str, poll_s: float, sleep: Sleep) -> None:
    try:
        for _ in kube.watch("v1", "Pod", namespace, MANAGED_SELECTOR, resource_version=rv or None, timeout_s=poll_s):
            return
    except KubeApiError as e:
        if e.gone:
            return  # our resourceVersion expired: the next loop re-lists
        if e.status in (0, 429) or e.status >= 500:
            sleep(poll_s)
            return
        raise
