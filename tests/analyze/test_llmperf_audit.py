"""llmperf both ways, at the edges, with every field written out here: ingest's records from hand-made rows of
the published sample's layout (test case / base|sd), the boundaries of what a real response can be, status
codes, levels and times; and the written files of a simulated run (figures divided by its time scale)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spectrn.analyze.llmperf import ingest, write_llmperf_files
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Provenance


def _row(ttft: float, e2e: float, itl: float, n_out: float, n_in: Any = 64, code: Any = None) -> dict[str, Any]:
    return {"error_code": code, "error_msg": "", "inter_token_latency_s": itl, "ttft_s": ttft,
            "end_to_end_latency_s": e2e, "request_output_throughput_token_per_s": 0.0,
            "number_total_tokens": 0, "number_output_tokens": n_out, "number_input_tokens": n_in}  # fmt: skip


def _write(folder: Path, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True)
    (folder / "Qwen-Qwen3-32B_64_600_individual_responses.json").write_text(json.dumps(rows))


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """One test case ("chat"), base and sd, each with rows at the edges of a real response."""
    src = tmp_path / "llmperf-out"
    _write(src / "chat" / "base", [
        _row(0.5, 0.5, 0.5, 1, n_in=0),  # one token: the first is the last (TTFT = e2e); no input count
        _row(0.1, 2.0, 0.02, 100, n_in=64),
    ])  # fmt: skip
    _write(src / "chat" / "sd", [
        _row(0.1, 0.0, 0.0, 5),  # ends at 0 s: impossible
        _row(0.1, 1.0, 0.01, 0),  # no output token: impossible
        {**_row(0, 0, 0, 0), "error_code": 599, "error_msg": "upstream gone"},
        {**_row(0, 0, 0, 0), "error_code": "timeout", "error_msg": "read timeout"},
        _row(0.0, 0.0, 0.0, 5),  # starts and ends at 0 s: no response takes no time
    ])  # fmt: skip
    return src


def test_ingested_records_from_the_test_case_layout(results: Path, tmp_path: Path) -> None:
    meta = RunMeta(run_id="x", spectrn_version="9", started_at=1000.0, levels=["c2", "c8"])
    folder = ingest(results, tmp_path / "run", run_id="llm-1", meta=meta)
    ident = {"prompt_class": "chat", "level": "c2", "sent_at": 1000.0}  # the first level; every row at the start
    got = [{k: v for k, v in r.items() if k not in ("error_msg",)} for r in _records(folder.path)]
    base = {
        "variant": "baseline",
        **ident,
        "status": 200,
        "token_source": "text",
        "warmup": False,
        "shard": 0,
        "chunk_times": [],
        "chunk_tokens": [],
    }  # llmperf has no per-event times
    spec = {"variant": "speculative", **ident}
    assert got[:2] == [
        {**base, "index": 0, "prompt_id": "chat-0", "ttft": 0.5, "e2e": 0.5, "completion_tokens": 1,
         "llmperf_itl": 0.5},
        {**base, "index": 1, "prompt_id": "chat-1", "ttft": 0.1, "e2e": 2.0, "completion_tokens": 100,
         "prompt_tokens": 64, "llmperf_itl": 0.02},
    ]  # fmt: skip
    trimmed = [{k: r.get(k) for k in ("variant", "index", "prompt_id", "status", "error")} for r in got[2:]]
    assert trimmed == [
        {"variant": "speculative", "index": 0, "prompt_id": "chat-0", "status": 200, "error": "bad_response"},
        {"variant": "speculative", "index": 1, "prompt_id": "chat-1", "status": 200, "error": "bad_response"},
        {"variant": "speculative", "index": 2, "prompt_id": "chat-2", "status": 599, "error": "http_599"},
        {"variant": "speculative", "index": 3, "prompt_id": "chat-3", "status": None, "error": "http_timeout"},
        {"variant": "speculative", "index": 4, "prompt_id": "chat-4", "status": 200, "error": "bad_response"},
    ]
    assert all({k: r[k] for k in spec} == spec for r in got[2:])
    msgs = [r["error_msg"] for r in _records(folder.path)[2:]]
    assert "end_to_end_latency_s 0.0" in msgs[0] and "number_output_tokens 0.0 is not a count in 1..10000000" in msgs[1]
    assert msgs[2:4] == ["upstream gone", "read timeout"]
    assert "(ttft_s 0.0, end_to_end_latency_s 0.0, inter_token_latency_s 0.0)" in msgs[4]
    out = folder.meta
    assert (out.run_id, out.engine, out.levels, out.started_at, out.finished_at) == ("llm-1", "llmperf", ["c2"],
                                                                                     1000.0, 1000.0)  # fmt: skip


def test_an_ingest_without_a_meta_is_one_level_of_the_default_concurrency(results: Path, tmp_path: Path) -> None:
    folder = ingest(results, tmp_path / "run2")
    out = folder.meta
    assert out.run_id == "llmperf-out" and out.levels == ["c4"]  # the default bench.concurrency: [4]
    assert out.finished_at == out.started_at and out.provenance.runtime == "llmperf"
    assert {r["level"] for r in _records(folder.path)} == {"c4"}


def test_the_written_files_of_a_simulated_run_are_in_real_time(tmp_path: Path) -> None:
    """A run simulated at time scale 10: every duration and rate is divided (multiplied) back to real time."""
    run = tmp_path / "sim"
    run.mkdir()
    meta = RunMeta(run_id="sim", spectrn_version="0", started_at=1000.0, model="m", max_tokens=4,
                   provenance=Provenance(time_scale=10.0))  # fmt: skip
    (run / "run.json").write_text(meta.model_dump_json())
    recs = [
        RequestRecord(
            variant="baseline",
            index=i,
            prompt_id=f"p{i}",
            prompt_class="s",
            sent_at=1000.0 + 10 * i,
            ttft=1.0,
            e2e=4.0,
            chunk_times=[1.0, 2.0, 3.0, 4.0],
            chunk_tokens=[1, 1, 1, 1],
            completion_tokens=4,
            prompt_tokens=7 + i,
            status=200,
        )  # fmt: skip
        for i in range(2)
    ]
    (run / "requests.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    paths = write_llmperf_files(RunFolder.open(run))
    # the mean input, (7 + 8) / 2 = 7.5, truncated as llmperf's int() does; then max_tokens
    assert [p.name for p in paths] == ["m_7_4_summary.json", "m_7_4_individual_responses.json"]
    rows = json.loads(paths[1].read_text())
    # real time: TTFT 1.0 / 10, e2e 4.0 / 10, llmperf ITL = last event / events = 0.4 / 4, throughput 4 / 0.4
    assert rows[0] == {
        "error_code": None, "error_msg": "", "inter_token_latency_s": pytest.approx(0.1),
        "ttft_s": pytest.approx(0.1), "end_to_end_latency_s": pytest.approx(0.4),
        "request_output_throughput_token_per_s": pytest.approx(10.0), "number_total_tokens": 11,
        "number_output_tokens": 4, "number_input_tokens": 7,
    }  # fmt: skip
    summary = json.loads(paths[0].read_text())
    # wall: first send 1000 to last end 1010 + 4 = 14 simulated s = 1.4 real s; 8 tokens, 2 requests
    assert summary["results_mean_output_throughput_token_per_s"] == pytest.approx(8 / 1.4)
    assert summary["results_num_completed_requests_per_min"] == pytest.approx(2 / 1.4 * 60)
    assert summary["results_ttft_s_mean"] == pytest.approx(0.1)
    assert summary["results_ttft_s_stddev"] == 0.0  # two equal values
    assert summary["results_error_code_frequency"] == "{}" and summary["results_error_rate"] == 0.0


def test_a_single_request_has_a_zero_stddev_and_every_quantile_equal(tmp_path: Path) -> None:
    run = tmp_path / "one"
    run.mkdir()
    (run / "run.json").write_text(RunMeta(run_id="one", spectrn_version="0", started_at=0, model="m").model_dump_json())
    rec = RequestRecord(variant="speculative", index=0, prompt_id="p", prompt_class="s", sent_at=5.0, ttft=0.2, e2e=1.0,
                        chunk_times=[0.2, 1.0], chunk_tokens=[1, 3], completion_tokens=4, status=200)  # fmt: skip
    fail = [RequestRecord(variant="speculative", index=i, prompt_id="q", prompt_class="s", sent_at=6.0, status=429,
                          error="http_429", error_msg="slow down") for i in (1, 2)]  # fmt: skip
    (run / "requests.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in [rec, *fail]))
    summary_path, rows_path = write_llmperf_files(RunFolder.open(run))
    summary = json.loads(summary_path.read_text())
    assert summary_path.name == "m_0_0_summary.json"  # no input counts: mean 0; no max_tokens: 0
    assert [summary[f"results_ttft_s_quantiles_p{q}"] for q in (25, 50, 75, 90, 95, 99)] == [0.2] * 6
    assert summary["results_ttft_s_stddev"] == 0.0
    assert summary["results_error_code_frequency"] == json.dumps({"429": 2})
    assert (summary["results_number_errors"], summary["results_num_requests_started"]) == (2, 3)
    assert summary["results_error_rate"] == pytest.approx(2 / 3)
    assert summary["results_num_completed_requests_per_min"] == pytest.approx(1 / 1.0 * 60)  # 1 request in 1 s
    rows = json.loads(rows_path.read_text())
    assert rows[1] == {"error_code": 429, "error_msg": "slow down", "inter_token_latency_s": 0, "ttft_s": 0,
                       "end_to_end_latency_s": 0, "request_output_throughput_token_per_s": 0,
                       "number_total_tokens": 0, "number_output_tokens": 0, "number_input_tokens": 0}  # fmt: skip


def test_a_failure_without_an_http_error_is_code_minus_one_with_its_class_as_message(tmp_path: Path) -> None:
    """llmperf writes -1 where there is no HTTP error code; a 200 whose stream broke is such a failure."""
    run = tmp_path / "cut"
    run.mkdir()
    (run / "run.json").write_text(RunMeta(run_id="cut", spectrn_version="0", started_at=0, model="m").model_dump_json())
    cut = RequestRecord(variant="baseline", index=0, prompt_id="p", prompt_class="s", sent_at=1.0, status=200,
                        error="stream_cut", prompt_tokens=12)  # fmt: skip
    (run / "requests.jsonl").write_text(cut.model_dump_json() + "\n")
    _, rows_path = write_llmperf_files(RunFolder.open(run))
    assert json.loads(rows_path.read_text()) == [
        {"error_code": -1, "error_msg": "stream_cut", "inter_token_latency_s": 0, "ttft_s": 0,
         "end_to_end_latency_s": 0, "request_output_throughput_token_per_s": 0, "number_total_tokens": 12,
         "number_output_tokens": 0, "number_input_tokens": 12}
    ]  # fmt: skip
