"""llmperf both ways, where the other llmperf tests left a change unseen: the whole written summary of a small run
(every key and value written out here from llmperf's own definitions: ``token_benchmark_ray.metrics_summary``,
``LLMPerfResults.to_dict``), a variant with no completed request, time scales at and below zero, the file names of
odd model names; and on ingest the bounds of a real response, the status codes kept, and every message and hint
a user reads when a folder or a file is not what llmperf writes. Each test builds its own input."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from spectrn import __version__
from spectrn.analyze.llmperf import ingest, write_llmperf_files
from spectrn.errors import AnalysisError, ConfigError
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Provenance

NOTE = "inter_token_latency uses llmperf's definition (divides by SSE events); see summary.json itl_s"
INGEST_NOTE = (
    "ingested from llmperf results in llmperf-out: no per-event times (per-token ITL unavailable), "
    "llmperf's own token counts, speedups unpaired"
)
RESULTS_HINT = "point at llmperf's --results-dir"
DAMAGED_HINT = "the llmperf file is damaged or from another tool"


# ---- write -----------------------------------------------------------------------------------------------


def _run(tmp_path: Path, recs: list[RequestRecord], **meta: Any) -> RunFolder:
    run = tmp_path / "run"
    run.mkdir()
    fields: dict[str, Any] = {"run_id": "run", "spectrn_version": "0", "started_at": 100.0, **meta}
    (run / "run.json").write_text(RunMeta(**fields).model_dump_json())
    (run / "requests.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    return RunFolder.open(run)


def _ok(variant: str, i: int, sent: float, times: list[float], toks: list[int], n_in: int | None = None,
        e2e: float | None = None) -> RequestRecord:  # fmt: skip
    return RequestRecord(variant=variant, index=i, prompt_id=f"p{i}", prompt_class="s", sent_at=sent, ttft=times[0],
                         e2e=times[-1] if e2e is None else e2e, chunk_times=times, chunk_tokens=toks,
                         completion_tokens=sum(toks), prompt_tokens=n_in, status=200)  # fmt: skip


def _failed(variant: str, i: int, status: int, n_in: int) -> RequestRecord:
    return RequestRecord(variant=variant, index=i, prompt_id=f"p{i}", prompt_class="s", sent_at=102.0, status=status,
                         error=f"http_{status}", error_msg="busy", prompt_tokens=n_in)  # fmt: skip


def _stats(prefix: str, a: float, b: float) -> dict[str, float]:
    """llmperf's per-column figures over two values a <= b: pandas' linear quantiles, mean, min, max, sample sd."""
    out = {f"{prefix}_quantiles_p{q}": a + (b - a) * q / 100 for q in (25, 50, 75, 90, 95, 99)}
    return out | {f"{prefix}_mean": (a + b) / 2, f"{prefix}_min": a, f"{prefix}_max": b,
                  f"{prefix}_stddev": (b - a) / math.sqrt(2)}  # fmt: skip


def test_the_whole_summary_of_two_completed_requests_and_one_error(tmp_path: Path) -> None:
    folder = _run(tmp_path, [
        _ok("baseline", 0, 100.0, [0.5, 1.0, 2.0], [1, 1, 2], n_in=10),  # ends at 102
        _ok("baseline", 1, 101.0, [1.0, 3.0], [1, 1], n_in=20),  # ends at 104
        _failed("baseline", 2, 503, 30),
    ], model="org/m", max_tokens=8)  # fmt: skip
    paths = write_llmperf_files(folder)
    # mean input over every started request: (10 + 20 + 30) / 3 = 20; then max_tokens 8
    assert [p.name for p in paths] == ["org-m_20_8_summary.json", "org-m_20_8_individual_responses.json"]
    expected: dict[str, Any] = {
        "version": "spectrn-llmperf-compatible",
        "name": "org-m_20_8_summary",  # llmperf names a summary after its file
        "model": "org/m",
        "mean_input_tokens": 20,
        "mean_output_tokens": 8,
        "num_concurrent_requests": None,
        "note": NOTE,
        # per request: ITL = last event / events (2.0 / 3, 3.0 / 2), throughput = tokens / e2e (4 / 2, 2 / 3)
        **_stats("results_inter_token_latency_s", 2.0 / 3, 1.5),
        **_stats("results_ttft_s", 0.5, 1.0),
        **_stats("results_end_to_end_latency_s", 2.0, 3.0),
        **_stats("results_request_output_throughput_token_per_s", 2.0 / 3, 2.0),
        **_stats("results_number_input_tokens", 10.0, 20.0),
        **_stats("results_number_output_tokens", 2.0, 4.0),
        "results_num_requests_started": 3,
        "results_error_rate": 1 / 3,
        "results_number_errors": 1,
        "results_error_code_frequency": '{"503": 1}',
        # from the first send (100) to the last end (104): 4 s, 6 tokens, 2 requests
        "results_mean_output_throughput_token_per_s": 1.5,
        "results_num_completed_requests": 2,
        "results_num_completed_requests_per_min": 30.0,
    }
    summary = json.loads(paths[0].read_text())
    assert summary.keys() == expected.keys()
    assert summary == {k: pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for k, v in expected.items()}


def test_a_variant_with_no_completed_request_has_zero_rates_and_no_columns(tmp_path: Path) -> None:
    folder = _run(tmp_path, [_failed("speculative", 0, 500, 7), _failed("speculative", 1, 500, 8)], model="m")
    summary_path, rows_path = write_llmperf_files(folder)
    assert summary_path.name == "m_7_0_summary.json"  # int(15 / 2)
    assert json.loads(summary_path.read_text()) == {
        "version": "spectrn-llmperf-compatible", "name": "m_7_0_summary", "model": "m", "mean_input_tokens": 7,
        "mean_output_tokens": 0, "num_concurrent_requests": None, "note": NOTE,
        "results_num_requests_started": 2, "results_error_rate": 1.0, "results_number_errors": 2,
        "results_error_code_frequency": '{"500": 2}', "results_mean_output_throughput_token_per_s": 0.0,
        "results_num_completed_requests": 0, "results_num_completed_requests_per_min": 0.0,
    }  # fmt: skip
    assert [r["error_code"] for r in json.loads(rows_path.read_text())] == [500, 500]
    # 0 tokens over the -inf span of no completed request would be -0.0: the rates are written as 0.0
    assert '"results_mean_output_throughput_token_per_s": 0.0,' in summary_path.read_text()
    assert '"results_num_completed_requests_per_min": 0.0' in summary_path.read_text()


def test_a_run_whose_requests_took_no_time_has_zero_rates_not_a_division_by_zero(tmp_path: Path) -> None:
    folder = _run(tmp_path, [_ok("baseline", 0, 100.0, [0.0, 0.0], [1, 2])], model="m")
    summary = json.loads(write_llmperf_files(folder)[0].read_text())
    rates = ("results_mean_output_throughput_token_per_s", "results_num_completed_requests_per_min")
    assert [summary[k] for k in rates] == [0.0, 0.0]


def test_a_run_shorter_than_a_second_has_its_rates_per_real_second(tmp_path: Path) -> None:
    folder = _run(tmp_path, [_ok("baseline", 0, 100.0, [0.1, 0.5], [1, 2])], model="m")
    summary = json.loads(write_llmperf_files(folder)[0].read_text())
    # 3 tokens and 1 request in 0.5 s
    rates = ("results_mean_output_throughput_token_per_s", "results_num_completed_requests_per_min")
    assert [summary[k] for k in rates] == [6.0, 120.0]


@pytest.mark.parametrize(
    ("time_scale", "real"),
    [(0.5, 2.0), (0.0, 1.0), (-1.0, 1.0)],  # 0.5: simulated seconds are half real ones; 0 or below: not scaled
)
def test_the_time_scale_divides_every_figure_and_one_not_above_zero_is_ignored(
    tmp_path: Path, time_scale: float, real: float
) -> None:
    folder = _run(tmp_path, [_ok("baseline", 0, 100.0, [0.2, 1.0], [1, 1])], model="m",
                  provenance=Provenance(time_scale=time_scale))  # fmt: skip
    summary_path, rows_path = write_llmperf_files(folder)
    assert json.loads(rows_path.read_text()) == [
        {"error_code": None, "error_msg": "", "inter_token_latency_s": 0.5 * real, "ttft_s": 0.2 * real,
         "end_to_end_latency_s": 1.0 * real, "request_output_throughput_token_per_s": 2 / real,
         "number_total_tokens": 2, "number_output_tokens": 2, "number_input_tokens": 0}
    ]  # fmt: skip
    summary = json.loads(summary_path.read_text())
    assert summary["results_num_completed_requests_per_min"] == pytest.approx(60 / real)
    assert summary["results_mean_output_throughput_token_per_s"] == pytest.approx(2 / real)


def test_a_completed_response_without_tokens_is_a_failure_without_a_message(tmp_path: Path) -> None:
    empty = RequestRecord(variant="baseline", index=0, prompt_id="p", prompt_class="s", sent_at=100.0, ttft=0.1,
                          e2e=0.2, completion_tokens=0, prompt_tokens=5, status=200)  # fmt: skip
    _, rows_path = write_llmperf_files(_run(tmp_path, [empty], model="m"))
    assert json.loads(rows_path.read_text()) == [
        {"error_code": -1, "error_msg": "", "inter_token_latency_s": 0, "ttft_s": 0, "end_to_end_latency_s": 0,
         "request_output_throughput_token_per_s": 0, "number_total_tokens": 5, "number_output_tokens": 0,
         "number_input_tokens": 5}
    ]  # fmt: skip


def test_a_response_whose_only_event_is_at_the_send_has_a_zero_llmperf_itl(tmp_path: Path) -> None:
    rec = _ok("baseline", 0, 100.0, [0.0], [1], e2e=0.5)  # llmperf's ITL: last event 0.0 s / 1 event
    _, rows_path = write_llmperf_files(_run(tmp_path, [rec], model="m"))
    row = json.loads(rows_path.read_text())[0]
    assert (row["inter_token_latency_s"], row["ttft_s"], row["end_to_end_latency_s"]) == (0, 0.0, 0.5)


@pytest.mark.parametrize(
    ("model", "stem"),
    [
        (None, "model"),  # no model named
        ("///", "model"),  # nothing left of the name
        ("/m/", "m"),  # separators at the ends dropped
        ("Xeon/X", "Xeon-X"),  # letters at the ends kept
        (" m ", "m"),
        # llmperf's rule (token_benchmark_ray.py): any run of characters other than \w and "-" is one "-", then
        # runs of "-" collapse to one
        ("Qwen/Qwen3-1.7B", "Qwen-Qwen3-1-7B"),
        ("a.-b", "a-b"),
        ("a_b", "a_b"),
    ],
)
def test_the_file_names_of_odd_model_names(tmp_path: Path, model: str | None, stem: str) -> None:
    folder = _run(tmp_path, [_ok("baseline", 0, 100.0, [0.1, 0.2], [1, 1])], model=model)
    summary_path, rows_path = write_llmperf_files(folder)
    assert (summary_path.name, rows_path.name) == (f"{stem}_0_0_summary.json", f"{stem}_0_0_individual_responses.json")
    assert json.loads(summary_path.read_text())["model"] == model


def test_a_long_model_name_is_cut_to_200_bytes_with_a_digest(tmp_path: Path) -> None:
    model = "a" * 250
    folder = _run(tmp_path, [_ok("baseline", 0, 100.0, [0.1, 0.2], [1, 1])], model=model)
    digest = hashlib.sha256(model.encode()).hexdigest()[:12]
    stem = "a" * (200 - 13) + "-" + digest  # 200 bytes: 187 letters, a dash, 12 hex digits
    summary_path, _ = write_llmperf_files(folder)
    assert summary_path.name == f"{stem}_0_0_summary.json"


def test_a_write_stopped_by_an_error_reports_that_error_even_if_its_temporary_file_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two variants that differ only in case share one folder, and so one temporary file, on a case-insensitive
    file system: the first clean-up removes it, and the second must not hide the error with its own."""
    folder = _run(tmp_path, [], model="m")
    tmp = folder.path / "baseline" / ".individual_responses.json.tmp"

    def records() -> Any:
        yield _ok("baseline", 0, 100.0, [0.1, 0.2], [1, 1])
        tmp.unlink()
        raise OSError("requests.jsonl: read error")

    monkeypatch.setattr(folder, "records", records)
    with pytest.raises(OSError, match=r"\Arequests\.jsonl: read error\Z"):
        write_llmperf_files(folder)
    assert list((folder.path / "baseline").iterdir()) == []


