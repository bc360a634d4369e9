"""What a real Kubernetes API server refuses, as pure functions over plain objects (``FakeKube`` calls them).

Every rule carries its source and a short quote. Sources (gathered in the project's research notes):
K8s-src = kubernetes/kubernetes, with apimachinery/apiserver under ``staging/src/k8s.io/``; SMD =
kubernetes-sigs/structured-merge-diff. The fake models Kubernetes 1.34 (the schema version below; label
length messages say "characters" up to 1.34 and "bytes" from 1.35).

Status bodies have the real shape (apimachinery ``pkg/api/errors/errors.go``)::

    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
     "message": "...", "reason": "<Reason>", "details": {...}, "code": <http status>}

and go through ``spectrn.kube.api.api_error``, the same translation ``RealKube`` applies to a real
server's answer.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from spectrn.kube.api import KNOWN_KINDS, KubeApiError, Obj, api_error

K8S_SCHEMA_VERSION = "1.34.0"

# ---- Status errors ---------------------------------------------------------------------------------


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body["message"] = message
    if reason:  # an SSA schema failure is a plain error: the server sends no reason at all
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


def status_error(
    code: int, reason: str, message: str, *, action: str, details: dict[str, Any] | None = None
) -> KubeApiError:
    """The error ``RealKube`` raises when a server answers ``code`` with this Status body (``RealKube`` passes
    the HTTP reason phrase along, used only when the body has no ``reason``)."""
    body = json.dumps(status_body(code, reason, message, details))
    return api_error(code, HTTPStatus(code).phrase, body, action=action)


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def plural_of(kind: str) -> str:
    info = KNOWN_KINDS.get(kind)
    return info.plural if info else kind.lower() + "s"


def qualified_resource(api_version: str, kind: str) -> str:
    """``deployments.apps``, ``services``: GroupResource.String() as NewConflict/NewForbidden print it."""
    group = group_of(api_version)
    return f"{plural_of(kind)}.{group}" if group else plural_of(kind)


# ---- field errors (apimachinery pkg/util/validation/field/errors.go) ---------------------------------

_NO_VALUE = object()
_CAUSE = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Forbidden": "FieldValueForbidden",
    "Too long": "FieldValueTooLong",
    "Not found": "FieldValueNotFound",
    "Duplicate value": "FieldValueDuplicate",
}


@dataclass
class FieldError:
    """One ``field.Error``: ``<path>: <Type>[: <bad value>][: <detail>]``."""

    type: str
    field: str
    bad: Any = _NO_VALUE
    detail: str = ""

    def body(self) -> str:
        # ErrorBody: Required/Forbidden/TooLong print no value; strings are quoted, other values JSON (newer
        # versions JSON-marshal the bad value, older ones print %#v: tests match the path and the detail).
        s = self.type
        if self.type in ("Invalid value", "Not found", "Duplicate value") and self.bad is not _NO_VALUE:
            s += ": " + json.dumps(self.bad, sort_keys=True, separators=(",", ":"))
        if self.detail:
            s += ": " + self.detail
        return s

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": _CAUSE[self.type], "message": self.body(), "field": self.field}


def invalid(api_version: str, kind: str, name: str, errors: Sequence[FieldError], *, action: str) -> KubeApiError:
    """422 Invalid. apimachinery ``errors.NewInvalid``: message ``<Kind>.<group> "<name>" is invalid: <errs>``,
    several errors bracketed (utilerrors aggregate), details.causes one per error."""
    group = group_of(api_version)
    qualified = f"{kind}.{group}" if group else kind
    text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    details = {"name": name, "group": group, "kind": kind, "causes": [e.cause() for e in errors]}
    return status_error(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', action=action, details=details)


# ---- names and labels (apimachinery pkg/util/validation/validation.go, api/validation/generic.go) -----

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # RegexError: "<msg> (e.g. 'a',  or 'b', regex used for validation is '<fmt>')" -- two spaces after each
    # comma between examples, as the real function joins them.
    return f"{msg} (e.g. {',  or '.join(repr(e) for e in examples)}, regex used for validation is '{fmt}')"


def _max_len(n: int, unit: str = "characters") -> str:
    return f"must be no more than {n} {unit}"


def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label (Namespace names, container names): "a lowercase RFC 1123 label must consist of lower case
    alphanumeric characters or '-', and must start and end with an alphanumeric character"."""
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not re.fullmatch(DNS1123_LABEL_FMT, value):
        if re.fullmatch(DNS1123_SUBDOMAIN_FMT, value):
            errs.append("must not contain dots")
        else:
            errs.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                    "must start and end with an alphanumeric character",
                    DNS1123_LABEL_FMT,
                    "my-name",
                    "123-abc",
                )
            )
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain (most objects: Deployment, Job, ConfigMap, PV/PVC, ServiceAccount, Pod): "a lowercase
    RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end
    with an alphanumeric character (e.g. 'example.com', ...)"."""
    errs = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not re.fullmatch(DNS1123_SUBDOMAIN_FMT, value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                "must start and end with an alphanumeric character",
                DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


def dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label (Service names): "a DNS-1035 label must consist of lower case alphanumeric characters or
    '-', start with an alphabetic character, and end with an alphanumeric character"."""
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not re.fullmatch(DNS1035_LABEL_FMT, value):
        errs.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character",
                DNS1035_LABEL_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


def path_segment_name(value: str) -> list[str]:
    """IsValidPathSegmentName (RBAC Role/Binding names): no '/' or '%', not '.' or '..'."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


def name_rule(kind: str) -> Any:
    # ValidateNamespaceName = NameIsDNSLabel; ValidateServiceName = NameIsDNS1035Label; RBAC names are path
    # segments (ValidateRBACName); everything spectrn renders otherwise is a DNS subdomain.
    if kind == "Namespace":
        return dns1123_label
    if kind == "Service":
        return dns1035_label
    if kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        return path_segment_name
    return dns1123_subdomain


def label_value(value: str) -> list[str]:
    """IsValidLabelValue: at most 63 ("characters" up to 1.34, "bytes" from 1.35) and the regex; the empty
    string is allowed."""
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not re.fullmatch(LABEL_VALUE_FMT, value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character",
                LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def label_key(key: str) -> list[str]:
    """IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name part of at most 63 characters
    ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an
    alphanumeric character")."""
    prefix, sep, name = key.rpartition("/")
    errs = []
    if sep:
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in dns1123_subdomain(prefix)]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    elif not re.fullmatch(QUALIFIED_NAME_FMT, name):
        errs.append(
            "name part "
            + _regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character",
                QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
        )
    return errs


