"""Pre-flight checks before anything is applied: permissions, API groups, CSI driver, Neuron capacity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spectrn.deploy.objects import NEURON_DRIVER, NEURON_RESOURCE, Severity, _managed
from spectrn.deploy.plan import Plan
from spectrn.kube.api import KubeApi, KubeApiError, Obj, neuron_quantity

if TYPE_CHECKING:
    from spectrn.configuration.config import SpectrnConfig


@dataclass
class Finding:
    check: str
    severity: Severity
    message: str
    hint: str = ""


def _per_pod_devices(objects: Sequence[Obj]) -> dict[str, tuple[int, int]]:
    """Per Deployment, the Neuron devices one of its pods asks for (device-plugin limits or its DRA claim
    template's count) and its replica count: every pod must fit on one node, all of them in the cluster."""
    templates: dict[str, int] = {}
    for o in objects:
        if o.get("kind") == "ResourceClaimTemplate":
            total = 0
            for req in ((o.get("spec") or {}).get("spec") or {}).get("devices", {}).get("requests", []) or []:
                exact = req.get("exactly") or req
                total += int(exact.get("count") or 1)
            templates[o["metadata"]["name"]] = total
    out: dict[str, tuple[int, int]] = {}
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
        out[o["metadata"]["name"]] = (n, max(replicas, 1))
    return out


def _node_neuron(node: Obj) -> int:
    return neuron_quantity(((node.get("status") or {}).get("allocatable") or {}).get(NEURON_RESOURCE, 0))


def _pod_neuron_requests(pod: Obj) -> int:
    n = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        n += neuron_quantity((res.get("limits") or res.get("requests") or {}).get(NEURON_RESOURCE, 0))
    return n


def config_findings(cfg: SpectrnConfig, objects: Sequence[Obj]) -> list[Finding]:
    """What the configuration alone shows will fail, with or without a cluster: a model volume that mounts the
    placeholder bucket (the pods would wait on a mount that never succeeds)."""
    from spectrn.configuration.cluster import S3Config

    placeholder = S3Config().bucket
    mounts = any(
        o["kind"] == "PersistentVolume"
        and (((o.get("spec") or {}).get("csi") or {}).get("volumeAttributes") or {}).get("bucketName") == placeholder
        for o in objects
    )
    if not mounts:
        return []
    return [
        Finding(
            "storage",
            "error",
            f"s3.bucket is still the placeholder {placeholder!r}: the model volume would mount a bucket that is not "
            "yours",
            "set s3.bucket in spectrn.yaml (or --set s3.bucket=NAME) to the bucket holding the model weights",
        )
    ]


def preflight(kube: KubeApi, cfg: SpectrnConfig, plan: Plan) -> list[Finding]:
    """Checks that decide whether applying can succeed; never changes the cluster."""
    ns = cfg.namespace
    objects = [i.obj for i in plan.items]
    findings: list[Finding] = config_findings(cfg, objects)
    try:
        versions = kube.api_versions()
    except KubeApiError as e:
        return findings + [Finding("cluster", "error", f"the API server does not answer: {e.message}", e.hint or "")]
    findings.append(Finding("cluster", "ok", f"context {kube.context!r}: API server answers"))

    for item in plan.items:
        if item.terminating:
            findings.append(
                Finding(
                    "namespace",
                    "warn",
                    f"{item.name} is being deleted (Terminating); `spectrn deploy` waits until it is gone, then "
                    "creates it again",
                    "nothing to do, or wait for `kubectl get namespace` to stop listing it",
                )
            )

    # Updates the API server would refuse: an immutable field changed on an object that cannot be replaced.
    for item in plan.items:
        if item.immutable:
            findings.append(
                Finding(
                    "immutable",
                    "error",
                    f"{item.name}: {item.immutable} cannot change once created (the API server refuses the update)",
                    "remove the old objects first with `spectrn teardown` (it deletes spectrn's volume objects, never "
                    "the data in S3), then deploy; or keep the earlier setting (e.g. s3.bucket)",
                )
            )

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
    from spectrn.kube.api import KNOWN_KINDS

    info = KNOWN_KINDS.get(obj["kind"])
    plural = info.plural if info else obj["kind"].lower() + "s"
    api = obj["apiVersion"]
    return plural, api.rpartition("/")[0] if "/" in api else ""


def _capacity_findings(kube: KubeApi, cfg: SpectrnConfig, objects: Sequence[Obj], uses_dra: bool) -> list[Finding]:
    per_dep = _per_pod_devices(objects)
    want = sum(n * replicas for n, replicas in per_dep.values())
    if not want:
        return []
    per_pod = max(n for n, _ in per_dep.values())
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
