"""The presets: `spectrn init --preset NAME` writes a file that loads to the preset; its manifests carry exactly the
SDK tutorial's settings, every flag, Neuron config key and environment variable of them cited in docs/neuron.md;
a local run plays the current plugin's simulator profile."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from spectrn.configuration.presets import PRESETS
from spectrn.configuration.sources import build_config, load_config
from spectrn.render.manifests import render_objects
from spectrn.render.server import vllm_args
from spectrn.runtimes.launch import sim_serve_args
from spectrn.runtimes.sim_pair import SimPair

NEURON_MD = (Path(__file__).resolve().parents[2] / "docs" / "neuron.md").read_text(encoding="utf-8")
PRESET_SECTION = NEURON_MD[NEURON_MD.index("## Presets") : NEURON_MD.index("## The speculation window")]
CURRENT_IMAGE = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04"


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _keys(value: Any) -> set[str]:
    """Every mapping key at any depth of a JSON value."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _vllm_containers(cfg: Any) -> list[dict[str, Any]]:
    objs = render_objects(cfg)
    return [
        c
        for o in objs
        if o.get("kind") == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
        if c.get("command", [""])[0] == "vllm" or (c.get("args") or [""])[0] == "serve"
    ]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_rendered_flag_key_and_variable_is_cited(name: str) -> None:
    cfg = build_config({**PRESETS[name], "s3": {"bucket": "my-bucket"}})
    for speculative in (False, True):
        args = vllm_args(cfg, speculative)
        flags = [a for a in args if a.startswith("--")]
        assert flags, "no flags rendered"
        for flag in flags:
            assert f"`{flag}" in NEURON_MD or f"{flag} " in NEURON_MD, f"{name}: {flag} is not cited in docs/neuron.md"
        for i, flag in enumerate(args):
            value = args[i + 1] if flag.startswith("--") and i + 1 < len(args) else ""
            if value.startswith("{"):
                for key in _keys(json.loads(value)):
                    assert f'"{key}"' in NEURON_MD or f"`{key}`" in NEURON_MD, f"{name}: key {key} of {flag} not cited"
    env_names = {e["name"] for c in _vllm_containers(cfg) for e in c.get("env", [])}
    for var in env_names - {"MODEL_ID", "DRAFT_MODEL_ID", "NEURON_COMPILED_ARTIFACTS", "NEURON_LOGICAL_NC_CONFIG"}:
        assert var in PRESET_SECTION, f"{name}: environment variable {var} is not cited in the Presets section"


def test_the_llama_preset_renders_the_tutorials_settings() -> None:
    # aws-neuron-sdk tutorial-eagle3-speculative-decoding-llama-3-1.md, written out here as the oracle
    cfg = build_config(PRESETS["llama-3.1-8b-eagle3"])
    args = vllm_args(cfg, speculative=True)
    assert cfg.server_image == CURRENT_IMAGE
    assert (_flag(args, "--tensor-parallel-size"), _flag(args, "--max-num-seqs"), _flag(args, "--max-model-len")) == (
        "8",
        "2",
        "2048",
    )
    assert "--no-enable-prefix-caching" in args
    assert json.loads(_flag(args, "--additional-config")) == {"neuron_config": {}}
    spec = json.loads(_flag(args, "--speculative-config"))
    assert spec["method"] == "eagle3" and spec["num_speculative_tokens"] == 3
    assert spec["model"].endswith("/RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3")
    assert set(spec) == {"method", "model", "num_speculative_tokens"}
    assert "--hf-overrides" not in args and "--dtype" not in args


def test_the_gpt_oss_preset_renders_the_tutorials_settings_and_timeouts() -> None:
    cfg = build_config({**PRESETS["gpt-oss-120b-eagle3"], "s3": {"bucket": "my-bucket"}})
    for speculative in (False, True):
        args = vllm_args(cfg, speculative)
        assert _flag(args, "--dtype") == "bfloat16"
        assert _flag(args, "--tensor-parallel-size") == "16"
        assert (_flag(args, "--max-num-seqs"), _flag(args, "--max-model-len")) == ("1", "768")
        assert _flag(args, "--max-num-batched-tokens") == "512"
        assert json.loads(_flag(args, "--hf-overrides")) == {"quantization_config": {}}
        assert json.loads(_flag(args, "--additional-config")) == {
            "neuron_config": {
                "quantization": "bf16",
                "num_batched_tokens_buckets": [512],
                "num_seqs_buckets": [1],
                "kv_segment_size_buckets": [512],
                "on_device_sampling_config": {"all_greedy": True},
            }
        }
    spec = json.loads(_flag(vllm_args(cfg, True), "--speculative-config"))
    assert (spec["method"], spec["num_speculative_tokens"]) == ("eagle3", 1)
    containers = _vllm_containers(cfg)
    assert len(containers) == 2
    for c in containers:
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["VLLM_NEURON_COMPILATION_TIMEOUT"] == "1200"
        assert env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "1200"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_init_preset_writes_a_file_that_loads_to_the_preset(name: str, cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "spectrn.yaml"
    code, out, err = cli("init", "--preset", name, str(path))
    assert code == 0, err
    text = path.read_text()
    assert text.startswith(f"# spectrn configuration from preset {name}")
    loaded = load_config(path, environ={})
    expected = build_config(PRESETS[name], environ={})
    assert loaded.model_dump() == expected.model_dump()
    # every key the preset sets is written with the preset's value, not the default
    data = yaml.safe_load(text)
    for key, value in PRESETS[name].items():
        if not isinstance(value, dict) or key in ("custom_models", "neuron_config", "hf_overrides"):
            assert data[key] == value, key


def test_plain_init_still_writes_the_defaults(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "spectrn.yaml"
    code, _, err = cli("init", str(path))
    assert code == 0, err
    assert load_config(path, environ={}).model_dump() == build_config({}, environ={}).model_dump()


def test_an_unknown_preset_is_refused_naming_the_choices(cli: Any, tmp_path: Path) -> None:
    code, _, err = cli("init", "--preset", "qwen3-32b-eagle", str(tmp_path / "x.yaml"))
    assert code == 2
    assert "--preset: unknown preset 'qwen3-32b-eagle'" in err
    assert all(name in err for name in PRESETS)
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_local_run_plays_the_current_plugins_profile(name: str, tmp_path: Path) -> None:
    cfg = build_config(PRESETS[name], environ={})
    pair = SimPair(cfg, work_dir=tmp_path)
    assert pair.profile == "vllm-neuron-0.24"
    for variant in ("baseline", "speculative"):
        cmd = sim_serve_args(cfg, variant == "speculative", host="127.0.0.1", port=8000)
        assert cmd[cmd.index("--profile") + 1] == "vllm-neuron-0.24"
        assert cmd[cmd.index("--served-model-name") + 1] == cfg.target_spec.hf_id
    spec = sim_serve_args(cfg, True, host="127.0.0.1", port=8000)
    assert "--draft" not in spec  # a custom draft: the sim preset's own stands in
    assert spec[spec.index("--window") + 1] == str(PRESETS[name]["num_speculative_tokens"])


def test_timeouts_are_refused_where_no_variable_is_documented() -> None:
    from spectrn.errors import ConfigError

    with pytest.raises(ConfigError, match=r"neuron_timeout_s: vllm_dialect 'legacy-neuron' has no documented"):
        build_config({"neuron_timeout_s": 1200}, environ={})


def test_the_presets_are_cited_by_name() -> None:
    for name in PRESETS:
        assert re.search(rf"`{re.escape(name)}`", PRESET_SECTION), name