def labels_errors(labels: Any, path: str) -> list[FieldError]:
    """ValidateLabels: the field path is the map itself (``metadata.labels``), the bad value the key or value:
    ``for _, msg := range validation.IsValidLabelValue(v) {``
    ``allErrs = append(allErrs, field.Invalid(fldPath, v, msg)``."""
    errs: list[FieldError] = []
    for k, v in (labels or {}).items():
        errs += [FieldError("Invalid value", path, k, m) for m in label_key(str(k))]
        errs += [FieldError("Invalid value", path, v, m) for m in label_value(str(v))]
    return errs


# ---- object validation (422) -------------------------------------------------------------------------

POD_TEMPLATE_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")


def _pod_spec_errors(spec: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    containers = (spec or {}).get("containers")
    # pkg/apis/core/validation/validation.go validateContainers:
    # "if len(containers) == 0 { return append(allErrs, field.Required(fldPath, "")) }"
    if not containers:
        return [FieldError("Required value", f"{path}.containers")]
    for i, c in enumerate(containers):
        name = str((c or {}).get("name") or "")
        if name:  # a missing name is a schema "required" error, reported with the others
            errs += [FieldError("Invalid value", f"{path}.containers[{i}].name", name, m) for m in dns1123_label(name)]
    pod_claims = {str(rc.get("name")) for rc in (spec or {}).get("resourceClaims") or [] if isinstance(rc, dict)}
    for field in ("initContainers", "containers"):
        for i, c in enumerate((spec or {}).get(field) or []):
            claims = ((c or {}).get("resources") or {}).get("claims") or []
            errs += _claim_name_errors(claims, pod_claims, f"{path}.{field}[{i}].resources.claims")
    return errs


def _claim_name_errors(claims: list[Any], pod_claims: set[str], path: str) -> list[FieldError]:
    """A container's ``resources.claims`` must name entries of the pod's ``resourceClaims``, once each.
    pkg/apis/core/validation/validation.go validateResourceClaimNames: ``field.NotFound(fldPath.Index(i),
    name)`` with Detail "must be one of the names in pod.spec.resourceClaims" + " which is empty" or ": " and
    the sorted names; ``field.Duplicate`` for a repeated name; ``field.Required`` for an empty one."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, claim in enumerate(claims):
        name = str((claim or {}).get("name") or "")
        where = f"{path}[{i}]"
        if not name:
            errs.append(FieldError("Required value", where))
            continue
        if name in seen:
            errs.append(FieldError("Duplicate value", where, name))
        seen.add(name)
        if name not in pod_claims:
            listed = ": " + ", ".join(sorted(pod_claims)) if pod_claims else " which is empty"
            errs.append(
                FieldError("Not found", where, name, "must be one of the names in pod.spec.resourceClaims" + listed)
            )
    return errs


def _selector_matches(selector: Any, labels: dict[str, Any]) -> bool:
    sel = selector or {}
    if any(labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    for expr in sel.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and present and labels.get(key) in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def object_errors(obj: Obj, schema_required: Iterable[FieldError] = ()) -> list[FieldError]:
    """Create/update validation of the kinds spectrn renders: name, labels, pod templates, Deployment selector."""
    meta = obj.get("metadata") or {}
    kind = obj["kind"]
    name = str(meta.get("name") or "")
    errs: list[FieldError] = list(schema_required)
    # apimachinery api/validation/objectmeta.go: field.Invalid(fldPath.Child("name"), meta.GetName(), msg)
    errs += [FieldError("Invalid value", "metadata.name", name, m) for m in name_rule(kind)(name)]
    errs += labels_errors(meta.get("labels"), "metadata.labels")
    spec = obj.get("spec") or {}
    if kind in POD_TEMPLATE_KINDS:
        template = spec.get("template") or {}
        tlabels = (template.get("metadata") or {}).get("labels") or {}
        errs += labels_errors(tlabels, "spec.template.metadata.labels")
        errs += _pod_spec_errors(template.get("spec"), "spec.template.spec")
        if kind == "Deployment" and spec.get("selector") is not None:
            if not (spec["selector"].get("matchLabels") or spec["selector"].get("matchExpressions")):
                errs.append(
                    FieldError(
                        "Invalid value", "spec.selector", spec["selector"], "empty selector is invalid for deployment"
                    )
                )
            elif not _selector_matches(spec["selector"], tlabels):
                # apps validation ValidatePodTemplateSpecForReplicaSet: "`selector` does not match template `labels`"
                errs.append(
                    FieldError(
                        "Invalid value",
                        "spec.template.metadata.labels",
                        tlabels,
                        "`selector` does not match template `labels`",
                    )
                )
    elif kind == "Pod":
        errs += _pod_spec_errors(spec, "spec")
    return errs


# ---- immutable fields on update (422) ----------------------------------------------------------------

FIELD_IMMUTABLE = "field is immutable"  # apimachinery api/validation/objectmeta.go FieldImmutableErrorMsg

# PersistentVolume spec fields that may change; everything else in spec is the volume source (or volumeMode /
# nodeAffinity, which are immutable as well).
_PV_MUTABLE = {"capacity", "accessModes", "persistentVolumeReclaimPolicy", "claimRef", "storageClassName"}
_PV_MUTABLE |= {"mountOptions", "volumeAttributesClassName"}


def _dig(obj: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def immutable_errors(old: Obj, new: Obj) -> list[FieldError]:
    """What an update may not change, per kind."""
    kind = new["kind"]
    errs: list[FieldError] = []

    def same(*path: str) -> bool:
        return json.dumps(_dig(old, *path), sort_keys=True) == json.dumps(_dig(new, *path), sort_keys=True)

    if kind == "Deployment" and not same("spec", "selector"):
        # pkg/registry/apps/deployment/strategy.go ValidateUpdate: "// disallow mutation of selector ...
        # ValidateImmutableField(newDeployment.Spec.Selector, oldDeployment.Spec.Selector,
        # field.NewPath("spec").Child("selector"))"
        errs.append(FieldError("Invalid value", "spec.selector", _dig(new, "spec", "selector"), FIELD_IMMUTABLE))
    elif kind == "Job":
        # pkg/apis/batch/validation/validation.go ValidateJobSpecUpdate: ValidateImmutableField(spec.Selector, ...
        # fldPath.Child("selector")); the template through validatePodTemplateUpdate; completionMode,
        # podFailurePolicy, backoffLimitPerIndex likewise.
        for fld in ("selector", "template", "completionMode", "podFailurePolicy", "backoffLimitPerIndex"):
            if not same("spec", fld):
                errs.append(FieldError("Invalid value", f"spec.{fld}", _dig(new, "spec", fld), FIELD_IMMUTABLE))
    elif kind == "Service":
        # pkg/apis/core/validation/validation.go validateUpgradeDowngradeClusterIPs: field.Invalid(
        # field.NewPath("spec", "clusterIPs").Index(i), service.Spec.ClusterIPs, "may not change once set")
        old_ips = _dig(old, "spec", "clusterIPs") or []
        new_ips = _dig(new, "spec", "clusterIPs") or []
        if _dig(old, "spec", "type") != "ExternalName" and old_ips and new_ips and old_ips[0] != new_ips[0]:
            errs.append(FieldError("Invalid value", "spec.clusterIPs[0]", new_ips, "may not change once set"))
    elif kind == "PersistentVolume":
        # ValidatePersistentVolumeUpdate: field.Forbidden(field.NewPath("spec", "persistentvolumesource"),
        # "spec.persistentvolumesource is immutable after creation\n<diff>") -- from creation on, bound or not.
        def source(o: Obj) -> str:
            spec = o.get("spec") or {}
            return json.dumps({k: v for k, v in spec.items() if k not in _PV_MUTABLE}, sort_keys=True)

        if source(old) != source(new):
            errs.append(
                FieldError(
                    "Forbidden",
                    "spec.persistentvolumesource",
                    detail="spec.persistentvolumesource is immutable after creation",
                )
            )
    elif kind == "PersistentVolumeClaim":
        # ValidatePersistentVolumeClaimUpdate: field.Forbidden(field.NewPath("spec"), "spec is immutable after
        # creation except resources.requests and volumeAttributesClassName for bound claims\n<diff>");
        # volumeName may be set once.
        old_spec = dict(old.get("spec") or {})
        new_spec = dict(new.get("spec") or {})
        if not old_spec.get("volumeName"):
            old_spec["volumeName"] = new_spec.get("volumeName")
        for s in (old_spec, new_spec):
            s.pop("volumeAttributesClassName", None)
        if _dig(old, "status", "phase") == "Bound":
            for s in (old_spec, new_spec):
                s["resources"] = {k: v for k, v in (s.get("resources") or {}).items() if k != "requests"}
        if json.dumps(old_spec, sort_keys=True) != json.dumps(new_spec, sort_keys=True):
            errs.append(
                FieldError(
                    "Forbidden",
                    "spec",
                    detail="spec is immutable after creation except resources.requests and "
                    "volumeAttributesClassName for bound claims",
                )
            )
    return errs


# ---- the OpenAPI schema: unknown fields and wrong types (server-side apply) --------------------------


@functools.cache
def _validator(api_version: str, kind: str) -> Any:
    """A JSON-schema validator for the kind from kubernetes-validate's strict 1.34 schemas, or None (a CRD or a
    kind it does not ship)."""
    import jsonschema
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    version = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(K8S_SCHEMA_VERSION)][-1]
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(f"{folder}/{kind.lower()}-{api}.json", version)
    except FileNotFoundError:
        return None
    definitions = _definitions(folder, version)
    registry: Any = Resource.from_contents(schema) @ Registry()
    registry = definitions @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.cache
def _definitions(folder: str, version: str) -> Any:
    from kubernetes_validate import utils
    from referencing import Resource

    return Resource.from_contents(utils.schema_contents(f"{folder}/_definitions.json", version))


def _smd_path(instance: Any, parts: Sequence[Any]) -> str:
    """A structured-merge-diff field path: ``.spec.template.spec.containers[name="server"].foo``."""
    out = ""
    node = instance
    for p in parts:
        if isinstance(p, int) and isinstance(node, list):
            item = node[p]
            out += f'[name="{item["name"]}"]' if isinstance(item, dict) and "name" in item else f"[{p}]"
            node = item
        else:
            out += f".{p}"
            node = node.get(p) if isinstance(node, dict) else None
    return out


_JSON_TYPES = {"object": "map", "array": "list", "string": "string", "integer": "int", "number": "numeric"}


def _dotted(parts: Sequence[Any]) -> str:
    """``spec.template.spec.containers[0].foo``: the JSON decoder's and field.Path's notation."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


