"""Helpers shared by the render tests (imported by name: the tests folder is not a package)."""

from __future__ import annotations

from typing import Any

K8S_VERSION = "1.34.0"

# Golden files must not change when someone edits prompts/: they render this fixed prompt set instead
# (a separate test checks that the real ConfigMap carries the packaged files).
FIXED_PROMPTS = {
    "structured.yaml": 'name: structured\nprompts:\n  - id: count\n    class: structured\n    text: "1, 2, 3,"\n',
}

RESOURCES = ["dra-v1", "dra-v1beta1", "device-plugin"]

# Checkpoints a user declares for the speculation modes the catalog's Qwen3 models cannot run
# (docs/neuron.md): a Llama target with an EAGLE v1 draft (NxDI), and the EAGLE3 pair of the vllm-neuron
# plugin's design document.
LLAMA_TARGET = {
    "hf_id": "meta-llama/Meta-Llama-3-8B-Instruct",
    "params_b": 8.0,
    "tokenizer": "llama3",
    "vocab_size": 128256,
    "architecture": "llama",
}
CUSTOM_MODELS: dict[str, dict[str, Any]] = {
    "llama-3-8b": LLAMA_TARGET,
    "llama-3-8b-eagle": {
        "hf_id": "yuhuili/EAGLE-LLaMA3-Instruct-8B",
        "params_b": 0.25,
        "tokenizer": "llama3",
        "vocab_size": 128256,
        "architecture": "llama",
        "eagle_draft": True,
    },
    "llama-3.1-8b": {**LLAMA_TARGET, "hf_id": "meta-llama/Llama-3.1-8B-Instruct"},
    "llama-3.1-8b-eagle3": {
        "hf_id": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "params_b": 0.4,
        "tokenizer": "llama3",
        "vocab_size": 128256,
        "architecture": "llama",
        "eagle_draft": True,
    },
}

# Every configuration each Neuron server can run: name -> config data (docs/neuron.md "What each server
# accepts"). Golden files and the structural-diff test render each one with every resources mode.
SUPPORTED: dict[str, dict[str, Any]] = {
    "legacy-neuron-fused": {"vllm_dialect": "legacy-neuron", "speculation_mode": "fused"},
    "legacy-neuron-eagle": {
        "vllm_dialect": "legacy-neuron",
        "speculation_mode": "eagle",
        "custom_models": CUSTOM_MODELS,
        "target": "llama-3-8b",
        "draft": "llama-3-8b-eagle",
    },
    "vllm-neuron-eagle3": {
        "vllm_dialect": "vllm-neuron",
        "speculation_mode": "eagle",
        "custom_models": CUSTOM_MODELS,
        "target": "llama-3.1-8b",
        "draft": "llama-3.1-8b-eagle3",
    },
    "vllm-neuron-0.2-eagle": {
        "vllm_dialect": "vllm-neuron",
        "plugin_release": "0.2",
        "speculation_mode": "eagle",
        "custom_models": CUSTOM_MODELS,
        "target": "llama-3-8b",
        "draft": "llama-3-8b-eagle",
    },
    "vllm-neuron-0.5-eagle": {
        "vllm_dialect": "vllm-neuron",
        "plugin_release": "0.5",
        "speculation_mode": "eagle",
        "custom_models": CUSTOM_MODELS,
        "target": "llama-3-8b",
        "draft": "llama-3-8b-eagle",
    },
}


def validate_k8s(obj: dict[str, Any]) -> None:
    """Validate one object against the Kubernetes 1.34 OpenAPI schema, strict (unknown fields fail)."""
    import kubernetes_validate

    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def k8s_expand(text: str, env: dict[str, str]) -> str:
    """What Kubernetes makes of ``text`` in a container's command, args or env value: ``$(NAME)`` becomes the
    value of ``NAME`` when defined (else stays as written), ``$$`` becomes ``$``. A port of
    kubernetes/kubernetes third_party/forked/golang/expansion/expand.go (``Expand``, ``tryReadVariableName``,
    ``MappingFuncFor``)."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            rest = text[cursor + 1 :]
            if rest[0] == "$":  # escaped operator
                read, is_var, advance = "$", False, 1
            elif rest[0] == "(":
                close = rest.find(")", 1)
                if close >= 0:
                    read, is_var, advance = rest[1:close], True, close + 1
                else:  # incomplete reference
                    read, is_var, advance = "$(", False, 1
            else:
                read, is_var, advance = "$" + rest[0], False, 1
            out.append((env[read] if read in env else f"$({read})") if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] not in ("Deployment", "Job"):
        return []
    spec = obj["spec"]["template"]["spec"]
    return [*(spec.get("initContainers") or []), *spec["containers"]]
