"""Values as a person writes them: YAML reads ``plugin_release: 0.2`` and ``compile.cpu=190`` as numbers; where
the field holds text they are that text, exactly as written, from every source (file, environment, --set, flag)."""

from __future__ import annotations

import pytest
import yaml

from spectrn.configuration.sources import build_config, load_config
from spectrn.errors import ConfigError


def test_a_file_number_is_the_text_as_written(tmp_path):
    path = tmp_path / "spectrn.yaml"
    path.write_text("plugin_release: 0.2\ncompile:\n  cpu: 190\nresources:\n  memory: 600\n")
    cfg = load_config(path, environ={})
    assert cfg.plugin_release == "0.2" and cfg.compile.cpu == "190" and cfg.resources.memory == "600"


def test_the_text_is_kept_digit_for_digit(tmp_path):
    """``0.20`` is "0.20" (not the float's "0.2", which would silently pick a choice the person did not write)."""
    path = tmp_path / "spectrn.yaml"
    path.write_text("compile:\n  cpu: 1.50\n")
    assert load_config(path, environ={}).compile.cpu == "1.50"
    path.write_text("plugin_release: 0.20\n")
    with pytest.raises(ConfigError) as e:
        load_config(path, environ={})
    assert "plugin_release: Input should be 'current', '0.2' or '0.5'" in e.value.message
    assert f"{path} line 1" in e.value.message


def test_an_environment_number_is_the_text_as_written():
    cfg = load_config(None, environ={"SPECTRN_PLUGIN_RELEASE": "0.2", "SPECTRN_COMPILE__CPU": "190"})
    assert cfg.plugin_release == "0.2" and cfg.compile.cpu == "190"


def test_a_set_number_is_the_text_as_written():
    cfg = build_config({}, {"plugin_release": 0.2, "compile.cpu": 190}, environ={},
                       texts={"plugin_release": "0.2", "compile.cpu": "190"})  # fmt: skip
    assert cfg.plugin_release == "0.2" and cfg.compile.cpu == "190"


def test_a_flag_number_without_its_text_is_its_shortest_form():
    """A typed flag hands over a number, not text: 0.2 -> "0.2", 190 -> "190"."""
    cfg = build_config({}, {"plugin_release": 0.2, "compile.cpu": 190}, environ={},
                       sources={"plugin_release": "flag --x", "compile.cpu": "flag --y"})  # fmt: skip
    assert cfg.plugin_release == "0.2" and cfg.compile.cpu == "190"


def test_numbers_stay_numbers_where_the_field_holds_numbers(tmp_path):
    path = tmp_path / "spectrn.yaml"
    path.write_text("num_speculative_tokens: 5\nbench:\n  requests: 64\n  concurrency: [1, 4]\n")
    cfg = load_config(path, environ={})
    assert cfg.num_speculative_tokens == 5 and cfg.bench.requests == 64 and cfg.bench.concurrency == [1, 4]


def test_a_boolean_is_never_text(tmp_path):
    """``plugin_release: true`` is a mistake, not the text "True": the field is named."""
    path = tmp_path / "spectrn.yaml"
    path.write_text("plugin_release: true\n")
    with pytest.raises(ConfigError) as e:
        load_config(path, environ={})
    assert "plugin_release" in e.value.message


def test_through_the_cli_every_source(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bucket = ("--set", "s3.bucket=my-models")
    # --set
    code, out, err = cli("compile", "--dry-run", "--windows", "5", "--set", "compile.cpu=190", *bucket)
    assert code == 0, err
    jobs = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Job"]
    assert jobs and all(c["resources"]["limits"]["cpu"] == "190" for j in jobs
                        for c in j["spec"]["template"]["spec"]["containers"])  # fmt: skip
    # file
    (tmp_path / "spectrn.yaml").write_text("plugin_release: 0.2\ncompile:\n  cpu: 190\ns3:\n  bucket: my-models\n")
    code, _, err = cli("render")
    assert code == 0, err
    # environment
    monkeypatch.setenv("SPECTRN_PLUGIN_RELEASE", "0.2")
    code, _, err = cli("render", "--set", "plugin_release=0.2")
    assert code == 0, err
