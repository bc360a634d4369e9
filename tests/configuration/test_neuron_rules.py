"""Only configurations a Neuron server can run: every rejected combination through the real CLI exits 2 with
one line naming the field, the fact with its source, and the fix; every supported one renders (goldens in
test_render_golden.py). The facts and their sources: docs/neuron.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from doubles.render_support import CUSTOM_MODELS, SUPPORTED

QWEN_EAGLE = {
    "hf_id": "example/Qwen3-32B-EAGLE",
    "params_b": 0.5,
    "tokenizer": "qwen3",
    "vocab_size": 151936,
    "architecture": "qwen3",
    "eagle_draft": True,
}
# An EAGLE3 draft for a Qwen3 target with a Llama-style config: the plugin's draft class takes it, but no
# vllm-neuron model recipe lists EAGLE3 for Qwen3.
QWEN_EAGLE3_LLAMA_STYLE = {**QWEN_EAGLE, "hf_id": "example/Qwen3-32B-EAGLE3", "architecture": "llama"}
MODELS = {**CUSTOM_MODELS, "qwen3-32b-eagle": QWEN_EAGLE, "qwen3-32b-eagle3": QWEN_EAGLE3_LLAMA_STYLE}

# name -> (config, [text the error line must contain: field, fact, source], fix)
REJECTED: dict[str, tuple[dict[str, object], list[str], str]] = {
    "vanilla on the legacy fork": (
        {"speculation_mode": "vanilla"},
        [
            "speculation_mode: 'vanilla' is not supported by vllm_dialect 'legacy-neuron'",
            "fused_outputs",
            "aws-neuron/upstreaming-to-vllm",
        ],
        "use speculation_mode: fused",
    ),
    "vanilla on the plugin": (
        {"speculation_mode": "vanilla", "vllm_dialect": "vllm-neuron"},
        [
            "speculation_mode: 'vanilla' is not supported by vllm_dialect 'vllm-neuron'",
            "only EAGLE",
            "vllm-project/vllm-neuron",
        ],
        "vllm_dialect: legacy-neuron for draft-model speculation (the V0 fork, out of support since Neuron SDK 2.28)",
    ),
    "draft-model (fused) speculation on the plugin": (
        {"speculation_mode": "fused", "vllm_dialect": "vllm-neuron"},
        [
            "speculation_mode: 'fused' is not supported by vllm_dialect 'vllm-neuron'",
            "no draft-model",
            "migration-nxdi-to-vllm-neuron.md",
        ],
        "vllm_dialect: legacy-neuron for draft-model speculation (the V0 fork, out of support since Neuron SDK 2.28)",
    ),
    # Medusa runs on no server: the checks that used to accept a Llama target with heads at batch 1 are gone.
    "medusa on the legacy fork": (
        {"speculation_mode": "medusa", "target": "llama-3-8b", "max_num_seqs": 1},
        [
            "speculation_mode: 'medusa' runs on no vLLM Neuron server (vllm_dialect 'legacy-neuron')",
            "no Medusa handling",
            "token-generation model",
            "aws-neuron/upstreaming-to-vllm",
            "models/model_base.py",
        ],
        "speculation_mode: eagle with an EAGLE3 draft on vllm_dialect: vllm-neuron (supported)",
    ),
    "medusa on the plugin": (
        {"speculation_mode": "medusa", "vllm_dialect": "vllm-neuron", "target": "llama-3-8b", "max_num_seqs": 1},
        ["speculation_mode: 'medusa' runs on no vLLM Neuron server (vllm_dialect 'vllm-neuron'", "EAGLE only"],
        "legacy-neuron (the V0 fork, out of support since Neuron SDK 2.28)",
    ),
    "eagle with a plain draft": (
        {"speculation_mode": "eagle"},
        ["speculation_mode: 'eagle' needs an EAGLE draft", "'qwen3-1.7b' is a plain model", "feature-guide.rst"],
        "eagle_draft: true",
    ),
    "EAGLE v1 with a Qwen3 target on the legacy fork": (
        {"speculation_mode": "eagle", "draft": "qwen3-32b-eagle"},
        [
            "target: speculation_mode 'eagle' on vllm_dialect 'legacy-neuron' runs NxDI EAGLE v1",
            "Qwen3 cannot be an EAGLE draft",
            "models/qwen3/modeling_qwen3.py",
        ],
        "Llama target",
    ),
    "EAGLE v1 with a Qwen3 target on plugin 0.2": (
        {
            "speculation_mode": "eagle",
            "vllm_dialect": "vllm-neuron",
            "plugin_release": "0.2",
            "draft": "qwen3-32b-eagle",
        },
        [
            "target: speculation_mode 'eagle' on vllm_dialect 'vllm-neuron' (plugin_release 0.2) runs NxDI EAGLE v1",
            "Qwen3 cannot be an EAGLE draft",
        ],
        "Llama target",
    ),
    "eagle3 with a Qwen3-architecture draft on the current plugin": (
        {"speculation_mode": "eagle", "vllm_dialect": "vllm-neuron", "draft": "qwen3-32b-eagle"},
        [
            "draft: speculation_mode 'eagle' on vllm_dialect 'vllm-neuron' (plugin_release current) runs eagle3",
            "Eagle3LlamaForCausalLM",
            "speculative_decoding_design.md",
        ],
        "architecture: llama",
    ),
}


def _write(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "spectrn.yaml"
    path.write_text(yaml.safe_dump({"custom_models": MODELS, **data}), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", list(REJECTED))
def test_rejected_configuration(cli, tmp_path, name):
    data, needles, fix = REJECTED[name]
    code, out, err = cli("render", "--config", _write(tmp_path, data))
    assert code == 2, err
    assert out == ""
    (line,) = [x for x in err.splitlines() if x.strip()]  # one line: no warning, no traceback
    assert line.startswith("ConfigError: ")
    for needle in needles:
        assert needle in line, (needle, line)
    assert f"(fix: {fix}" in line or (fix in line.split("(fix: ", 1)[1]), line
    assert "spectrn.yaml line" in line  # where the offending values came from


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_supported_configuration_renders(cli, tmp_path, name):
    data = {k: v for k, v in SUPPORTED[name].items() if k != "custom_models"}
    code, out, err = cli("render", "--config", _write(tmp_path, data), "--set", "s3.bucket=my-models")
    assert code == 0, err
    assert out.count("kind: Deployment") == 2
    if data["vllm_dialect"] == "legacy-neuron":
        # runs, but on the V0 fork Neuron dropped in SDK 2.28: one warning says so and names the way out
        (line,) = err.splitlines()
        assert line.startswith("warning: UNSUPPORTED STACK: vllm_dialect legacy-neuron is the Neuron fork of vLLM V0")
        assert "announce-no-support-vllm-v0.rst" in line and "vllm-user-guide-v1.rst" in line
        assert "vllm_dialect: vllm-neuron" in line and "EAGLE3" in line
    else:
        assert err == ""


def test_eagle3_on_a_family_without_a_recipe_is_a_warning(cli, tmp_path):
    """The plugin's recipes list EAGLE3 for Llama 3 and GPT-OSS only: a Qwen3 target renders, with a warning
    naming that source; the recipe's own Llama pair renders without one."""
    data = {"vllm_dialect": "vllm-neuron", "speculation_mode": "eagle", "draft": "qwen3-32b-eagle3"}
    code, out, err = cli("render", "--config", _write(tmp_path, data), "--set", "s3.bucket=my-models")
    assert code == 0, err
    assert out.count("kind: Deployment") == 2
    (line,) = err.splitlines()
    assert line.startswith("warning: target: 'qwen3-32b' (architecture 'qwen3') with eagle3")
    assert "EAGLE3 for Llama 3 and GPT-OSS only" in line and "vllm-neuron/docs/model-recipes/" in line
    llama = {**data, "target": "llama-3.1-8b", "draft": "llama-3.1-8b-eagle3"}
    code, _, err = cli("render", "--config", _write(tmp_path, llama), "--set", "s3.bucket=my-models")
    assert (code, err) == (0, "")


