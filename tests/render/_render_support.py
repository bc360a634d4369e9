"""Helpers shared by the render tests (imported by name: the tests folder is not a package)."""

from __future__ import annotations

from typing import Any

K8S_VERSION = "1.34.0"

# Golden files must not change when someone edits prompts/: they render this fixed prompt set instead
# (a separate test checks that the real ConfigMap carries the packaged files).
FIXED_PROMPTS = {
    "structured.yaml": 'name: structured\nprompts:\n  - id: count\n    class: structured\n    text: "1, 2, 3,"\n',
}


def validate_k8s(obj: dict[str, Any]) -> None:
    """Validate one object against the Kubernetes 1.34 OpenAPI schema, strict (unknown fields fail)."""
    import kubernetes_validate

    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
