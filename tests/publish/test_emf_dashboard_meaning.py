"""What the EMF lines and the dashboard's speedup widgets mean, checked against expectations written out here
(not rebuilt with the code under test): timestamps in milliseconds at each request's send time, every dimension
set on every line, and all five speedup ratios pointing the right way (lower-is-better metrics: baseline over
speculative; throughput: speculative over baseline)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from doubles.runfactory import make_run
from spectrn.publish import dashboard, emf
from spectrn.run.folder import RunFolder

# CloudWatch's EMF specification: Timestamp is "the number of milliseconds after Jan 1, 1970 00:00:00 UTC"
# (docs/cloudwatch.md); the dimension sets every per-request line must declare, written out here
BY_CLASS = ["RunId", "Config", "Load", "Variant", "PromptClass"]
AGGREGATE = ["RunId", "Config", "Load", "Variant"]
START = time.time() - 3600


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    return RunFolder.open(make_run(tmp_path_factory.mktemp("runs"), per_class=3, start=START))


def _docs(run: RunFolder) -> list[dict[str, Any]]:
    return [json.loads(line) for line in emf.emf_lines(run, namespace="Spectrn")[0]]


def test_emf_timestamps_are_milliseconds_at_each_requests_send_time(run: RunFolder) -> None:
    per_request = [d for d in _docs(run) if "Errors" in d]
    records = list(run.records())
    assert len(per_request) == len(records)
    for doc, rec in zip(per_request, records, strict=True):
        ts = doc["_aws"]["Timestamp"]
        assert isinstance(ts, int)
        # milliseconds: a value in seconds would be ~1000 times smaller and land in January 1970
        assert abs(ts - rec.sent_at * 1000) < 1, (ts, rec.sent_at)
        assert (START - 1) * 1000 <= ts <= (time.time() + 1) * 1000
    # the run-level lines (acceptance, goodput) carry a time inside the run (its last measured request's end),
    # in milliseconds as well
    first_ms = min(r.sent_at for r in records) * 1000
    last_ms = max(r.sent_at + (r.e2e or 0) for r in records) * 1000
    run_level = [d for d in _docs(run) if "Errors" not in d and "ITL" not in d]
    assert run_level
    for doc in run_level:
        assert first_ms < doc["_aws"]["Timestamp"] <= last_ms, doc


def test_every_per_request_line_declares_both_dimension_sets_and_their_values(run: RunFolder) -> None:
    seen: set[tuple[str, str]] = set()
    for doc, rec in zip((d for d in _docs(run) if "Errors" in d), run.records(), strict=True):
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Dimensions"] == [BY_CLASS, AGGREGATE]
        assert {k: doc[k] for k in BY_CLASS} == {
            "RunId": "run-1",
            "Config": "qwen3-1.7b/k7",
            "Load": rec.level,
            "Variant": rec.variant,
            "PromptClass": rec.prompt_class,
        }
        seen.add((rec.variant, rec.prompt_class))
    # every variant x class of the run has its lines (a dropped class would lose a whole dimension value)
    assert seen == {(v, c) for v in ("baseline", "speculative") for c in ("structured", "open")}
    acc = [d for d in _docs(run) if "AcceptanceRate" in d]
    assert [d["_aws"]["CloudWatchMetrics"][0]["Dimensions"] for d in acc] == [[AGGREGATE]]


# (label, CloudWatch metric, ratio): the ratio is "b/s" where lower is better, "s/b" where higher is
SPEEDUPS = [
    ("TPOT p50 speedup", "TPOT", "b/s"),
    ("ITL p50 speedup", "ITL", "b/s"),
    ("e2e p50 speedup", "E2ELatency", "b/s"),
    ("TTFT p50 speedup", "TTFT", "b/s"),
    ("throughput p50 gain", "OutputThroughput", "s/b"),
]


def _expected_speedup_metrics(cls: str) -> list[list[Any]]:
    out: list[list[Any]] = []
    for i, (label, metric, ratio) in enumerate(SPEEDUPS):
        b, s, e = f"m{3 * i}", f"m{3 * i + 1}", f"e{3 * i + 2}"
        for variant, mid in (("baseline", b), ("speculative", s)):
            dims = ["RunId", "run-1", "Config", "qwen3-1.7b/k7", "Load", "c4", "Variant", variant]
            if cls != "all":
                dims += ["PromptClass", cls]
            out.append(["Spectrn", metric, *dims, {"stat": "p50", "id": mid, "visible": False}])
        expression = f"{b}/{s}" if ratio == "b/s" else f"{s}/{b}"
        out.append([{"expression": expression, "label": label, "id": e}])
    return out


@pytest.mark.parametrize("cls", ["all", "open", "structured"])
def test_all_five_speedups_divide_the_right_way(run: RunFolder, cls: str) -> None:
    body = dashboard.build_dashboard([dashboard.dashboard_run(run)], namespace="Spectrn", region="us-east-2")
    (speed,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith(f"{cls} · c4 · speedups")]
    assert speed["properties"]["metrics"] == _expected_speedup_metrics(cls)


def test_a_dashboard_speedup_matches_the_ratio_of_the_emf_values(run: RunFolder, tmp_path: Path) -> None:
    """The ratio the widget computes, evaluated on the published values, is > 1 exactly where speculation is
    faster: here the fabricated speculative TPOT is lower (several tokens per chunk on structured prompts)."""
    docs = [d for d in _docs(run) if "TPOT" in d and d["PromptClass"] == "structured"]
    med = {v: sorted(d["TPOT"] for d in docs if d["Variant"] == v) for v in ("baseline", "speculative")}
    b = med["baseline"][len(med["baseline"]) // 2]
    s = med["speculative"][len(med["speculative"]) // 2]
    (label, _, ratio) = SPEEDUPS[0]
    assert ratio == "b/s" and b / s > 1, (label, b, s)


def test_emf_defaults_compact_lines_and_metric_entries(run: RunFolder) -> None:
    lines, _ = emf.emf_lines(run)  # the documented default namespace and standard (60 s) resolution
    for line in lines:
        doc = json.loads(line)
        # one compact JSON object per line (no spaces: the agent ships lines as they are, and size counts)
        assert line == json.dumps(doc, separators=(",", ":"))
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "Spectrn"
        # EMF's MetricDefinition: Name, Unit, StorageResolution (1 = high resolution, 60 = standard)
        for m in directive["Metrics"]:
            assert set(m) == {"Name", "Unit", "StorageResolution"} and m["StorageResolution"] == 60, m


def test_write_emf_carries_the_runs_cloudwatch_settings_and_the_callers_choices(tmp_path: Path) -> None:
    from dataclasses import replace

    from spectrn.configuration.config import SpectrnConfig
    from spectrn.publish.datums import default_metrics_fn

    cfg = SpectrnConfig().model_dump(mode="json")
    cfg["cloudwatch"]["namespace"] = "TeamBench"
    cfg["cloudwatch"]["storage_resolution"] = 1
    run_dir = make_run(tmp_path, per_class=1, config=cfg)
    base = default_metrics_fn(1.0)

    def fixed_ttft(rec):  # type: ignore[no-untyped-def]
        m = base(rec)
        return None if m is None else replace(m, ttft=42.0)

    docs = [
        json.loads(x) for x in emf.write_emf(run_dir, run_id="rerun-7", metrics_fn=fixed_ttft).read_text().splitlines()
    ]
    assert docs
    for doc in docs:
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "TeamBench" and doc["RunId"] == "rerun-7"
        assert {m["StorageResolution"] for m in directive["Metrics"]} == {1}
    assert {d["TTFT"] for d in docs if "TTFT" in d} == {42.0}
    # a namespace given by the caller wins over the run's config
    docs = [json.loads(x) for x in emf.write_emf(run_dir, namespace="Other").read_text().splitlines()]
    assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in docs} == {"Other"}
    assert {d["RunId"] for d in docs} == {"run-1"}