def test_window_semantics_are_in_the_config_reference(cli):
    code, out, _ = cli("config-reference")
    assert code == 0
    (row,) = [line for line in out.splitlines() if line.startswith("| `num_speculative_tokens`")]
    assert "speculation_length = k" in row and "k-1" in row and "at most k tokens" in row and "k+1" in row


def test_the_plugin_release_picks_image_config_key_and_method(cli, tmp_path):
    base = {k: v for k, v in SUPPORTED["vllm-neuron-eagle3"].items() if k != "custom_models"}
    for release, image_tag, key, method in (
        ("current", "0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04", "neuron_config", "eagle3"),
        ("0.2", "0.11.0-neuronx-py312-sdk2.27.1-ubuntu24.04", "override_neuron_config", "eagle"),
    ):
        data = {**base, "plugin_release": release, "target": "llama-3-8b", "draft": "llama-3-8b-eagle"}
        code, out, err = cli("render", "--config", _write(tmp_path, data), "--only", "speculative")
        assert code == 0, err
        (dep,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
        c = dep["spec"]["template"]["spec"]["containers"][0]
        assert c["image"].endswith(image_tag)
        args = c["args"]
        assert list(json.loads(args[args.index("--additional-config") + 1])) == [key]
        assert json.loads(args[args.index("--speculative-config") + 1])["method"] == method
