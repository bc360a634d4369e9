"""Integration: publish to a real local CloudWatch-compatible server (moto over HTTP) and read it back.

moto quirks handled here: ``get_metric_statistics`` matches dimensions as a subset (real CloudWatch matches
exactly), so aggregate checks use ``get_metric_data``, which moto matches exactly; moto computes no
percentiles (tests/publish/test_datums.py checks the distribution that makes CloudWatch's percentiles right).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from doubles import oracle
from doubles.cwfakes import REGION, CloudWatchProxy
from doubles.runfactory import make_run
from spectrn.analyze.run import ensure_summary
from spectrn.errors import PublishError
from spectrn.publish import dashboard, datums, publisher
from spectrn.run.folder import RunFolder

BASE = {"RunId": "run-1", "Config": "qwen3-1.7b/k7", "Load": "c4"}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    from spectrn.configuration.config import SpectrnConfig

    cfg = SpectrnConfig().model_dump(mode="json")
    cfg["bench"]["slo"] = ["tpot<=40ms"]  # so that every documented metric, goodput included, is published
    return make_run(tmp_path, per_class=8, errors=2, start=time.time() - 2 * 3600, config=cfg)


def _window(run_dir: Path) -> tuple[datetime, datetime]:
    folder = RunFolder.open(run_dir)
    start, end = ensure_summary(folder).time_range or (0.0, 0.0)
    return datetime.fromtimestamp(start - 600, UTC), datetime.fromtimestamp(end + 600, UTC)


def _query_all(client: Any, run_dir: Path, metrics: list[dict[str, Any]], stat: str) -> dict[str, float]:
    """One whole-run ``stat`` per metric (exact dimension match), keyed by a readable id."""
    start, end = _window(run_dir)
    out: dict[str, float] = {}
    for i in range(0, len(metrics), 500):
        chunk = metrics[i : i + 500]
        queries = [
            {"Id": f"m{n}", "MetricStat": {"Metric": m, "Period": 86400 * 2, "Stat": stat}, "ReturnData": True}
            for n, m in enumerate(chunk)
        ]
        resp = client.get_metric_data(MetricDataQueries=queries, StartTime=start, EndTime=end)
        for r in resp["MetricDataResults"]:
            m = chunk[int(r["Id"][1:])]
            key = m["MetricName"] + "|" + ",".join(f"{d['Name']}={d['Value']}" for d in m["Dimensions"])
            out[key] = float(sum(r["Values"])) if stat in ("SampleCount", "Sum") else float(r["Values"][0])
    return out


def _metric(name: str, **dims: str) -> dict[str, Any]:
    return {
        "Namespace": "Spectrn",
        "MetricName": name,
        "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
    }


def _list_metrics(client: Any) -> list[dict[str, Any]]:
    pages = client.get_paginator("list_metrics").paginate(Namespace="Spectrn")
    return [m for page in pages for m in page["Metrics"]]


def _key(name: str, **dims: str) -> str:
    return name + "|" + ",".join(f"{k}={v}" for k, v in dims.items())


def test_statistics_dimensions_units_and_dashboard_round_trip(run_dir: Path, moto_url: str, cw_client: Any) -> None:
    res = publisher.publish_run(run_dir, region=REGION, endpoint_url=moto_url, max_attempts=2)
    assert res.sent_now == res.batches and res.dashboard == "spectrn-run-1"
    run = RunFolder.open(run_dir)

    # what the records imply, per variant and prompt class, and over all classes
    metrics, expected = [], {}
    for variant in ("baseline", "speculative"):
        for cls in (None, "structured", "open"):
            dims = {**BASE, "Variant": variant} | ({"PromptClass": cls} if cls else {})
            recs = [r for r in run.records() if r.variant == variant and (cls is None or r.prompt_class == cls)]
            ok = [r for r in recs if r.ok]
            for name, values in (
                ("TTFT", [r.ttft for r in ok]),
                ("TPOT", [oracle.tpot(r) for r in ok]),
                ("ITL", [x for r in ok for x in oracle.itls(r)]),
                ("E2ELatency", [r.e2e for r in ok]),
                ("OutputThroughput", [oracle.throughput(r) for r in ok]),
                ("Errors", [0.0 if r.ok else 1.0 for r in recs]),
            ):
                metrics.append(_metric(name, **dims))
                expected[_key(name, **dims)] = values
    got = {
        stat: _query_all(cw_client, run_dir, metrics, stat) for stat in ("SampleCount", "Average", "Minimum", "Maximum")
    }
    for key, raw in expected.items():
        rounded = [v for v, c in zip(*datums.round_sig(raw, 4), strict=True) for _ in range(int(c))]
        assert got["SampleCount"][key] == len(raw), key
        assert got["Minimum"][key] == min(rounded) and got["Maximum"][key] == max(rounded), key
        assert got["Average"][key] == pytest.approx(sum(rounded) / len(rounded), rel=1e-9), key
        assert got["Average"][key] == pytest.approx(sum(raw) / len(raw), rel=5e-4), key  # vs raw: rounding only
    errors_spec = _key("Errors", **BASE, Variant="speculative")
    assert sum(expected[errors_spec]) == 2  # the two failed requests show up as errors

    acc = _query_all(cw_client, run_dir, [_metric("AcceptanceRate", **BASE, Variant="speculative")], "Average")
    assert list(acc.values()) == [62.0]

    # dimensions: exactly the two documented sets; units as documented
    listed = _list_metrics(cw_client)
    shapes = {tuple(sorted(d["Name"] for d in m["Dimensions"])) for m in listed}
    assert shapes == {tuple(sorted(datums.DIMS_AGGREGATE)), tuple(sorted(datums.DIMS_BY_CLASS))}
    start, end = _window(run_dir)
    for name, spec in datums.METRICS.items():
        variant = "speculative"
        dims = [{"Name": k, "Value": v} for k, v in {**BASE, "Variant": variant, "PromptClass": "structured"}.items()]
        if spec.source not in ("request", "gaps", "errors"):  # acceptance and goodput: per level as well
            dims = dims[:-1]
        stats = cw_client.get_metric_statistics(
            Namespace="Spectrn", MetricName=name, Dimensions=dims, StartTime=start, EndTime=end,
            Period=86400 * 2, Statistics=["SampleCount"],
        )  # fmt: skip
        assert stats["Datapoints"] and {p["Unit"] for p in stats["Datapoints"]} == {spec.unit}, name

    # the dashboard round-trips, passes the validator and shows only metrics that exist
    body_text = cw_client.get_dashboard(DashboardName="spectrn-run-1")["DashboardBody"]
    body = dashboard.validate_dashboard(body_text)
    assert _widget_contents(body) == _expected_widgets()
    assert all(w["properties"]["region"] == REGION for w in body["widgets"][1:])
    first = min(r.sent_at for r in run.records())
    last = max(r.sent_at + (r.e2e or 0) for r in run.records())
    shown_from = datetime.fromisoformat(body["start"].replace("Z", "+00:00")).timestamp()
    shown_to = datetime.fromisoformat(body["end"].replace("Z", "+00:00")).timestamp()
    assert shown_from <= first and last <= shown_to + 1, (body["start"], body["end"], first, last)
    existing = {(m["MetricName"], tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"]))) for m in listed}
    shown = 0
    for w in body["widgets"]:
        for entry in w["properties"].get("metrics", []):
            if isinstance(entry[0], dict):  # a metric-math expression over the widget's other metrics
                continue
            parts = entry[:-1]
            dims = tuple(sorted(zip(parts[2::2], parts[3::2], strict=True)))
            assert (parts[1], dims) in existing, entry
            shown += 1
    assert shown > 50


# The dashboard a user should see for this run, written out from docs/cloudwatch.md (not rebuilt with
# spectrn.publish.dashboard): per prompt class (all first, then by name) one widget per panel, each listing
# (metric, variant, statistic) for both variants; the speedup widget divides baseline by speculative for
# latencies and speculative by baseline for throughput.
_PANELS: list[tuple[str, list[tuple[str, str]]]] = [
    ("TTFT (s)", [("TTFT", p) for p in ("p50", "p90", "p99")]),
    ("TPOT (s)", [("TPOT", p) for p in ("p50", "p90", "p99")]),
    ("per-token ITL (s)", [("ITL", p) for p in ("p50", "p90", "p99")]),
    ("e2e latency (s)", [("E2ELatency", p) for p in ("p50", "p90", "p99")]),
    ("output throughput (tok/s per request)", [("OutputThroughput", "p50"), ("OutputThroughput", "Average")]),
]
_TAIL: list[tuple[str, list[tuple[str, str]]]] = [
    ("errors / requests", [("Errors", "Sum"), ("Errors", "SampleCount")]),
    ("output tokens per request", [("OutputTokens", "p50"), ("OutputTokens", "Average")]),
]
_SPEEDUPS = [("TPOT", "TPOT p50 speedup"), ("ITL", "ITL p50 speedup"), ("E2ELatency", "e2e p50 speedup"),
             ("TTFT", "TTFT p50 speedup"), ("OutputThroughput", "throughput p50 gain")]  # fmt: skip


def _expected_widgets() -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for cls in ("all", "open", "structured"):
        c = None if cls == "all" else cls
        for panel, lines in _PANELS:
            out.append(
                (f"{cls} · c4 · {panel}", [(m, v, c, st) for v in ("baseline", "speculative") for m, st in lines])
            )
        acc = [("TokensPerChunk", "baseline", c, "Average")]
        if c is None:  # counter acceptance exists for the whole run only, and replaces tokens per chunk there
            acc += [("AcceptanceRate", "speculative", None, "Average"),
                    ("MeanAcceptanceLength", "speculative", None, "Average")]  # fmt: skip
        else:
            acc.append(("TokensPerChunk", "speculative", c, "Average"))
        out.append((f"{cls} · c4 · acceptance", acc))
        for panel, lines in _TAIL:
            out.append(
                (f"{cls} · c4 · {panel}", [(m, v, c, st) for v in ("baseline", "speculative") for m, st in lines])
            )
        speed: list[Any] = []
        for i, (metric, label) in enumerate(_SPEEDUPS):
            b, s, e = f"m{3 * i}", f"m{3 * i + 1}", f"e{3 * i + 2}"
            speed += [(metric, "baseline", c, "p50"), (metric, "speculative", c, "p50")]
            speed.append(("=", f"{s}/{b}" if metric == "OutputThroughput" else f"{b}/{s}", label, e))
        out.append((f"{cls} · c4 · speedups over the run (baseline / speculative; > 1 = faster)", speed))
        good = [(m, v, c, "Average") for v in ("baseline", "speculative")
                for m in ("GoodputRequests", "GoodputTokens", "GoodputShare")]  # fmt: skip
        out.append((f"{cls} · c4 · goodput (meets every per-request SLO)", good))
    return out


def _widget_contents(body: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for w in body["widgets"][1:]:  # the first is the run's text header
        lines: list[Any] = []
        for entry in w["properties"]["metrics"]:
            if isinstance(entry[0], dict):
                lines.append(("=", entry[0]["expression"], entry[0]["label"], entry[0]["id"]))
                continue
            assert entry[0] == "Spectrn"
            dims = dict(zip(entry[2:-1:2], entry[3:-1:2], strict=True))
            assert {k: dims.pop(k) for k in BASE} == BASE, entry
            variant, cls = dims.pop("Variant"), dims.pop("PromptClass", None)
            assert not dims, entry
            lines.append((entry[1], variant, cls, entry[-1]["stat"]))
        out.append((w["properties"]["title"], lines))
    return out


@pytest.fixture
def flaky(moto_url: str) -> Iterator[CloudWatchProxy]:
    """Accepts three PutMetricData calls, then answers HTTP 500 (until a test replaces ``decide``)."""
    with CloudWatchProxy(moto_url, lambda n: (500, "InternalFailure", "simulated outage") if n >= 3 else None) as p:
        yield p


def test_failing_endpoint_part_way_then_rerun_publishes_everything_exactly_once(
    run_dir: Path, flaky: CloudWatchProxy, cw_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from spectrn.cli.main import main

    argv = ["publish", str(run_dir), "--endpoint-url", flaky.url, "--region", REGION, "--max-attempts", "2"]
    argv += ["--batch-size", "10"]  # several calls even for a small run
    with pytest.raises(SystemExit) as e:
        main([*argv, "--namespace", "Spectrn"])
    assert e.value.code == PublishError.exit_code
    err = capsys.readouterr().err
    # botocore's adaptive mode retried the failed call (2 attempts), then the error says what was sent
    assert flaky.refused == 2
    assert "PublishError: publish of run run-1 to Spectrn" in err and "stopped at batch 4/" in err
    assert "Sent: 3/" in err and "not sent:" in err and "re-run `spectrn publish" in err
    state = json.loads((run_dir / "publish.json").read_text())
    (target,) = state["targets"].values()
    assert len(target["sent"]) == 3 and "InternalFailure" in target["last_error"]["message"]

    flaky.decide = lambda n: None  # the outage is over
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().err
    assert "calls now, 3 already sent earlier" in out

    # every sample arrived exactly once: the total SampleCount over every metric equals the plan's samples
    listed = _list_metrics(cw_client)
    metrics = [{"Namespace": "Spectrn", "MetricName": m["MetricName"], "Dimensions": m["Dimensions"]} for m in listed]
    counts = _query_all(cw_client, run_dir, metrics, "SampleCount")
    plan = datums.build_metric_datums(RunFolder.open(run_dir))
    assert sum(counts.values()) == plan.samples
    assert cw_client.get_dashboard(DashboardName="spectrn-run-1")["DashboardName"] == "spectrn-run-1"


def test_goodput_reaches_cloudwatch_with_the_summarys_values(tmp_path: Path, moto_url: str, cw_client: Any) -> None:
    from spectrn.configuration.config import SpectrnConfig

    cfg = SpectrnConfig().model_dump(mode="json")
    cfg["bench"]["slo"] = ["ttft<=55ms", "tpot<=40ms", "structured/p90:tpot<=20ms"]
    run_dir = make_run(tmp_path, per_class=8, errors=2, start=time.time() - 2 * 3600, config=cfg)
    res = publisher.publish_run(run_dir, region=REGION, endpoint_url=moto_url, max_attempts=2)
    assert res.sent_now == res.batches
    summary = ensure_summary(RunFolder.open(run_dir))
    metrics, expected = [], {}
    for cls, cs in summary.levels[0].scopes():
        for variant, vs in cs.variants.items():
            g = vs.goodput
            assert g is not None and g.slos == ["ttft<=55ms", "tpot<=40ms"]
            dims = {**BASE, "Variant": variant} | ({} if cls == "all" else {"PromptClass": cls})
            for name, value in (
                ("GoodputRequests", g.requests_per_s),
                ("GoodputTokens", g.output_tokens_per_s),
                ("GoodputShare", 100 * (g.fraction or 0.0)),
            ):
                assert value is not None
                metrics.append(_metric(name, **dims))
                expected[_key(name, **dims)] = value
    got = _query_all(cw_client, run_dir, metrics, "Average")
    counts = _query_all(cw_client, run_dir, metrics, "SampleCount")
    for key, value in expected.items():
        assert counts[key] == 1, key  # one value per scope
        assert got[key] == datums.round_sig([value], 4)[0][0], key
        assert got[key] == pytest.approx(value, rel=5e-4), key
    # speculation meets the 40 ms TPOT target on these records, the baseline (about 47 ms per token) never does
    assert expected[_key("GoodputRequests", **BASE, Variant="baseline")] == 0.0
    assert expected[_key("GoodputRequests", **BASE, Variant="speculative")] > 0.0
    units = {m["MetricName"] for m in _list_metrics(cw_client) if m["MetricName"].startswith("Goodput")}
    assert units == {"GoodputRequests", "GoodputTokens", "GoodputShare"}
    body = dashboard.validate_dashboard(cw_client.get_dashboard(DashboardName="spectrn-run-1")["DashboardBody"])
    shown = {
        (e[1], tuple(e[2:-1]))
        for w in body["widgets"]
        if "goodput" in w["properties"].get("title", "")
        for e in w["properties"]["metrics"]
    }
    assert {name for name, _ in shown} == {"GoodputRequests", "GoodputTokens", "GoodputShare"}
    assert len(shown) == len(expected)  # every published goodput series is on the dashboard, and only those