# ---- ingest ----------------------------------------------------------------------------------------------


def _row(ttft: Any = 0.1, e2e: Any = 1.0, itl: Any = 0.01, n_out: Any = 10, n_in: Any = 64) -> dict[str, Any]:
    return {"error_code": None, "error_msg": "", "inter_token_latency_s": itl, "ttft_s": ttft,
            "end_to_end_latency_s": e2e, "request_output_throughput_token_per_s": 0.0, "number_total_tokens": 0,
            "number_output_tokens": n_out, "number_input_tokens": n_in}  # fmt: skip


def _results(tmp_path: Path, rows: list[Any], variant: str = "sd") -> Path:
    """``llmperf-out/<variant>/`` with one responses file of ``rows``; returns that file."""
    folder = tmp_path / "llmperf-out" / variant
    folder.mkdir(parents=True)
    f = folder / "m_64_10_individual_responses.json"
    f.write_text(json.dumps(rows))
    return f


def _ingested(tmp_path: Path, rows: list[Any]) -> list[RequestRecord]:
    _results(tmp_path, rows)
    return list(ingest(tmp_path / "llmperf-out", tmp_path / "run").records())


@pytest.mark.parametrize(
    "row",
    [
        _row(ttft=0.0),  # the first token at the send
        _row(itl=0.0),  # llmperf writes 0 when it has no gap to average
        _row(n_out=10_000_000),  # the largest count
        _row(n_in=10_000_000),
        _row(n_in=0),
        _row(n_in=None),  # no input count
    ],
)
def test_a_response_at_the_bounds_of_a_real_one_is_kept(tmp_path: Path, row: dict[str, Any]) -> None:
    (rec,) = _ingested(tmp_path, [row])
    assert (rec.error, rec.status, rec.ttft, rec.e2e, rec.llmperf_itl, rec.completion_tokens) == (
        None, 200, row["ttft_s"], row["end_to_end_latency_s"], row["inter_token_latency_s"], row["number_output_tokens"]
    )  # fmt: skip
    assert rec.prompt_tokens == (row["number_input_tokens"] or None)  # 0 or none: llmperf counted no input