@dataclass
class SchemaFindings:
    unknown: list[list[Any]]  # paths of fields the schema does not declare
    typing: list[str]  # wrong types, as structured-merge-diff words them (approximately)
    required: list[FieldError]  # missing required fields (validation, 422)

    def typed_patch_problems(self, body: Obj) -> list[str]:
        return [f"{_smd_path(body, p)}: field not declared in schema" for p in self.unknown] + self.typing


def schema_findings(obj: Obj) -> SchemaFindings:
    """Check ``obj`` (never its ``status``) against the kind's OpenAPI schema.

    Unknown fields: SMD's ``field not declared in schema``. Wrong types: SMD refuses them too while typing the
    patch (the wording here is approximate: tests match the path). Missing required fields become 422 causes."""
    found = SchemaFindings([], [], [])
    validator = _validator(obj["apiVersion"], obj["kind"])
    if validator is None:
        return found
    body = {k: v for k, v in obj.items() if k != "status"}
    for e in sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path]):
        parts = list(e.absolute_path)
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            known = set((e.schema or {}).get("properties") or {})
            found.unknown += [[*parts, key] for key in sorted(k for k in e.instance if k not in known)]
        elif e.validator == "type":
            wanted = [e.validator_value] if isinstance(e.validator_value, str) else list(e.validator_value)
            want = "/".join(t for t in wanted if t != "null")
            got = type(e.instance).__name__
            found.typing.append(f"{_smd_path(body, parts)}: expected {_JSON_TYPES.get(want, want)}, got {got}")
        elif e.validator == "required":
            for k in e.validator_value:
                if k not in (e.instance or {}):
                    found.required.append(FieldError("Required value", _dotted([*parts, k])))
    return found


