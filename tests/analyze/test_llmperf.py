"""llmperf both ways: ingesting golden result folders (the sample's --engine llmperf pod layout) into a run folder
that the ordinary finish analyzes, reports and publishes; and writing llmperf-compatible files from records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contract import assert_valid_run_folder
from spectrn.analyze.llmperf import ingest
from spectrn.cli.main import main
from spectrn.errors import AnalysisError
from spectrn.finish import finish

FIXTURES = Path(__file__).resolve().parents[1] / "loadgen" / "fixtures"


def test_ingest_golden_llmperf_folders_into_a_run_folder(tmp_path: Path) -> None:
    folder = ingest(FIXTURES / "llmperf", tmp_path / "llm", run_id="llm")
    assert folder.meta.engine == "llmperf" and folder.meta.provenance.runtime == "llmperf"
    done = finish(folder.path, report=True)
    assert_valid_run_folder(folder.path)  # an ingested llmperf run's files follow the published schemas
    s = done.summary
    lv = s.levels[0]
    assert set(lv.variants) == {"baseline", "speculative"}
    b, sd = lv.variants["baseline"], lv.variants["speculative"]
    assert b.requests.completed == 4 and sd.requests.completed == 3
    assert sd.requests.errors == 1 and sd.requests.error_classes == {"http_500": 1}
    # TPOT = (e2e - ttft) / (n - 1): the fixture was built with exact per-token times (45 ms and 15 ms)
    assert b.tpot_s.p50 == pytest.approx(0.045)
    assert sd.tpot_s.p50 == pytest.approx(0.015)
    assert lv.speedup is not None and lv.speedup.tpot_p50 is not None
    assert lv.speedup.tpot_p50.value == pytest.approx(3.0)
    assert lv.speedup.paired is False  # llmperf's responses name no prompt: no pairing by request
    assert b.itl_s.n == 0  # llmperf has no per-event times
    # llmperf's own ITL (e2e / events) is kept, labelled
    assert sd.llmperf_itl_s.p50 == pytest.approx((0.050 + 599 * 0.015) / 200)
    assert done.report_path is not None and done.report_path.exists()
    assert done.llmperf_files == []  # an llmperf run keeps llmperf's own files


def test_ingest_cli_makes_a_run_folder(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "llmperf", tmp_path / "llmperf-out")
    with pytest.raises(SystemExit) as e:
        main(["ingest-llmperf", str(tmp_path / "llmperf-out"), "--out", str(tmp_path / "results" / "llm1")])
    assert e.value.code == 0
    assert json.loads((tmp_path / "results" / "llm1" / "summary.json").read_text())["run_id"] == "llm1"


def test_ingest_rejects_folders_without_results(tmp_path: Path) -> None:
    with pytest.raises(AnalysisError, match="no llmperf result folders"):
        ingest(tmp_path, tmp_path / "out")


@pytest.mark.parametrize(("damage", "said"), [("fast", "'ttft_s' is 'fast', not a number"),
                                              (None, "'ttft_s' is None, not a number")])  # fmt: skip
def test_ingest_rejects_a_damaged_or_missing_field(tmp_path: Path, damage: str | None, said: str) -> None:
    src = tmp_path / "src"
    shutil.copytree(FIXTURES / "llmperf", src)
    f = next((src / "sd").glob("*_individual_responses.json")) if (src / "sd").exists() else None
    f = f or next(src.rglob("*_individual_responses.json"))
    rows = json.loads(f.read_text())
    if damage is None:
        del rows[0]["ttft_s"]  # a row without the field at all
    else:
        rows[0]["ttft_s"] = damage
    rows[0]["error_code"] = None
    f.write_text(json.dumps(rows))
    with pytest.raises(AnalysisError, match=said):
        ingest(src, tmp_path / "out")


def test_written_llmperf_files_follow_llmperf_definitions(tmp_path: Path) -> None:
    from spectrn.run.records import RequestRecord, RunMeta

    run = tmp_path / "r1"
    run.mkdir()
    (run / "run.json").write_text(
        RunMeta(run_id="r1", spectrn_version="0", started_at=0, model="Qwen/Qwen3-32B", max_tokens=10).model_dump_json()
    )
    with (run / "requests.jsonl").open("w") as fh:
        for i in range(5):
            for v in ("baseline", "speculative"):
                r = RequestRecord(
                    variant=v, index=i, prompt_id=f"p{i}", prompt_class="s", sent_at=1000.0, ttft=0.1, e2e=0.5,
                    chunk_times=[0.1, 0.2, 0.25, 0.45], chunk_tokens=[1, 3, 1, 5], completion_tokens=10, status=200,
                )  # fmt: skip
                fh.write(r.model_dump_json() + "\n")
    done = finish(run, report=False)
    names = sorted(p.name for p in (run / "speculative").iterdir())
    assert names == ["Qwen-Qwen3-32B_0_10_individual_responses.json", "Qwen-Qwen3-32B_0_10_summary.json"]
    llm = json.loads((run / "speculative" / names[1]).read_text())
    assert llm["results_num_completed_requests"] == 5
    assert llm["results_inter_token_latency_s_quantiles_p50"] == pytest.approx(0.45 / 4)  # last event / events
    assert llm["results_ttft_s_mean"] == pytest.approx(0.1)
    rows = json.loads((run / "speculative" / names[0]).read_text())
    assert len(rows) == 5 and rows[0]["number_output_tokens"] == 10
    assert len(done.llmperf_files) == 4


def test_an_ingested_llmperf_run_publishes(tmp_path: Path) -> None:
    """The published experiment published its llmperf results to CloudWatch: so does spectrn's llmperf path."""
    from doubles.cwfakes import FakeSink
    from spectrn.publish.publisher import publish_run

    folder = ingest(FIXTURES / "llmperf", tmp_path / "llm", run_id="llm")
    finish(folder.path, report=False)
    sink = FakeSink()
    res = publish_run(folder.path, sink, now=folder.meta.started_at + 60)
    assert res.sent_now == res.batches >= 1
    names = {d["MetricName"] for _, batch in sink.calls for d in batch}
    assert {"TTFT", "TPOT", "E2ELatency", "Errors"} <= names and "ITL" not in names  # llmperf has no event times