def test_an_input_count_of_one_is_kept(tmp_path: Path) -> None:
    (rec,) = _ingested(tmp_path, [_row(n_in=1)])
    assert rec.prompt_tokens == 1


@pytest.mark.parametrize(
    ("n_in", "shown"),
    [
        (-1, "-1"),
        (2.5, "2.5"),
        (10_000_001, "10000001"),
        (True, "True"),
        ("12", "'12'"),
        (float("inf"), "inf"),
        ("x" * 100, "'" + "x" * 56 + "..."),  # shown in at most 60 characters
    ],
)
def test_an_input_count_that_is_not_a_count_makes_a_bad_response(tmp_path: Path, n_in: Any, shown: str) -> None:
    f = _results(tmp_path, [_row(n_in=n_in)])
    (rec,) = ingest(tmp_path / "llmperf-out", tmp_path / "run").records()
    assert (rec.status, rec.error, rec.prompt_tokens) == (200, "bad_response", None)
    assert rec.error_msg == f"{f} response 0: number_input_tokens {shown} is not a count in 0..10000000"


def test_a_bad_response_names_its_file_and_index(tmp_path: Path) -> None:
    f = _results(tmp_path, [_row(), _row(ttft=-0.1)])
    recs = list(ingest(tmp_path / "llmperf-out", tmp_path / "run").records())
    assert recs[1].error_msg == (
        f"{f} response 1: a negative time (ttft_s -0.1, end_to_end_latency_s 1.0, inter_token_latency_s 0.01)"
    )


