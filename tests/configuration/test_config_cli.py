"""Every configuration mistake the issue lists fails through the real CLI entry point with a message that
names the field, and a non-zero exit code (ConfigError: 2). Runs `spectrn render` in-process via
``spectrn.cli.main.main`` in an empty folder with no SPECTRN_* variables; one case also runs the installed
console script in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CUSTOM_LLAMA = """\
custom_models:
  llama-1b:
    hf_id: meta-llama/Llama-3.2-1B
    params_b: 1.2
    tokenizer: llama3
    vocab_size: 128256
draft: llama-1b
"""


def _write(tmp_path: Path, text: str, name: str = "spectrn.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_valid_config_renders_the_services_only(cli):
    code, out, err = cli("render")
    assert code == 0, err
    assert "kind: Deployment" in out and "name: qwen-sd-vllm" in out
    assert "kind: Job" not in out  # the load Job is `spectrn bench`'s, or explicit with --job
    assert cli("render", "--no-job")[1] == out  # the old spelling still works


def test_tokenizer_mismatch(cli, tmp_path):
    code, out, err = cli("render", "--config", _write(tmp_path, CUSTOM_LLAMA))
    assert code == 2
    assert "ConfigError" in err and "draft:" in err and "does not share the tokenizer" in err
    assert out == ""


def test_draft_not_smaller_than_target(cli):
    code, _, err = cli("render", "--draft", "qwen3-32b")
    assert code == 2
    assert "draft: 'qwen3-32b' (32.8B) is not smaller than target" in err


def test_unknown_model(cli):
    code, _, err = cli("render", "--draft", "qwen3-999b")
    assert code == 2
    assert "draft: unknown model 'qwen3-999b'" in err and "custom_models" in err
    code, _, err = cli("render", "--set", "target=gpt-7")
    assert code == 2 and "target: unknown model 'gpt-7'" in err


@pytest.mark.parametrize("window", ["0", "33", "-1"])
def test_window_outside_1_to_32(cli, window):
    code, _, err = cli("render", "--window", window)
    assert code == 2
    assert f"--window: {window} is outside 1..32 (config key num_speculative_tokens)" in err


@pytest.mark.parametrize("window", ["3", "20"])
def test_window_outside_tuned_range_warns(cli, window):
    code, out, err = cli("render", "--window", window)
    assert code == 0
    assert f"num_speculative_tokens: {window} is outside the tuned range 5..15" in " ".join(err.split())
    assert f'"num_speculative_tokens": {window}' in out


def test_tp_that_does_not_fit_the_cores(cli):
    code, _, err = cli("render", "--set", "tensor_parallel_size=16")
    assert code == 2
    assert "tensor_parallel_size: 16 does not fit the requested cores" in err
    assert "set tensor_parallel_size: 32" in err


def test_devices_that_do_not_fit_the_instance(cli):
    code, _, err = cli("render", "--set", "instance_type=trn2.3xlarge")
    assert code == 2
    assert "resources.neuron_devices: 8 exceeds the 1 chips of trn2.3xlarge" in err


def test_lnc_not_supported_on_instance(cli):
    code, _, err = cli("render", "--set", "instance_type=trn1.32xlarge", "--set", "logical_neuron_cores=2")
    assert code == 2
    assert "logical_neuron_cores: 2 is not supported on trn1.32xlarge" in err


@pytest.mark.parametrize("mode", ["vanilla", "fused"])
def test_mode_unsupported_by_dialect(cli, mode):
    code, _, err = cli("render", "--set", "vllm_dialect=vllm-neuron", "--set", f"speculation_mode={mode}")
    assert code == 2
    assert f"speculation_mode: '{mode}' is not supported by vllm_dialect 'vllm-neuron'" in err


@pytest.mark.parametrize("dialect", ["legacy-neuron", "vllm-neuron"])
def test_medusa_is_refused_on_every_dialect(cli, dialect):
    code, out, err = cli("render", "--set", f"vllm_dialect={dialect}", "--set", "speculation_mode=medusa")
    assert (code, out) == (2, "")
    assert f"speculation_mode: 'medusa' runs on no vLLM Neuron server (vllm_dialect '{dialect}'" in err


def test_malformed_yaml(cli, tmp_path):
    path = _write(tmp_path, "target: qwen3-32b\nbench: [1, 2\n")
    code, out, err = cli("render", "--config", path)
    assert code == 2
    assert "malformed YAML" in err and path in err and "line" in err
    assert out == ""


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("namespce: spectrn\n", "namespce: unknown key"),
        ("bench:\n  concurrancy: [4]\n", "bench.concurrancy: unknown key"),
        ("s3:\n  bucket_name: x\n", "s3.bucket_name: unknown key"),
    ],
)
def test_misspelt_keys(cli, tmp_path, text, where):
    code, _, err = cli("render", "--config", _write(tmp_path, text))
    assert code == 2
    assert where in err


def test_misspelt_key_through_set(cli):
    code, _, err = cli("render", "--set", "bench.requets=5")
    assert code == 2 and "bench.requets: unknown key" in err


def test_missing_config_file(cli, tmp_path):
    code, _, err = cli("render", "--config", str(tmp_path / "nope.yaml"))
    assert code == 2 and "does not exist" in err


def test_bad_cli_choices(cli):
    assert cli("render", "--only", "both")[0] == 2
    assert cli("render", "--engine", "locust")[0] == 2
    code, _, err = cli("render", "--run-id", "Not_OK")
    assert code == 2 and "run id 'Not_OK'" in err


def test_iam_policy_flag(cli):
    import json

    code, out, _ = cli("render", "--iam-policy", "--set", "cloudwatch.namespace=Team/SD")
    assert code == 0
    policy = json.loads(out)
    assert policy["Statement"][0]["Condition"]["StringEquals"]["cloudwatch:namespace"] == "Team/SD"


def test_output_folder(cli, tmp_path):
    code, out, err = cli(
        "render",
        "--job",
        "--run-id",
        "r1",
        "--set",
        "spectrn_image=registry.example.com/spectrn:1",
        "-o",
        str(tmp_path / "manifests"),
    )
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "manifests").iterdir())
    assert names[0] == "01-namespace-spectrn.yaml"
    assert any(n.endswith("job-spectrn-loadgen-r1.yaml") for n in names)
    assert out == ""


def test_console_script_subprocess(tmp_path):
    # The installed entry point, not just main(): same message, same exit code.
    bad = _write(tmp_path, "speculation_mode: vanilla\nvllm_dialect: vllm-neuron\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECTRN_")}
    proc = subprocess.run(
        [sys.executable, "-m", "spectrn", "render", "--config", bad],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "ConfigError:" in proc.stderr and "speculation_mode: 'vanilla' is not supported" in proc.stderr
