"""Values written into container specs so that Kubernetes passes them on unchanged (``$`` escaped).

A container's command, args and env values are expanded by Kubernetes (``$(NAME)``, ``$$``); every value spectrn
computes goes through ``k8s_literal`` on its way into a spec, and only a deliberate ``KubeRef`` is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class KubeRef(str):
    """A deliberate Kubernetes variable reference such as ``$(JOB_COMPLETION_INDEX)``: left unescaped."""


def k8s_literal(value: str) -> str:
    """``value`` as it must be written in a container's command, args or env value so that Kubernetes passes
    it on unchanged: Kubernetes expands ``$(NAME)`` there and reduces ``$$`` to ``$``, so every ``$`` is
    doubled (kubernetes/kubernetes third_party/forked/golang/expansion/expand.go). A model id containing
    ``$(HF_TOKEN)`` then reaches vLLM as that text, never as the token."""
    if isinstance(value, KubeRef):
        return str(value)
    return value.replace("$", "$$")


def k8s_literals(values: Iterable[str]) -> list[str]:
    return [k8s_literal(v) for v in values]


def _env(name: str, value: str) -> dict[str, Any]:
    """One container env entry; the value escaped so Kubernetes passes it on as written (``k8s_literal``)."""
    return {"name": name, "value": k8s_literal(value)}
