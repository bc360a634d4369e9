"""Golden files: the exact YAML `spectrn render` produces for the default config, every configuration each
Neuron server can run (``SUPPORTED``) in every resources mode, and the simulator, hub, sharded and llmperf
variants.

A deliberate change to the manifests shows up here as a failing test. The tests never write: review the
change, then rewrite the files with `make golden` (tests/render/update_golden.py) and read its `git diff`
before committing. The prompt ConfigMap renders a fixed prompt set so that editing prompts/ does not churn
these files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doubles.render_support import FIXED_PROMPTS, RESOURCES, SUPPORTED
from spectrn.configuration.presets import PRESETS
from spectrn.configuration.sources import build_config
from spectrn.render import manifests as render
from spectrn.render import output

GOLDEN = Path(__file__).parent / "golden"

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
# each preset (`spectrn init --preset`), as `spectrn render` shows it (docs/neuron.md, Presets)
for _name, _data in PRESETS.items():
    CASES[f"preset-{_name}"] = (_data, {"components": ["devices", "baseline", "speculative"]})
for _name, _data in SUPPORTED.items():
    for _res in RESOURCES:
        CASES[f"{_name}-{_res}"] = (
            {**_data, "resources_mode": _res},
            {"components": ["devices", "baseline", "speculative"]},
        )


def render_case(name: str) -> str:
    data, kwargs = CASES[name]
    cfg = build_config(data, environ={})
    return output.to_yaml(render.render_objects(cfg, prompts=FIXED_PROMPTS, **kwargs))


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    path = GOLDEN / f"{name}.yaml"
    assert path.exists(), f"missing golden file {path.name}; review the output, then run `make golden`"
    assert render_case(name) == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from the rendered output; review the change, then run `make golden` and read its diff"
    )


def test_golden_files_match_the_cases_exactly():
    assert {p.name for p in GOLDEN.glob("*.yaml")} == {f"{name}.yaml" for name in CASES}


def test_a_stale_golden_file_fails_and_is_left_alone(tmp_path, monkeypatch):
    # Rewriting is an explicit `make golden` (a reviewed diff), never a side effect of running the tests,
    # whatever the environment says.
    monkeypatch.setattr(__import__(__name__), "GOLDEN", tmp_path)
    monkeypatch.setenv("SPECTRN_UPDATE_GOLDEN", "1")
    stale = tmp_path / "default.yaml"
    stale.write_text("old\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="make golden"):
        test_golden("default")
    assert stale.read_text(encoding="utf-8") == "old\n"
