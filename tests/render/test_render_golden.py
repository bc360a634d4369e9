"""Golden files: the exact YAML `spectrn render` produces for the default config and every
dialect x mode x resources combination, plus the simulator, hub, sharded and llmperf variants.

A deliberate change to the manifests shows up here as a diff. Review it, then regenerate with

    SPECTRN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/render/test_render_golden.py

The prompt ConfigMap renders a fixed prompt set so that editing prompts/ does not churn these files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _render_support import FIXED_PROMPTS

from spectrn.render import manifests as render

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SPECTRN_UPDATE_GOLDEN") == "1"

DIALECT_MODES = [
    ("legacy-neuron", "fused"),
    ("legacy-neuron", "vanilla"),
    ("legacy-neuron", "eagle"),
    ("legacy-neuron", "medusa"),
    ("vllm-neuron", "eagle"),
]
RESOURCES = ["dra-v1", "dra-v1beta1", "device-plugin"]

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {"run_id": "golden"}),
    "sim-device-plugin": ({"runtime": "sim", "resources_mode": "device-plugin"}, {"run_id": "golden"}),
    "hub-hf-token": (
        {
            "model_source": "hub",
            "hf_token_secret": {"name": "hf-token"},
            "service_accounts": {
                "vllm_role_arn": "arn:aws:iam::111122223333:role/spectrn-vllm",
                "loadgen_role_arn": "arn:aws:iam::111122223333:role/spectrn-loadgen",
            },
        },
        {"components": ["serviceaccounts", "baseline", "speculative"]},
    ),
    "loadgen-sharded": ({"bench": {"loadgen_pods": 4}}, {"components": ["loadgen"], "run_id": "golden"}),
    "llmperf": ({}, {"components": ["loadgen"], "run_id": "golden", "engine": "llmperf"}),
}
for _dialect, _mode in DIALECT_MODES:
    for _res in RESOURCES:
        CASES[f"{_dialect}-{_mode}-{_res}"] = (
            {"vllm_dialect": _dialect, "speculation_mode": _mode, "resources_mode": _res},
            {"components": ["devices", "baseline", "speculative"]},
        )


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(make_cfg, name):
    data, kwargs = CASES[name]
    cfg = make_cfg(data)
    text = render.to_yaml(render.render_objects(cfg, prompts=FIXED_PROMPTS, **kwargs))
    path = GOLDEN / f"{name}.yaml"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path.name}; run with SPECTRN_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from the rendered output; review, then run with SPECTRN_UPDATE_GOLDEN=1"
    )


def test_no_stray_golden_files():
    expected = {f"{name}.yaml" for name in CASES}
    assert {p.name for p in GOLDEN.glob("*.yaml")} <= expected
