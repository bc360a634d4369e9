"""Every field of the llmperf-compatible files, computed here from llmperf's definitions (not by spectrn):
per request, ``inter_token_latency_s`` = the last event's time / the number of events (llmperf sums its
time-to-next-token list, whose first entry is the TTFT, and divides by the events), throughput = output tokens
/ e2e; per variant, each column's quantiles (linear interpolation, llmperf's pandas default), mean, min, max and
sample standard deviation over the completed requests, and the run-level counts and rates."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from spectrn.finish import finish
from spectrn.run.records import RequestRecord, RunMeta

# (sent_at, ttft, chunk_times, chunk_tokens, prompt_tokens) per completed request; then one failed request
REQUESTS = [
    (1000.0, 0.10, [0.10, 0.20, 0.25, 0.45], [1, 3, 1, 5], 40),
    (1000.5, 0.30, [0.30, 0.50, 0.90], [1, 2, 2], 60),
    (1001.0, 0.05, [0.05, 0.10, 0.15, 0.20, 0.25, 0.30], [1, 1, 1, 1, 1, 1], 20),
    (1002.0, 0.20, [0.20, 1.20], [1, 9], 100),
]
E2E_TAIL = 0.01  # [DONE] arrives 10 ms after the last token-bearing event
QUANTILES = (25, 50, 75, 90, 95, 99)


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (pandas' and numpy's default)."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _sample_sd(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run = tmp_path_factory.mktemp("llmperf") / "r1"
    run.mkdir()
    meta = RunMeta(run_id="r1", spectrn_version="0", started_at=1000.0, model="Qwen/Qwen3-32B", max_tokens=10)
    (run / "run.json").write_text(meta.model_dump_json())
    with (run / "requests.jsonl").open("w") as fh:
        for variant in ("baseline", "speculative"):
            for i, (sent, ttft, times, toks, n_in) in enumerate(REQUESTS):
                rec = RequestRecord(variant=variant, index=i, prompt_id=f"p{i}", prompt_class="s", sent_at=sent,
                                    ttft=ttft, e2e=times[-1] + E2E_TAIL, chunk_times=times, chunk_tokens=toks,
                                    completion_tokens=sum(toks), prompt_tokens=n_in, status=200)  # fmt: skip
                fh.write(rec.model_dump_json() + "\n")
            failed = RequestRecord(variant=variant, index=len(REQUESTS), prompt_id="px", prompt_class="s",
                                   sent_at=1003.0, prompt_tokens=80, status=500, error="http_500",
                                   error_msg="overloaded")  # fmt: skip
            fh.write(failed.model_dump_json() + "\n")
    finish(run, report=False)
    folder = run / "speculative"
    mean_in = int((40 + 60 + 20 + 100 + 80) / 5)  # over every started request, truncated as llmperf's int()
    summary = json.loads((folder / f"Qwen-Qwen3-32B_{mean_in}_10_summary.json").read_text())
    rows = json.loads((folder / f"Qwen-Qwen3-32B_{mean_in}_10_individual_responses.json").read_text())
    return summary, rows


def _columns() -> dict[str, list[float]]:
    cols: dict[str, list[float]] = {k: [] for k in ("itl", "ttft", "e2e", "thr", "in", "out")}
    for _sent, ttft, times, toks, n_in in REQUESTS:
        e2e = times[-1] + E2E_TAIL
        cols["itl"].append(times[-1] / len(times))
        cols["ttft"].append(ttft)
        cols["e2e"].append(e2e)
        cols["thr"].append(sum(toks) / e2e)
        cols["in"].append(n_in)
        cols["out"].append(sum(toks))
    return cols


def test_every_individual_response_field(written: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    _, rows = written
    cols = _columns()
    assert len(rows) == len(REQUESTS) + 1
    for i, row in enumerate(rows[:-1]):
        expected = {
            "error_code": None,
            "error_msg": "",
            "inter_token_latency_s": cols["itl"][i],
            "ttft_s": cols["ttft"][i],
            "end_to_end_latency_s": cols["e2e"][i],
            "request_output_throughput_token_per_s": cols["thr"][i],
            "number_total_tokens": cols["in"][i] + cols["out"][i],
            "number_output_tokens": cols["out"][i],
            "number_input_tokens": cols["in"][i],
        }
        assert row.keys() == expected.keys()
        for key, value in expected.items():
            if isinstance(value, float):
                assert row[key] == pytest.approx(value, rel=1e-12), (i, key)
            else:
                assert row[key] == value, (i, key)
    assert rows[-1] == {
        "error_code": 500,
        "error_msg": "overloaded",
        "inter_token_latency_s": 0,
        "ttft_s": 0,
        "end_to_end_latency_s": 0,
        "request_output_throughput_token_per_s": 0,
        "number_total_tokens": 80,
        "number_output_tokens": 0,
        "number_input_tokens": 80,
    }


def test_every_summary_field(written: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    summary, _ = written
    cols = _columns()
    expected: dict[str, Any] = {
        "version": "spectrn-llmperf-compatible",
        "name": "Qwen-Qwen3-32B_60_10_summary",  # llmperf's: the summary file's name
        "model": "Qwen/Qwen3-32B",
        "mean_input_tokens": 60,
        "mean_output_tokens": 10,
        "num_concurrent_requests": None,
    }
    for key, col in (("inter_token_latency_s", "itl"), ("ttft_s", "ttft"), ("end_to_end_latency_s", "e2e"),
                     ("request_output_throughput_token_per_s", "thr"), ("number_input_tokens", "in"),
                     ("number_output_tokens", "out")):  # fmt: skip
        values = cols[col]  # completed requests only: the failed one is counted as an error, not as zeros
        for q in QUANTILES:
            expected[f"results_{key}_quantiles_p{q}"] = _percentile(values, q)
        expected[f"results_{key}_mean"] = sum(values) / len(values)
        expected[f"results_{key}_min"] = min(values)
        expected[f"results_{key}_max"] = max(values)
        expected[f"results_{key}_stddev"] = _sample_sd(values)
    first_send = REQUESTS[0][0]
    last_end = max(sent + times[-1] + E2E_TAIL for sent, _, times, _, _ in REQUESTS)
    duration = last_end - first_send
    expected.update(
        results_num_requests_started=5,
        results_error_rate=1 / 5,
        results_number_errors=1,
        results_error_code_frequency=json.dumps({"500": 1}),
        results_mean_output_throughput_token_per_s=sum(cols["out"]) / duration,
        results_num_completed_requests=4,
        results_num_completed_requests_per_min=4 / duration * 60,
    )
    note = summary.pop("note")
    assert "llmperf's definition" in note
    assert summary.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, float):
            assert summary[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert summary[key] == value, key