def typed_patch_error(obj: Obj, problems: list[str], *, action: str) -> KubeApiError:
    """Server-side apply of a body the schema cannot type: HTTP 500 with no reason (a plain error, not a
    StatusError). apimachinery util/managedfields/internal/structuredmerge.go Apply: ``fmt.Errorf("failed to
    create typed patch object (%v): %v", objectGVKNN(patchObj), err)``; real body (kubernetes/kubernetes#122480):
    ``failed to create typed patch object (general/admin-api; /v1, Kind=Service): .spec.topologyKeys: field not
    declared in schema``. Several errors: SMD typed ValidationErrors.Error, ``messages := []string{"errors:"}``,
    each ``"  " + e.Error()``, joined by newlines."""
    meta = obj.get("metadata") or {}
    group = group_of(obj["apiVersion"])
    version = obj["apiVersion"].rpartition("/")[2]
    gvk = f"{group}/{version}, Kind={obj['kind']}"
    nn = f"{meta.get('namespace') or ''}/{meta.get('name')}"
    detail = problems[0] if len(problems) == 1 else "\n".join(["errors:", *("  " + p for p in problems)])
    return status_error(500, "", f"failed to create typed patch object ({nn}; {gvk}): {detail}", action=action)


def strict_decoding_error(obj: Obj, unknown: list[list[Any]], *, action: str) -> KubeApiError:
    """PUT/POST with ``?fieldValidation=Strict``: 400 BadRequest. apiserver handlers/rest.go transformDecodeError:
    ``errors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", ...))``, the error from
    apimachinery runtime/error.go ``"strict decoding error: "`` plus ``unknown field "spec.foo"`` per field."""
    version = obj["apiVersion"].rpartition("/")[2]
    fields = ", ".join(f'unknown field "{_dotted(u)}"' for u in unknown)
    message = (
        f'{obj["kind"]} in version "{version}" cannot be handled as a {obj["kind"]}: strict decoding error: {fields}'
    )
    return status_error(400, "BadRequest", message, action=action)
