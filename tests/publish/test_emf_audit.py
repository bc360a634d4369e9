"""Every EMF line of a tiny hand-made run, written out by hand: members, timestamps (milliseconds), the
dimension sets, each metric's unit and value; a long ITL array split 100 + 100 + 50; non-finite values
counted; goodput lines of a run with a per-request SLO."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from doubles.runfactory import make_run
from spectrn.analyze.metrics import RequestMetrics
from spectrn.publish import emf
from spectrn.publish.datums import default_metrics_fn
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord

T0 = 1_790_000_000.0
T1 = T0 + 50
BY_CLASS = ["RunId", "Config", "Load", "Variant", "PromptClass"]
AGGREGATE = ["RunId", "Config", "Load", "Variant"]
UNITS = {  # docs/cloudwatch.md's metric table, written out
    "Errors": "Count", "TTFT": "Seconds", "TPOT": "Seconds", "E2ELatency": "Seconds",
    "OutputThroughput": "Count/Second", "OutputTokens": "Count", "TokensPerChunk": "None", "ITL": "Seconds",
    "AcceptanceRate": "Percent", "MeanAcceptanceLength": "None",
    "GoodputRequests": "Count/Second", "GoodputTokens": "Count/Second", "GoodputShare": "Percent",
}  # fmt: skip


def _rec(variant: str, index: int, sent: float, ttft: float, times: list[float]) -> RequestRecord:
    return RequestRecord(variant=variant, index=index, prompt_id=f"open-{index}", prompt_class="open", level="c4",
                         sent_at=sent, ttft=ttft, e2e=times[-1], chunk_times=times, chunk_tokens=[1] * len(times),
                         completion_tokens=len(times), prompt_tokens=10, status=200)  # fmt: skip


def _doc(ts_ms: int, members: dict[str, str], values: dict[str, Any], dims: list[list[str]]) -> dict[str, Any]:
    metrics = [{"Name": n, "Unit": UNITS[n], "StorageResolution": 60} for n in values]
    directive = {"Namespace": "Spectrn", "Dimensions": dims, "Metrics": metrics}
    return {"_aws": {"Timestamp": ts_ms, "CloudWatchMetrics": [directive]}, **members, **values}


def _members(variant: str, pclass: str | None = "open", run_id: str = "r-emf") -> dict[str, str]:
    out = {"RunId": run_id, "Config": "qwen3-1.7b/k7", "Load": "c4", "Variant": variant}
    return out | ({"PromptClass": pclass} if pclass else {})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    records = [
        _rec("baseline", 0, T0, 0.5, [0.5, 1.0, 1.5]),
        RequestRecord(
            variant="speculative",
            index=0,
            prompt_id="open-0",
            prompt_class="open",
            level="c4",
            sent_at=T1,
            status=500,
            error="http_500",
            error_msg="boom",
        ),  # fmt: skip
        _rec("speculative", 1, T0 + 1, 0.25, [0.25, 0.75]),
    ]
    return RunFolder.open(make_run(tmp_path_factory.mktemp("emf"), "r-emf", records))


def test_every_line_of_a_tiny_run(run: RunFolder) -> None:
    lines, skipped = emf.emf_lines(run)
    docs = [json.loads(x) for x in lines]
    dims = [BY_CLASS, AGGREGATE]
    # baseline: 3 one-token events at 0.5, 1.0, 1.5 s: TPOT (1.5 - 0.5) / 2, throughput 3 / 1.5, gaps 0.5, 0.5
    base = {"Errors": 0.0, "TTFT": 0.5, "TPOT": 0.5, "E2ELatency": 1.5, "OutputThroughput": 2.0,
            "OutputTokens": 3.0, "TokensPerChunk": 1.0, "ITL": [0.5, 0.5]}  # fmt: skip
    # speculative: 2 events at 0.25, 0.75 s: TPOT 0.5 / 1, throughput 2 / 0.75
    spec = {"Errors": 0.0, "TTFT": 0.25, "TPOT": 0.5, "E2ELatency": 0.75, "OutputThroughput": 2 / 0.75,
            "OutputTokens": 2.0, "TokensPerChunk": 1.0, "ITL": [0.5]}  # fmt: skip
    # the acceptance line: at the run's end (the speculative request's end, T0 + 1 + 0.75 s), the aggregate set only
    acc = {"AcceptanceRate": 62.0, "MeanAcceptanceLength": 3.4}
    assert docs == [
        _doc(1_790_000_000_000, _members("baseline"), base, dims),
        _doc(1_790_000_050_000, _members("speculative"), {"Errors": 1.0}, dims),
        _doc(1_790_000_001_000, _members("speculative"), spec, dims),
        _doc(1_790_000_001_750, _members("speculative", None), acc, [AGGREGATE]),
    ]
    assert skipped == 0


def test_a_long_itl_array_is_split_into_lines_of_at_most_100(tmp_path: Path) -> None:
    gaps = [0.01 + k * 1e-5 for k in range(250)]
    times = [0.1]
    for g in gaps:
        times.append(times[-1] + g)
    run = RunFolder.open(make_run(tmp_path, "r-long", [_rec("baseline", 0, T0, 0.1, times)], acceptance={}))
    docs = [json.loads(x) for x in emf.emf_lines(run)[0]]
    itl = [d["ITL"] for d in docs if "ITL" in d]
    assert [len(x) for x in itl] == [100, 100, 50]
    assert [round(v, 8) for x in itl for v in x] == [round(g, 8) for g in gaps]  # every gap once, in order
    # continuation lines: the same members, time and dimension sets, only ITL
    for d in docs[1:3]:
        assert {k: v for k, v in d.items() if k not in ("ITL", "_aws")} == _members("baseline", run_id="r-long")
        assert d["_aws"]["Timestamp"] == 1_790_000_000_000
        assert d["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [BY_CLASS, AGGREGATE]
        assert d["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [{"Name": "ITL", "Unit": "Seconds",
                                                                  "StorageResolution": 60}]  # fmt: skip


def test_non_finite_values_are_left_out_and_counted(run: RunFolder) -> None:
    base = default_metrics_fn(1.0)

    def broken(rec: RequestRecord) -> RequestMetrics | None:
        m = base(rec)  # two gaps of which one is NaN, and an infinite TTFT
        return None if m is None else replace(m, ttft=math.inf, gaps=(0.5, math.nan), gap_tokens=(1, 1))

    lines, skipped = emf.emf_lines(run, metrics_fn=broken)
    docs = [json.loads(x) for x in lines]
    assert skipped == 2 * 2  # per completed request: the TTFT and one gap
    assert [d.get("ITL") for d in docs if "TTFT" in d or "ITL" in d] == [[0.5], [0.5]]
    assert all("TTFT" not in d for d in docs)


def test_goodput_lines_carry_their_class_dimension_set(tmp_path: Path) -> None:
    from spectrn.configuration.config import SpectrnConfig

    cfg = SpectrnConfig().model_dump(mode="json")
    cfg["bench"]["slo"] = ["ttft<=1s"]  # both baseline requests meet it
    recs = [_rec("baseline", 0, T0, 0.5, [0.5, 1.0, 1.5]), _rec("baseline", 1, T0 + 0.5, 0.5, [0.5, 1.5])]
    run = RunFolder.open(make_run(tmp_path, "r-good", recs, acceptance={}, config=cfg))
    docs = [json.loads(x) for x in emf.emf_lines(run)[0]]
    good = [d for d in docs if "GoodputShare" in d]
    # wall: first send T0 to last end T0 + 0.5 + 1.5 = 2 s; 2 good requests / 2 s, 5 tokens / 2 s, 100 %
    values = {"GoodputRequests": 1.0, "GoodputTokens": 2.5, "GoodputShare": 100.0}
    end_ms = 1_790_000_002_000
    agg = {"RunId": "r-good", "Config": "qwen3-1.7b/k7", "Load": "c4", "Variant": "baseline"}
    assert good == [
        {**_doc(end_ms, agg, values, [AGGREGATE])},
        {**_doc(end_ms, agg | {"PromptClass": "open"}, values, [BY_CLASS])},
    ]
