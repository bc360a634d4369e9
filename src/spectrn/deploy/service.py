"""Deploy, watch, diagnose, report and tear down spectrn's services, through ``spectrn.kube.client.KubeApi``.

The flow of ``spectrn deploy``:

    render -> plan -> preflight -> apply (dependency order) -> wait (live view) -> diagnose on failure

* **plan**: every rendered object is stamped with ``spectrn.io/spec-hash`` (a hash of the rendered object)
  and compared with the live one: ``create``, ``update`` or ``unchanged``. Unchanged objects are not sent,
  so re-running with the same configuration changes nothing, and a new window changes only the
  speculative Deployment's template (the only object whose rendering depends on it), which rolls that
  service alone. A pre-existing namespace that spectrn did not create is used but never adopted
  (``keep``), so teardown can never delete it; any other same-named object not managed by spectrn is a
  pre-flight error rather than something to overwrite.
* **preflight**: permissions (SelfSubjectAccessReview), API groups for the resources mode (DRA
  ``resource.k8s.io/v1`` / ``v1beta1`` and the ``neuron.aws.com`` DeviceClass, or the device plugin's
  ``aws.amazon.com/neuron``), the CSI driver of any rendered PersistentVolume, and Neuron capacity.
* **apply**: server-side apply in dependency order. If an apply fails part-way, the objects this call
  *created* are deleted again (objects that existed before are left as they are) and the error lists
  exactly what was applied, what was rolled back and what was left.
* **wait**: per service: Creating -> Scheduling -> Pulling -> Starting/Compiling -> Ready, from the
  Deployment status, pod conditions, container states, events and the last log line. Watches wake the loop
  early; a 410 Gone or a dropped connection just means a re-list.
* **diagnose**: Unschedulable (insufficient Neuron devices, claim not allocatable), ImagePullBackOff,
  CrashLoopBackOff (with the last log lines), OOMKilled and startup-probe failures/timeouts each become a
  ``DeployError`` naming the cause, the pod's recent events and log lines, and the next step.

Teardown deletes only objects labelled ``app.kubernetes.io/managed-by=spectrn`` (cluster-scoped ones also
need ``spectrn.io/namespace=<namespace>``), and deletes the namespace only when spectrn created it and
nothing else lives in it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from spectrn.errors import ConfigError, DeployError, Interrupted
from spectrn.kube.client import (
    COMPONENT_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MANAGED_SELECTOR,
    KubeApi,
    KubeApiError,
    Obj,
    describe,
    labels_of,
    neuron_quantity,
)

if TYPE_CHECKING:
    from spectrn.spec.config import SpectrnConfig

SPEC_HASH = "spectrn.io/spec-hash"
NAMESPACE_LABEL = "spectrn.io/namespace"
NEURON_RESOURCE = "aws.amazon.com/neuron"
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
NEURON_DRIVER = "neuron.aws.com"
VARIANTS = ("baseline", "speculative")

# Dependency order: what a later object refers to is applied first (and deleted last).
KIND_ORDER = (
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ResourceClaimTemplate",
    "Deployment",
    "Service",
    "Job",
)

Action = Literal["create", "update", "unchanged", "keep"]
Severity = Literal["ok", "warn", "error"]
Clock = Callable[[], float]
Sleep = Callable[[float], None]


def _kind_rank(obj: Obj) -> int:
    kind = obj.get("kind", "")
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def order_objects(objects: Iterable[Obj]) -> list[Obj]:
    """Dependency order (stable: objects of one kind keep the renderer's order)."""
    return sorted(objects, key=_kind_rank)


def spec_hash(obj: Obj) -> str:
    """Hash of the rendered object minus the hash annotation itself (stable key order)."""
    clean = copy.deepcopy(obj)
    annotations = (clean.get("metadata") or {}).get("annotations") or {}
    annotations.pop(SPEC_HASH, None)
    return hashlib.sha256(json.dumps(clean, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def stamp(obj: Obj) -> Obj:
    """A copy of ``obj`` carrying its spec hash annotation."""
    out = copy.deepcopy(obj)
    digest = spec_hash(out)
    out.setdefault("metadata", {}).setdefault("annotations", {})[SPEC_HASH] = digest
    return out


def _managed(obj: Obj | None) -> bool:
    return obj is not None and labels_of(obj).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


# ---- plan ----------------------------------------------------------------------------------------


@dataclass
class PlanItem:
    obj: Obj
    action: Action
    reason: str = ""
    foreign: bool = False

    @property
    def name(self) -> str:
        return describe(self.obj)


@dataclass
class Plan:
    items: list[PlanItem]

    @property
    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action in ("create", "update")]

    def summary(self) -> str:
        counts = {a: sum(1 for i in self.items if i.action == a) for a in ("create", "update", "unchanged", "keep")}
        return ", ".join(f"{n} {a}" for a, n in counts.items() if n) or "nothing to do"


def make_plan(kube: KubeApi, objects: Iterable[Obj]) -> Plan:
    """Compare each rendered object with the live one (by its spec-hash annotation)."""
    items = []
    for raw in order_objects(objects):
        obj = stamp(raw)
        meta = obj["metadata"]
        try:
            live = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        except KubeApiError as e:
            if e.status == 403 and obj["kind"] == "Namespace":
                # Users with namespace-scoped RBAC cannot read Namespaces: use it, never adopt or delete it.
                items.append(PlanItem(obj, "keep", "cannot read namespaces (forbidden): assumed to exist, not adopted"))
                continue
            raise
        if live is None:
            items.append(PlanItem(obj, "create"))
            continue
        if not _managed(live):
            if obj["kind"] == "Namespace":
                items.append(PlanItem(obj, "keep", "exists and is not spectrn's: used as is, never deleted"))
            else:
                items.append(PlanItem(obj, "update", "exists and is NOT managed by spectrn", foreign=True))
            continue
        live_hash = ((live.get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH)
        if live_hash == meta["annotations"][SPEC_HASH]:
            items.append(PlanItem(obj, "unchanged"))
        else:
            items.append(
                PlanItem(obj, "update", f"spec hash {live_hash or 'none'} -> {meta['annotations'][SPEC_HASH]}")
            )
    return Plan(items)


# ---- preflight -----------------------------------------------------------------------------------


@dataclass
class Finding:
    check: str
    severity: Severity
    message: str
    hint: str = ""


def _per_pod_devices(objects: Sequence[Obj]) -> dict[str, int]:
    """Neuron devices each Deployment's pod asks for: device-plugin limits or its DRA claim template's count."""
    templates: dict[str, int] = {}
    for o in objects:
        if o.get("kind") == "ResourceClaimTemplate":
            total = 0
            for req in ((o.get("spec") or {}).get("spec") or {}).get("devices", {}).get("requests", []) or []:
                exact = req.get("exactly") or req
                total += int(exact.get("count") or 1)
            templates[o["metadata"]["name"]] = total
    out: dict[str, int] = {}
    for o in objects:
        if o.get("kind") != "Deployment":
            continue
        pod = o["spec"]["template"]["spec"]
        n = 0
        for c in pod.get("containers") or []:
            limits = (c.get("resources") or {}).get("limits") or {}
            n += neuron_quantity(limits.get(NEURON_RESOURCE, 0))
        for claim in pod.get("resourceClaims") or []:
            n += templates.get(str(claim.get("resourceClaimTemplateName", "")), 0)
        replicas = int(o["spec"].get("replicas", 1))
        out[o["metadata"]["name"]] = n * max(replicas, 1)
    return out


def _node_neuron(node: Obj) -> int:
    return neuron_quantity(((node.get("status") or {}).get("allocatable") or {}).get(NEURON_RESOURCE, 0))


def _pod_neuron_requests(pod: Obj) -> int:
    n = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        n += neuron_quantity((res.get("limits") or res.get("requests") or {}).get(NEURON_RESOURCE, 0))
    return n


def preflight(kube: KubeApi, cfg: SpectrnConfig, plan: Plan) -> list[Finding]:
    """Checks that decide whether applying can succeed; never changes the cluster."""
    findings: list[Finding] = []
    ns = cfg.namespace
    objects = [i.obj for i in plan.items]
    try:
        versions = kube.api_versions()
    except KubeApiError as e:
        return [Finding("cluster", "error", f"the API server does not answer: {e.message}", e.hint or "")]
    findings.append(Finding("cluster", "ok", f"context {kube.context!r}: API server answers"))

    # Objects with spectrn's names that belong to someone else.
    for item in plan.items:
        if item.foreign:
            findings.append(
                Finding(
                    "ownership",
                    "error",
                    f"{item.name} already exists and is not managed by spectrn; applying would take it over",
                    "delete or rename it, or choose other names (baseline_name, speculative_name, namespace)",
                )
            )

    # Permissions.
    ns_exists = not any(i.action == "create" and i.obj["kind"] == "Namespace" for i in plan.items)
    needed: list[tuple[str, str, str, str | None, str]] = []
    if not ns_exists:
        needed.append(("create", "namespaces", "", None, ""))
    seen: set[tuple[str, str]] = set()
    for o in objects:
        plural, group = _resource_of(o)
        if (plural, group) in seen or o["kind"] == "Namespace":
            continue
        seen.add((plural, group))
        scope = None if o["kind"] in ("PersistentVolume",) else ns
        needed += [("patch", plural, group, scope, ""), ("delete", plural, group, scope, "")]
    needed += [("list", "pods", "", ns, ""), ("get", "pods", "", ns, "log"), ("list", "events", "", ns, "")]
    denied = []
    for verb, plural, group, scope, sub in needed:
        try:
            ok = kube.can_i(verb, plural, group=group, namespace=scope, subresource=sub)
        except KubeApiError as e:
            findings.append(Finding("permissions", "warn", f"cannot check permissions: {e.message}"))
            break
        if not ok:
            denied.append(f"{verb} {plural}{'/' + sub if sub else ''}{' (cluster)' if scope is None else ''}")
    if denied:
        findings.append(
            Finding(
                "permissions",
                "error",
                f"missing permissions in namespace {ns!r}: {', '.join(denied)}",
                "ask a cluster admin to bind the spectrn-user Role from docs/kubernetes.md",
            )
        )
    else:
        findings.append(Finding("permissions", "ok", f"may create, update and delete spectrn's objects in {ns!r}"))

    # Devices: DRA or device plugin.
    uses_dra = any(o["kind"] == "ResourceClaimTemplate" for o in objects)
    if uses_dra:
        for o in objects:
            if o["kind"] != "ResourceClaimTemplate":
                continue
            if o["apiVersion"] not in versions:
                served = sorted(v for v in versions if v.startswith("resource.k8s.io/"))
                alt = (
                    "set resources_mode: dra-v1beta1"
                    if "resource.k8s.io/v1beta1" in served
                    else "set resources_mode: device-plugin (the Neuron device plugin)"
                )
                findings.append(
                    Finding(
                        "dra",
                        "error",
                        f"the cluster does not serve {o['apiVersion']} (DRA); served: {', '.join(served) or 'none'}",
                        f"{alt}, or upgrade to Kubernetes 1.34+ for resource.k8s.io/v1",
                    )
                )
            else:
                try:
                    dc = kube.get(o["apiVersion"], "DeviceClass", NEURON_DRIVER)
                except KubeApiError as e:
                    dc = None
                    findings.append(Finding("dra", "warn", f"cannot read DeviceClass {NEURON_DRIVER}: {e.message}"))
                if dc is None:
                    findings.append(
                        Finding(
                            "dra",
                            "error",
                            f"DeviceClass {NEURON_DRIVER} is missing: the Neuron DRA driver is not installed",
                            "install the Neuron helm chart with draDriver.enabled=true (without the device plugin), "
                            "or set resources_mode: device-plugin",
                        )
                    )
                else:
                    findings.append(
                        Finding("dra", "ok", f"{o['apiVersion']} served, DeviceClass {NEURON_DRIVER} present")
                    )
            break

    # Storage: the CSI driver of every rendered PersistentVolume.
    for o in objects:
        if o["kind"] != "PersistentVolume":
            continue
        driver = ((o.get("spec") or {}).get("csi") or {}).get("driver")
        if not driver:
            continue
        try:
            present = kube.get("storage.k8s.io/v1", "CSIDriver", driver) is not None
        except KubeApiError as e:
            findings.append(Finding("storage", "warn", f"cannot read CSIDriver {driver}: {e.message}"))
            continue
        if present:
            findings.append(Finding("storage", "ok", f"CSI driver {driver} installed"))
        else:
            findings.append(
                Finding(
                    "storage",
                    "error",
                    f"CSI driver {driver} is not installed, so the model volume cannot mount",
                    "install the Mountpoint for Amazon S3 CSI driver (EKS add-on aws-mountpoint-s3-csi-driver) "
                    "with an IAM role that can read the bucket",
                )
            )

    findings += _capacity_findings(kube, cfg, objects, uses_dra)
    return findings


def _resource_of(obj: Obj) -> tuple[str, str]:
    from spectrn.kube.client import KNOWN_KINDS

    info = KNOWN_KINDS.get(obj["kind"])
    plural = info.plural if info else obj["kind"].lower() + "s"
    api = obj["apiVersion"]
    return plural, api.rpartition("/")[0] if "/" in api else ""


def _capacity_findings(kube: KubeApi, cfg: SpectrnConfig, objects: Sequence[Obj], uses_dra: bool) -> list[Finding]:
    per_dep = _per_pod_devices(objects)
    want = sum(per_dep.values())
    if not want:
        return []
    per_pod = max(per_dep.values())
    if uses_dra:
        version = next(o["apiVersion"] for o in objects if o["kind"] == "ResourceClaimTemplate")
        try:
            slices = kube.list(version, "ResourceSlice")
        except KubeApiError as e:
            return [Finding("capacity", "warn", f"cannot list ResourceSlices to count Neuron devices: {e.message}")]
        per_node: dict[str, int] = {}
        for s in slices:
            spec = s.get("spec") or {}
            if spec.get("driver") != NEURON_DRIVER:
                continue
            node = str(spec.get("nodeName", "?"))
            per_node[node] = per_node.get(node, 0) + len(spec.get("devices") or [])
        source = "DRA ResourceSlices"
        free = None
    else:
        try:
            nodes = kube.list("v1", "Node")
        except KubeApiError as e:
            return [Finding("capacity", "warn", f"cannot list nodes to count Neuron devices: {e.message}")]
        per_node = {n["metadata"]["name"]: _node_neuron(n) for n in nodes if _node_neuron(n) > 0}
        source = f"node allocatable {NEURON_RESOURCE}"
        free = None
        try:
            used = 0
            for pod in kube.list("v1", "Pod"):
                phase = (pod.get("status") or {}).get("phase")
                if phase in ("Succeeded", "Failed") or _managed(pod):
                    continue
                used += _pod_neuron_requests(pod)
            free = sum(per_node.values()) - used
        except KubeApiError:
            free = None
    total = sum(per_node.values())
    biggest = max(per_node.values(), default=0)
    if total == 0:
        return [
            Finding(
                "capacity",
                "error",
                f"no Neuron devices found ({source}); the services need {want} ({per_pod} per pod)",
                "add a trn2 node group and install the Neuron DRA driver or device plugin"
                + (" (kind: `spectrn kind fake-neuron`)" if cfg.runtime == "sim" else ""),
            )
        ]
    out = []
    if biggest < per_pod:
        out.append(
            Finding(
                "capacity",
                "error",
                f"no node has {per_pod} Neuron devices for one pod (largest: {biggest}, {source})",
                "lower resources.neuron_devices or use a bigger instance (trn2.48xlarge has 16)",
            )
        )
    elif total < want:
        out.append(
            Finding(
                "capacity",
                "error",
                f"the services need {want} Neuron devices, the cluster has {total} ({source})",
                "add a node, or deploy one service at a time with --only",
            )
        )
    elif free is not None and free < want:
        out.append(
            Finding(
                "capacity",
                "warn",
                f"{total} Neuron devices in the cluster but only {free} free of other workloads; "
                f"the services need {want}",
                "free devices or the pods will stay Pending",
            )
        )
    else:
        out.append(Finding("capacity", "ok", f"{total} Neuron devices on {len(per_node)} node(s) for {want} requested"))
    return out


# ---- apply ---------------------------------------------------------------------------------------


@dataclass
class ApplyResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def apply_plan(kube: KubeApi, plan: Plan, *, on_step: Callable[[PlanItem], None] | None = None) -> ApplyResult:
    """Apply the changes in order; on failure or Ctrl-C delete what this call created, then raise."""
    result = ApplyResult()
    created_objs: list[Obj] = []
    current: PlanItem | None = None
    try:
        for item in plan.items:
            if item.action in ("unchanged", "keep"):
                result.unchanged.append(item.name)
                continue
            current = item
            kube.apply(item.obj)
            if item.action == "create":
                result.created.append(item.name)
                created_objs.append(item.obj)
            else:
                result.updated.append(item.name)
            if on_step:
                on_step(item)
        return result
    except (KubeApiError, KeyboardInterrupt) as e:
        rolled, left = _rollback(kube, created_objs)
        report = [
            f"applied: {', '.join(result.created + result.updated) or 'nothing'}",
            f"rolled back (deleted again): {', '.join(rolled) or 'nothing'}",
        ]
        if left:
            report.append(f"COULD NOT roll back: {', '.join(left)} (run `spectrn teardown`)")
        if result.updated:
            report.append(f"left updated (existed before): {', '.join(result.updated)}")
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted("deploy stopped during apply; " + "; ".join(report)) from None
        failed = current.name if current else "?"
        raise DeployError(
            f"applying {failed} failed: {e.message}. " + "; ".join(report),
            hint=e.hint or "fix the cause and re-run `spectrn deploy` (applied objects are reused)",
        ) from None


def _rollback(kube: KubeApi, created: list[Obj]) -> tuple[list[str], list[str]]:
    rolled, left = [], []
    for obj in reversed(created):
        meta = obj["metadata"]
        try:
            kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"), propagation="Foreground")
            rolled.append(describe(obj))
        except KubeApiError:
            left.append(describe(obj))
    return rolled, left


# ---- diagnose ------------------------------------------------------------------------------------


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


# ---- wait ----------------------------------------------------------------------------------------


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
    status = pod.get("status") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or []}
    if (conds.get("PodScheduled") or {}).get("status") != "True":
        return "Scheduling", str((conds.get("PodScheduled") or {}).get("message", ""))
    for cs in _statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") in ("ContainerCreating", "PodInitializing", "ErrImagePull"):
            return "Pulling", str(waiting.get("reason"))
    if _pod_ready(pod):
        return "Ready", ""
    return starting_label, ""


def age_of(timestamp: str, now: float | None = None) -> str:
    """``2h05m`` since an RFC 3339 timestamp (``""`` when missing or malformed)."""
    from datetime import datetime

    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
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
    containers = dep["spec"]["template"]["spec"].get("containers") or []
    text = " ".join(" ".join(map(str, (c.get("command") or []) + (c.get("args") or []))) for c in containers)
    m = _WINDOW_RE.search(text)
    return m.group(1) if m else "-"


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
    state.age = age_of(str(dep["metadata"].get("creationTimestamp", "")))
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
    rank = {"Scheduling": 0, "Pulling": 1, starting_label: 2, "Ready": 3}
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
        if worst is None or rank.get(phase, 0) < worst[0]:
            worst = (rank.get(phase, 0), phase, detail)
            state.events = _event_lines(events)
            state.logs = _tail(current or prev, 10)
    assert worst is not None
    state.phase, state.detail = worst[1], worst[2]
    if state.ready and state.phase != "Ready":
        state.detail = f"rolling update (old pod serving): {state.detail}".rstrip(": ")
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


def _failure_error(states: Sequence[ServiceState], *, timed_out: bool, timeout_s: float, budget_s: int) -> DeployError:
    parts = []
    hints = []
    for s in states:
        if s.done:
            continue
        diag = s.diagnosis
        if diag is None or (timed_out and not diag.fatal):
            if timed_out and s.phase in ("Starting", "Compiling"):
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
            log_lines = diag.logs if diag and diag.logs else s.logs
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
    rv = ""
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
            raise _failure_error(final, timed_out=False, timeout_s=now - start, budget_s=startup_budget_s)
        if now - start >= timeout_s:
            raise _failure_error(states, timed_out=True, timeout_s=timeout_s, budget_s=startup_budget_s)
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


# ---- the deploy command ------------------------------------------------------------------------


@dataclass
class DeployReport:
    plan: Plan
    findings: list[Finding]
    applied: ApplyResult | None = None
    states: list[ServiceState] = field(default_factory=list)
    dry_run: bool = False


def render_for_deploy(cfg: SpectrnConfig, only: str | None = None) -> list[Obj]:
    """The objects ``spectrn deploy`` applies: shared objects plus both services (or ``only`` one)."""
    from spectrn.render import manifests as render

    if only is not None and only not in VARIANTS:
        raise ConfigError(f"--only {only!r} is not a service", hint="use --only baseline or --only speculative")
    components = None if only is None else [*render.SHARED_COMPONENTS, only]
    objects = render.render_objects(cfg, components=components)
    return [o for o in objects if labels_of(o).get(COMPONENT_LABEL) != "loadgen" or o["kind"] != "Job"]


def services_of(objects: Iterable[Obj]) -> list[tuple[str, str]]:
    out = []
    for o in objects:
        if o.get("kind") == "Deployment":
            labels = labels_of(o)
            variant = labels.get("spectrn.io/variant") or labels.get(COMPONENT_LABEL, "?")
            out.append((variant, o["metadata"]["name"]))
    return out


def deploy(
    kube: KubeApi,
    cfg: SpectrnConfig,
    objects: Sequence[Obj],
    *,
    dry_run: bool = False,
    timeout_s: float | None = None,
    on_plan: Callable[[Plan, list[Finding]], None] | None = None,
    on_update: Callable[[list[ServiceState]], None] | None = None,
    on_step: Callable[[PlanItem], None] | None = None,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    poll_s: float = 5.0,
    grace_s: float = 120.0,
) -> DeployReport:
    """Plan, pre-flight, apply and wait. ``objects`` are rendered objects (``render_for_deploy``)."""
    plan = make_plan(kube, objects)
    findings = preflight(kube, cfg, plan)
    if on_plan:
        on_plan(plan, findings)
    report = DeployReport(plan, findings, dry_run=dry_run)
    if dry_run:
        return report
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise DeployError(
            "pre-flight failed, nothing was applied: " + "; ".join(f"[{f.check}] {f.message}" for f in errors),
            hint="; ".join(f.hint for f in errors if f.hint) or None,
        )
    report.applied = apply_plan(kube, plan, on_step=on_step)
    services = services_of(i.obj for i in plan.items)
    budget = cfg.probes.startup_budget_s
    report.states = wait_ready(
        kube,
        cfg.namespace,
        services,
        timeout_s=timeout_s if timeout_s is not None else budget + 1800,
        startup_budget_s=budget,
        starting_label="Compiling" if cfg.runtime == "neuron" else "Starting",
        on_update=on_update,
        clock=clock,
        sleep=sleep,
        poll_s=poll_s,
        grace_s=grace_s,
    )
    return report


# ---- status --------------------------------------------------------------------------------------


def status(kube: KubeApi, cfg: SpectrnConfig) -> list[ServiceState]:
    """One snapshot of both services (``Absent`` when not deployed)."""
    label = "Compiling" if cfg.runtime == "neuron" else "Starting"
    return [
        observe_service(kube, cfg.namespace, "baseline", cfg.baseline_name, starting_label=label),
        observe_service(kube, cfg.namespace, "speculative", cfg.speculative_name, starting_label=label),
    ]


# ---- teardown ------------------------------------------------------------------------------------

# What teardown looks for, namespaced kinds first; versions that the cluster does not serve are skipped.
TEARDOWN_KINDS = (
    ("batch/v1", "Job"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("resource.k8s.io/v1beta1", "ResourceClaimTemplate"),
    ("v1", "ConfigMap"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "ServiceAccount"),
)
CLUSTER_KINDS = (("v1", "PersistentVolume"),)
# Objects every namespace has; they do not count as "someone else's" when deciding to delete a namespace.
_NAMESPACE_DEFAULTS = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


@dataclass
class TeardownResult:
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def teardown(
    kube: KubeApi, cfg: SpectrnConfig, *, dry_run: bool = False, keep_namespace: bool = False
) -> TeardownResult:
    """Delete what spectrn created in ``cfg.namespace`` (by label), never anything else."""
    ns = cfg.namespace
    result = TeardownResult()
    versions = kube.api_versions()
    targets: list[Obj] = []
    seen: set[tuple[str, str]] = set()
    for api_version, kind in TEARDOWN_KINDS:
        if api_version not in versions:
            continue
        for obj in kube.list(api_version, kind, ns, MANAGED_SELECTOR):
            key = (kind, obj["metadata"]["name"])
            if _managed(obj) and key not in seen:  # belt and braces: re-check the label the server filtered on
                seen.add(key)
                obj.setdefault("apiVersion", api_version)
                obj.setdefault("kind", kind)
                targets.append(obj)
    for api_version, kind in CLUSTER_KINDS:
        for obj in kube.list(api_version, kind, None, f"{MANAGED_SELECTOR},{NAMESPACE_LABEL}={ns}"):
            if _managed(obj) and labels_of(obj).get(NAMESPACE_LABEL) == ns:
                obj.setdefault("apiVersion", api_version)
                obj.setdefault("kind", kind)
                targets.append(obj)
    # Pods owned by a Deployment/Job go with their owner; only loose pods are deleted by name.
    targets = [t for t in targets if not (t["kind"] == "Pod" and t["metadata"].get("ownerReferences"))]
    for obj in targets:
        if not dry_run:
            meta = obj["metadata"]
            kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"), propagation="Foreground")
        result.deleted.append(describe(obj))

    try:
        ns_obj = kube.get("v1", "Namespace", ns)
    except KubeApiError as e:
        if e.status != 403:
            raise
        result.kept.append(f"Namespace {ns} (cannot read namespaces: forbidden)")
        return result
    if ns_obj is None:
        return result
    if not _managed(ns_obj):
        result.kept.append(f"Namespace {ns} (not created by spectrn)")
    elif keep_namespace:
        result.kept.append(f"Namespace {ns} (--keep-namespace)")
    else:
        deleted_names = {(t["kind"], t["metadata"]["name"]) for t in targets}
        others = _foreign_objects(kube, ns, deleted_names)
        if others:
            result.kept.append(
                f"Namespace {ns} (also holds {', '.join(others[:5])}{' ...' if len(others) > 5 else ''})"
            )
        else:
            if not dry_run:
                kube.delete("v1", "Namespace", ns, propagation="Foreground")
            result.deleted.append(f"Namespace {ns}")
    return result


def _foreign_objects(kube: KubeApi, ns: str, deleted: set[tuple[str, str]]) -> list[str]:
    out = []
    for api_version, kind in (
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
        ("v1", "Service"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "ServiceAccount"),
    ):
        try:
            items = kube.list(api_version, kind, ns)
        except KubeApiError:
            out.append(f"{kind}s (cannot list)")
            continue
        for obj in items:
            name = obj["metadata"]["name"]
            if (kind, name) in deleted or (kind, name) in _NAMESPACE_DEFAULTS or _managed(obj):
                continue
            if kind == "Pod" and obj["metadata"].get("ownerReferences"):
                continue
            if kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
                continue
            out.append(f"{kind} {name}")
    return out


# ---- kind: fake Neuron capacity -----------------------------------------------------------------


def advertise_fake_neuron(
    kube: KubeApi, *, nodes: Sequence[str] | None = None, neuron: int = 16, neuroncore: int = 128
) -> list[str]:
    """Advertise ``aws.amazon.com/neuron`` / ``neuroncore`` extended resources on nodes (kind clusters only).

    This patches the node *status* (capacity and allocatable), the documented way to advertise extended
    resources; the scheduler then places pods that request them, and nothing on the node backs them.
    """
    if neuron < 0 or neuroncore < 0:
        raise ConfigError("--neuron and --neuroncore must be zero or more", hint="e.g. --neuron 16 --neuroncore 128")
    names = list(nodes) if nodes else [n["metadata"]["name"] for n in kube.list("v1", "Node")]
    if not names:
        raise DeployError("the cluster has no nodes to patch", hint="create the kind cluster first")
    ops = []
    for section in ("capacity", "allocatable"):
        for res, value in ((NEURON_RESOURCE, neuron), (NEURONCORE_RESOURCE, neuroncore)):
            ops.append({"op": "add", "path": f"/status/{section}/{res.replace('/', '~1')}", "value": str(value)})
    for name in names:
        kube.patch_node_status(name, ops)
    return names
