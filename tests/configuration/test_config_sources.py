"""Config input as users type it, through the real CLI: a scalar where a list is expected, every error naming
where the bad value came from (flag, --set key, environment variable, file and line), control characters,
names that become paths or labels, the S3 prefixes, `-o ../out`, the cluster-only warnings and images."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from doubles.kube_fake import FakeKube

PRELOADED = ("--set", "spectrn_image_preloaded=true")


def _pod_config(out: str) -> dict:
    (cm,) = [d for d in yaml.safe_load_all(out) if d and d["metadata"]["name"].startswith("spectrn-config-")]
    return yaml.safe_load(cm["data"]["spectrn.yaml"])


def _error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("ConfigError: ")]
    assert len(lines) == 1, err
    return lines[0]


# ---- a scalar where a list is expected -----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "levels"), [("8", [8]), ("1,4,16", [1, 4, 16]), ("[2, 3]", [2, 3])])
def test_scalar_for_a_list_through_set(cli, value, levels):
    code, out, err = cli("render", "--job", *PRELOADED, "--set", f"bench.concurrency={value}")
    assert code == 0, err
    assert _pod_config(out)["bench"]["concurrency"] == levels


def test_scalar_for_a_list_through_the_environment(cli, monkeypatch):
    monkeypatch.setenv("SPECTRN_BENCH__CONCURRENCY", "8")
    code, out, err = cli("render", "--job", *PRELOADED)
    assert code == 0, err
    assert _pod_config(out)["bench"]["concurrency"] == [8]


def test_other_tools_spectrn_variables_are_not_config(cli, monkeypatch):
    monkeypatch.setenv("SPECTRN_KIND_CLUSTER", "smoke")  # hack/kind-smoke.sh's setting, not a config key
    monkeypatch.setenv("SPECTRN_CHECKOV", "/opt/checkov")
    assert cli("render")[0] == 0
    monkeypatch.setenv("SPECTRN_BENCH__CONCURENCY", "8")  # misspelt key under a real section: still an error
    code, _, err = cli("render")
    assert code == 2 and "bench.concurency: unknown key" in err
    assert "environment variable SPECTRN_BENCH__CONCURENCY" in err


# ---- every error names where the value came from ----------------------------------------------------------------


def test_a_flag_is_blamed_not_the_file(cli, tmp_path):
    (tmp_path / "spectrn.yaml").write_text("namespace: team\nbench:\n  requests: 10\n")
    code, _, err = cli("render", "--window", "0")
    line = _error_line(err)
    assert code == 2
    assert "--window: 0 is outside 1..32 (config key num_speculative_tokens)" in line
    assert "spectrn.yaml" not in line


def test_the_file_and_line_are_named(cli, tmp_path):
    (tmp_path / "spectrn.yaml").write_text("namespace: team\nbench:\n  requests: 0\n")
    code, _, err = cli("render")
    line = _error_line(err)
    assert code == 2 and "bench.requests: Input should be greater than or equal to 1" in line
    assert "(from spectrn.yaml line 3)" in line


def test_the_set_key_is_named(cli):
    code, _, err = cli("render", "--set", "bench.requests=abc")
    assert code == 2 and "(from --set bench.requests)" in _error_line(err)


def test_the_environment_variable_is_named(cli, monkeypatch, tmp_path):
    (tmp_path / "spectrn.yaml").write_text("bench:\n  requests: 10\n")
    monkeypatch.setenv("SPECTRN_BENCH__REQUESTS", "-3")
    code, _, err = cli("render")
    assert code == 2 and "(from environment variable SPECTRN_BENCH__REQUESTS)" in _error_line(err)


def test_a_cross_field_error_names_each_fields_origin(cli, tmp_path):
    (tmp_path / "spectrn.yaml").write_text("target: qwen3-1.7b\n")
    code, _, err = cli("render", "--draft", "qwen3-8b")
    line = _error_line(err)
    assert code == 2 and "is not smaller than target" in line
    assert "draft from flag --draft; target from spectrn.yaml line 1" in line


def test_a_later_layer_takes_the_blame(cli, tmp_path, monkeypatch):
    (tmp_path / "spectrn.yaml").write_text("bench:\n  concurrency: [4]\n")
    monkeypatch.setenv("SPECTRN_BENCH__CONCURRENCY", "2")
    code, _, err = cli("render", "--set", "bench.concurrency=[0]")
    assert code == 2 and "level 0 outside 1..4096 (from --set bench.concurrency)" in _error_line(err)


# ---- control characters and names ---------------------------------------------------------------------------------


# YAML double-quoted escapes: what a user types to get a line break or tab into a --set value
@pytest.mark.parametrize("value", ['"spec\\ntrn"', '"tab\\there"', '"nul\\0"', '"bell\\a"', '"line\\u2028sep"'])
def test_control_characters_name_the_field(cli, value):
    code, out, err = cli("render", "--set", "bench.prompts=x", "--set", f"sim.preset={value}")
    line = _error_line(err)
    assert code == 2 and out == ""
    assert line.startswith("ConfigError: sim.preset: the value contains the control character U+")
    assert "(from --set sim.preset)" in line
    assert len(err.strip().splitlines()) == 1  # one line, not a multi-line render error


def test_control_character_in_a_file_names_the_line(cli, tmp_path):
    (tmp_path / "spectrn.yaml").write_text('namespace: team\ncloudwatch:\n  namespace: "Team\\tSD"\n')
    code, _, err = cli("render")
    line = _error_line(err)
    assert code == 2 and "cloudwatch.namespace: the value contains the control character U+0009" in line
    assert "(from spectrn.yaml line 3)" in line


@pytest.mark.parametrize(
    ("models", "field"),
    [
        ({"../x": {}}, "custom_models.../x"),
        ({"a b": {}}, "custom_models.a b"),
        ({"ok": {"hf_id": "$(HF_TOKEN)"}}, "custom_models.ok.hf_id"),
        ({"ok": {"hf_id": "org/.."}}, "custom_models.ok.hf_id"),
        ({"ok": {"hf_id": "org/name;rm -rf"}}, "custom_models.ok.hf_id"),
    ],
)
def test_model_keys_and_ids_pass_the_name_rule(cli, tmp_path, models, field):
    base = {"params_b": 1.0, "tokenizer": "qwen3", "vocab_size": 151936, "hf_id": "org/name"}
    data = {"custom_models": {k: {**base, **v} for k, v in models.items()}}
    (tmp_path / "spectrn.yaml").write_text(yaml.safe_dump(data))
    code, _, err = cli("render")
    line = _error_line(err)
    assert code == 2 and line.startswith(f"ConfigError: {field} ") and "is not a safe name" in line
    assert "spectrn.yaml line" in line and "(fix: use 1-63 letters" in line


def test_a_hugging_face_id_has_at_most_two_parts(cli, tmp_path):
    model = {"params_b": 1.0, "tokenizer": "qwen3", "vocab_size": 151936, "hf_id": "org/x/../../etc"}
    (tmp_path / "spectrn.yaml").write_text(yaml.safe_dump({"custom_models": {"ok": model}}))
    code, _, err = cli("render")
    line = _error_line(err)
    assert code == 2 and "custom_models.ok.hf_id 'org/x/../../etc' (from spectrn.yaml line 3)" in line
    assert "organisation/name" in line


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("*", "s3.artifacts_prefix '*' (from --set s3.artifacts_prefix) is not a safe name"),
        ("compiled/*", "is not a safe name"),
        ("compiled/../models", "is not a safe name"),
        ("${aws:username}", "is not a safe name"),
        ("/", "s3.artifacts_prefix: empty"),
        ("models", "overlaps s3.models_prefix 'models'"),
        ("models/compiled", "overlaps s3.models_prefix 'models'"),
    ],
)
def test_artifacts_prefix_cannot_widen_the_s3_policy(cli, prefix, message):
    code, out, err = cli(
        "render", "--s3-policy", "--set", "s3.bucket=my-models", "--set", f"s3.artifacts_prefix={prefix}"
    )
    assert code == 2 and out == ""
    assert message in _error_line(err)


def test_a_models_prefix_inside_the_artifacts_is_refused_too(cli):
    code, _, err = cli("render", "--s3-policy", "--set", "s3.models_prefix=compiled/weights")
    assert code == 2 and "overlaps" in _error_line(err)


# ---- -o is the user's folder ----------------------------------------------------------------------------------------


def test_render_into_a_parent_folder(cli, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    code, _, err = cli("render", "-o", "../out")
    assert code == 0, err
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files[0] == "01-namespace-spectrn.yaml" and any("deployment-qwen-sd-vllm" in f for f in files)
    assert list((tmp_path / "work").iterdir()) == []
    assert {p.parent for p in tmp_path.rglob("*.yaml")} == {tmp_path / "out"}


# ---- warnings and images for a cluster only -----------------------------------------------------------------------

PLACEHOLDER = "s3.bucket: still the placeholder"


def test_placeholder_bucket_warning_for_render_only(cli, monkeypatch):
    code, _, err = cli("render")
    assert code == 0 and PLACEHOLDER in err
    assert PLACEHOLDER not in cli("render", "--set", "s3.bucket=my-models")[2]
    # local bench: no cluster involved (the endpoint is dead: exit 4, after the config was loaded)
    code, _, err = cli("bench", "--endpoint", "baseline=http://127.0.0.1:9", "--run-id", "r", "--no-report")
    assert code == 4 and PLACEHOLDER not in err
    # status and teardown read the cluster but render nothing for it
    monkeypatch.setattr("spectrn.kube.client.connect", lambda **kw: FakeKube(context="fake"))
    for argv in (("status",), ("teardown", "--dry-run")):
        code, _, err = cli(*argv)
        assert code == 0, err
        assert PLACEHOLDER not in err, argv


def test_dra_on_auto_mode_or_karpenter_warns(cli):
    code, _, err = cli("render", "--set", "s3.bucket=my-models", "--set", "node_provisioning=auto-mode")
    text = " ".join(err.split())
    assert code == 0 and "DRA is not currently supported with EKS Auto Mode" in text
    code, _, err = cli("render", "--set", "s3.bucket=my-models", "--set", "node_provisioning=karpenter")
    assert code == 0 and "Karpenter supports DRA from version 1.15" in " ".join(err.split())
    code, _, err = cli(
        "render", "--set", "s3.bucket=my-models", "--set", "node_provisioning=auto-mode",
        "--set", "resources_mode=device-plugin",
    )  # fmt: skip
    assert code == 0
    # no DRA warning; the default dialect's UNSUPPORTED STACK notice is the only one (test_stack_notice.py)
    assert [line.split(":", 2)[1].strip() for line in err.splitlines()] == ["UNSUPPORTED STACK"]


def test_a_registry_less_spectrn_image_is_refused_for_a_trainium_cluster(cli):
    code, out, err = cli("render", "--job", "--set", "s3.bucket=my-models")
    line = _error_line(err)
    assert code == 2 and out == ""
    assert "spectrn_image: 'spectrn:0.1.0' (the default) names no registry" in line
    assert "make image IMAGE=" in line and "docker push" in line and "docs/kubernetes.md" in line
    ecr = "123456789012.dkr.ecr.us-east-2.amazonaws.com/spectrn:0.1.0"
    assert cli("render", "--job", "--set", "s3.bucket=my-models", "--set", f"spectrn_image={ecr}")[0] == 0
    assert cli("render", "--job", "--set", "s3.bucket=my-models", *PRELOADED)[0] == 0
    assert cli("render", "--job", "--engine", "llmperf", "--set", "s3.bucket=my-models")[0] == 0  # no spectrn image
    assert cli("render", "--set", "s3.bucket=my-models")[0] == 0  # the services need no spectrn image


def test_the_simulator_image_warns_on_a_cluster(cli):
    code, _, err = cli("render", "--set", "runtime=sim", "--set", "resources_mode=device-plugin")
    assert code == 0
    assert "sim.image: 'spectrn:0.1.0' (the default) names no registry" in " ".join(err.split())
    assert "kind load docker-image" in " ".join(err.split())


def test_job_options_need_job(cli):
    code, _, err = cli("render", "--engine", "llmperf")
    assert code == 2 and "--engine applies to the load Job" in err and "add --job" in err


def test_readme_quickstart_renders_the_services(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "spectrn render | kubectl apply -f -" in readme
    assert "spectrn render --job" in readme