@pytest.mark.parametrize(("code", "status"), [(100, 100), (599, 599), (600, None), (99, None)])
def test_only_an_http_status_is_kept_as_the_status(tmp_path: Path, code: int, status: int | None) -> None:
    (rec,) = _ingested(tmp_path, [{**_row(), "error_code": code, "error_msg": "no"}])
    assert (rec.status, rec.error, rec.error_msg) == (status, f"http_{code}", "no")


def test_a_failure_without_a_message_has_an_empty_one(tmp_path: Path) -> None:
    rows = [{"error_code": 500}, {"error_code": 500, "error_msg": None}]
    assert [r.error_msg for r in _ingested(tmp_path, rows)] == ["", ""]


def test_a_failure_keeps_300_characters_of_its_message_and_40_of_its_code(tmp_path: Path) -> None:
    (rec,) = _ingested(tmp_path, [{"error_code": "e" * 50, "error_msg": "m" * 400}])
    assert (rec.status, rec.error, rec.error_msg) == (None, "http_" + "e" * 37 + "...", "m" * 300)


@pytest.mark.parametrize("key", ["ttft_s", "end_to_end_latency_s", "inter_token_latency_s", "number_output_tokens"])
def test_a_field_that_is_not_a_number_names_the_file_the_response_and_the_field(tmp_path: Path, key: str) -> None:
    f = _results(tmp_path, [_row(), {**_row(), key: "fast"}])
    with pytest.raises(AnalysisError) as e:
        ingest(tmp_path / "llmperf-out", tmp_path / "run")
    assert (e.value.args[0], e.value.hint) == (f"{f} response 1: field {key!r} is 'fast', not a number", DAMAGED_HINT)


def test_a_responses_file_that_is_not_a_list(tmp_path: Path) -> None:
    f = _results(tmp_path, {"responses": []})  # type: ignore[arg-type]
    with pytest.raises(AnalysisError) as e:
        ingest(tmp_path / "llmperf-out", tmp_path / "run")
    assert (e.value.args[0], e.value.hint) == (f"{f}: expected a list of responses", RESULTS_HINT)


