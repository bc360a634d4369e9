"""The run folder's readers and writers, each written out here: which records a reader sees, acceptance.json in
both layouts, the per-variant acceptance, summary versions, file names and modes, the paths ``copy_in`` and
``write_scrape`` take or refuse, and dimension values."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from spectrn.errors import AnalysisError
from spectrn.run.folder import RunFolder, dim_value
from spectrn.run.publish_ledger import PublishLedger
from spectrn.run.records import RequestRecord, RunMeta


def _rec(index: int, *, warmup: bool = False, ok: bool = True) -> RequestRecord:
    if not ok:
        return RequestRecord(variant="baseline", index=index, prompt_id=f"p{index}", prompt_class="s", sent_at=1.0,
                             status=500, error="http_500")  # fmt: skip
    return RequestRecord(variant="baseline", index=index, prompt_id=f"p{index}", prompt_class="s", sent_at=1.0,
                         ttft=0.1, e2e=0.2, chunk_times=[0.1, 0.2], chunk_tokens=[1, 1], warmup=warmup,
                         status=200)  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path) -> RunFolder:
    f = RunFolder(tmp_path / "r")
    f.write_meta(RunMeta(run_id="r", spectrn_version="0", started_at=0.0))
    return RunFolder.open(f.path)


def test_readers_see_measured_records_unless_asked_for_all(folder: RunFolder) -> None:
    folder.write_records([_rec(-1, warmup=True), _rec(0), _rec(1, ok=False)])
    assert [r.index for r in folder.records()] == [0, 1]
    assert [r.index for r in folder.records(measured=False)] == [-1, 0, 1]  # file order, the warm-up first
    # requests.jsonl keeps no null fields: a failed request has no ttft key at all
    lines = [json.loads(x) for x in (folder.path / "requests.jsonl").read_text().splitlines()]
    assert "ttft" not in lines[2] and None not in lines[2].values()


def test_acceptance_json_in_either_layout(folder: RunFolder) -> None:
    deltas = {"speculative@c4": {"drafts": 10}, "baseline@c4": None}
    folder.write_acceptance(deltas)
    assert folder.acceptance() == deltas
    (folder.path / "acceptance.json").write_text(json.dumps({"variants": deltas, "note": "x"}))
    assert folder.acceptance() == deltas  # the wrapped layout is unwrapped
    (folder.path / "acceptance.json").write_text(json.dumps({"speculative@c4": 3}))
    with pytest.raises(AnalysisError, match="is not an object of counter deltas"):
        folder.acceptance()


def test_acceptance_for_reads_the_named_variant(tmp_path: Path) -> None:
    from doubles.runfactory import make_run

    run = RunFolder.open(make_run(tmp_path, per_class=2))
    spec = run.acceptance_for("speculative", "c4")
    assert spec is not None and spec.rate == pytest.approx(0.62)
    assert run.acceptance_for("baseline", "c4") is None
    assert run.acceptance_for("speculative", "c99") is None


def test_a_summary_of_another_schema_version_is_refused(folder: RunFolder) -> None:
    (folder.path / "summary.json").write_text(json.dumps({"schema_version": 1, "run_id": "r"}))
    with pytest.raises(AnalysisError, match="is not a summary of schema version"):
        folder.summary()


def test_file_names_and_a_shared_reports_modes(folder: RunFolder, tmp_path: Path) -> None:
    assert folder.write_emf(iter(["{}", "{}"])) == folder.path / "metrics.emf.jsonl"
    assert (folder.path / "metrics.emf.jsonl").read_text() == "{}\n{}\n"
    assert folder.write_publish_ledger(PublishLedger()) == folder.path / "publish.json"
    out = tmp_path / "report"
    out.mkdir()
    assert folder.write_report(out, "# md", "<html>") == out / "index.html"
    for name in ("index.html", "summary.md"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644  # readable by everyone: a report is shared


def test_copy_in_keeps_inside_the_folder(folder: RunFolder) -> None:
    path = folder.copy_in("sub/./x.json", io.BytesIO(b"{}"))
    assert path == folder.path / "sub" / "x.json" and path.read_bytes() == b"{}"
    for bad in ("../escape.json", "sub/../../escape.json", "/etc/passwd"):
        with pytest.raises(ValueError, match="is not a path inside the run folder"):
            folder.copy_in(bad, io.BytesIO(b"x"))
    assert not (folder.path.parent / "escape.json").exists()


def test_scrape_names_are_one_file_in_metrics(folder: RunFolder) -> None:
    assert folder.write_scrape("speculative.c4.before.prom", "x 1\n") == folder.path / "metrics" / (
        "speculative.c4.before.prom"
    )
    for bad in ("a/b.before.prom", ".hidden.after.prom", "speculative.c4.prom"):
        with pytest.raises(ValueError, match="is not a scrape file name"):
            folder.write_scrape(bad, "")


@pytest.mark.parametrize(
    ("label", "value"),
    [("  c4 ", "c4"), ("", "unknown"), (None, "unknown"), ("k7", "k7")],
    ids=["padded", "empty", "none", "plain"],
)
def test_dimension_values_are_trimmed_and_never_empty(label: str | None, value: str) -> None:
    assert dim_value(label) == value
