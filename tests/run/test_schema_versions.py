"""Run folders survive upgrades: a run written by an older spectrn is analysed, reported, compared and published
by this one; what it recorded is history, read leniently, and what cannot be read is one line naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spectrn.configuration.config import SpectrnConfig
from spectrn.run.folder import RunFolder
from spectrn.run.records import RUN_SCHEMA_VERSION, RunMeta, read_run_meta

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
PAST = {1: FIXTURES / "schema1" / "r-schema1", 2: FIXTURES / "schema2" / "r-schema2"}


@pytest.fixture
def old_run(tmp_path):
    def copy(version: int) -> Path:
        dest = tmp_path / f"v{version}" / PAST[version].name
        shutil.copytree(PAST[version], dest)
        return dest

    return copy


def edit_run_json(run: Path, change) -> None:
    data = json.loads((run / "run.json").read_text())
    change(data)
    (run / "run.json").write_text(json.dumps(data))


def test_every_past_version_is_kept_as_a_fixture():
    assert sorted(PAST) == list(range(1, RUN_SCHEMA_VERSION + 1))
    assert "schema_version" not in json.loads((PAST[1] / "run.json").read_text())
    assert json.loads((PAST[2] / "run.json").read_text())["schema_version"] == 2


def test_a_new_run_json_records_the_schema_version():
    meta = RunMeta(run_id="r", spectrn_version="x", started_at=0.0)
    assert json.loads(meta.model_dump_json())["schema_version"] == RUN_SCHEMA_VERSION


@pytest.mark.parametrize("version", sorted(PAST))
def test_a_past_run_is_analysed_reported_compared_and_published(cli, old_run, version):
    run = old_run(version)
    before = (run / "run.json").read_bytes()
    code, out, err = cli("analyze", str(run), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["run_id"] == run.name
    assert (run / "report" / "index.html").exists() and (run / "metrics.emf.jsonl").exists()
    assert (run / "run.json").read_bytes() == before  # history is read, never rewritten
    code, _, err = cli("report", str(run))
    assert code == 0, err
    new = old_run(2) if version == 1 else run
    code, out, err = cli("compare", str(run), str(new))
    assert code == 0 and "speedups:" in out, err
    code, _, err = cli("publish", str(run), "--emf")
    assert code == 0, err


def test_a_recorded_config_that_breaks_todays_rules_is_read_as_history(cli, old_run):
    """A model that left the catalog, a choice that left its list, a key renamed since, a bound tightened."""
    run = old_run(1)

    def change(d):
        d["config"]["draft"] = "qwen3-0.1b-retired"  # not in today's catalog
        d["config"]["plugin_release"] = "0.1"  # a choice today's schema does not list
        d["config"]["bench"]["old_name"] = 3  # a key renamed since
        d["config"]["num_speculative_tokens"] = 40  # above today's cross-field bound
        d["old_top_level"] = True

    edit_run_json(run, change)
    code, out, err = cli("analyze", str(run), "-o", "json")
    assert code == 0, err
    summary = json.loads(out)
    (finding,) = [f for f in summary["findings"] if f["code"] == "recorded_config"]
    text = finding["message"]
    assert "config.plugin_release: not valid in this spectrn" in text
    assert "config.bench.old_name: not a key in this spectrn" in text
    assert "old_top_level: not a key in this spectrn" in text
    assert summary["config_label"].startswith("qwen3-0.1b-retired/k40")  # what the run recorded, kept
    assert "read as history" in (run / "report" / "summary.md").read_text()
    assert "read as history" in " ".join(err.split())


def test_the_reader_drops_only_what_it_cannot_read():
    data = json.loads((PAST[1] / "run.json").read_text())
    data["config"]["bench"]["max_tokens"] = "many"
    meta = read_run_meta(data, "run.json")
    assert meta.config.bench.max_tokens == SpectrnConfig().bench.max_tokens  # today's default
    assert meta.config.draft == data["config"]["draft"] and meta.run_id == data["run_id"]
    assert any("config.bench.max_tokens" in n for n in meta.read_notes)
    assert meta.schema_version == RUN_SCHEMA_VERSION


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            lambda d: d.update(schema_version=99),
            "was written by a newer spectrn (run schema 99; this spectrn reads up to",
        ),
        (lambda d: d.pop("run_id"), "has no run_id, so it cannot be read as a run"),
        (lambda d: d.update(schema_version="two"), "schema_version 'two' is not a version number"),
    ],
    ids=["newer", "no-run-id", "bad-version"],
)
def test_what_cannot_be_read_is_one_line_naming_it(cli, old_run, change, needle):
    run = old_run(1)
    edit_run_json(run, change)
    code, out, err = cli("analyze", str(run))
    assert code != 0 and out == ""
    assert needle in " ".join(err.split())
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_the_folder_reader_gives_the_same_meta_as_the_function():
    folder = RunFolder.open(PAST[1])
    assert folder.meta.run_id == "r-schema1" and folder.meta.read_notes[0].startswith("run.json schema 1")