def test_a_responses_file_that_is_not_json(tmp_path: Path) -> None:
    f = _results(tmp_path, [])
    f.write_text("[{")
    with pytest.raises(AnalysisError) as e:
        ingest(tmp_path / "llmperf-out", tmp_path / "run")
    assert re.fullmatch(re.escape(f"{f}: not a readable llmperf result file: ") + r"Expecting .+", e.value.args[0])
    assert e.value.hint is None


def test_a_responses_file_with_a_key_twice(tmp_path: Path) -> None:
    f = _results(tmp_path, [])
    f.write_text('[{"ttft_s": 1, "ttft_s": 2}]')
    with pytest.raises(AnalysisError) as e:
        ingest(tmp_path / "llmperf-out", tmp_path / "run")
    assert e.value.args[0] == (
        f"{f} holds the key 'ttft_s' twice in one object, so which value counts is undefined (RFC 8259 section 4)"
    )


def test_results_that_are_not_a_folder(tmp_path: Path) -> None:
    f = tmp_path / "results.json"
    f.write_text("[]")
    with pytest.raises(AnalysisError) as e:
        ingest(f, tmp_path / "run")
    assert (e.value.args[0], e.value.hint) == (
        f"{f} is not a folder",
        "pass the folder holding one sub-folder per variant",
    )


def test_a_folder_without_llmperf_results(tmp_path: Path) -> None:
    (tmp_path / "src" / "base").mkdir(parents=True)
    with pytest.raises(AnalysisError) as e:
        ingest(tmp_path / "src", tmp_path / "run")
    assert (e.value.args[0], e.value.hint) == (
        f"{tmp_path / 'src'} holds no llmperf result folders",
        "pass the folder with one sub-folder per variant (or per test case), each holding llmperf's files",
    )


def test_a_variant_folder_of_another_name_is_a_variant_of_that_name(tmp_path: Path) -> None:
    _results(tmp_path, [_row()], variant="draft7")
    assert [r.variant for r in ingest(tmp_path / "llmperf-out", tmp_path / "run").records()] == ["draft7"]


def test_a_test_case_whose_name_is_not_safe(tmp_path: Path) -> None:
    results = tmp_path / "llmperf-out"
    folder = results / "chat room" / "sd"
    folder.mkdir(parents=True)
    (folder / "m_64_10_individual_responses.json").write_text(json.dumps([_row()]))
    with pytest.raises(ConfigError) as e:
        ingest(results, tmp_path / "run")
    assert e.value.args[0] == (
        f"llmperf test case 'chat room' (from {results}) is not a safe name: it becomes a file name and a label"
    )


def test_a_variant_folder_whose_name_is_not_safe(tmp_path: Path) -> None:
    _results(tmp_path, [_row()], variant="my variant")
    folder = tmp_path / "llmperf-out" / "my variant"
    with pytest.raises(ConfigError) as e:
        ingest(tmp_path / "llmperf-out", tmp_path / "run")
    assert e.value.args[0] == (
        f"llmperf variant folder 'my variant' (from {folder}) is not a safe name: it becomes a file name and a label"
    )


def test_an_ingest_without_a_meta_records_this_version_and_llmperf_as_runtime(tmp_path: Path) -> None:
    _results(tmp_path, [_row()])
    out = ingest(tmp_path / "llmperf-out", tmp_path / "run").meta
    assert (out.spectrn_version, out.engine, out.notes) == (__version__, "llmperf", [INGEST_NOTE])
    assert out.provenance == Provenance(runtime="llmperf", engine="llmperf")


def test_an_ingest_with_a_meta_keeps_its_version_notes_and_provenance(tmp_path: Path) -> None:
    _results(tmp_path, [_row()])
    meta = RunMeta(run_id="x", spectrn_version="9.9", started_at=5.0, notes=["from the pod"],
                   provenance=Provenance(runtime="cluster", profile="trn2", time_scale=2.0))  # fmt: skip
    out = ingest(tmp_path / "llmperf-out", tmp_path / "run", meta=meta).meta
    assert (out.spectrn_version, out.notes) == ("9.9", ["from the pod", INGEST_NOTE])
    assert out.provenance == Provenance(runtime="cluster", profile="trn2", time_scale=2.0, engine="llmperf")


def test_an_ingest_with_a_meta_without_a_version_records_this_one(tmp_path: Path) -> None:
    _results(tmp_path, [_row()])
    meta = RunMeta(run_id="x", spectrn_version="", started_at=5.0)
    assert ingest(tmp_path / "llmperf-out", tmp_path / "run", meta=meta).meta.spectrn_version == __version__
