"""Dashboard body builder and validator, EMF lines, the IAM policy (pure)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from doubles import oracle
from doubles.runfactory import make_run
from spectrn.errors import ConfigError, PublishError
from spectrn.publish import dashboard, datums, emf, iam, limits
from spectrn.run.folder import RunFolder


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    return RunFolder.open(make_run(tmp_path_factory.mktemp("runs"), per_class=4, start=time.time() - 3600))


def _body(run: RunFolder) -> dict[str, Any]:
    return dashboard.build_dashboard([dashboard.dashboard_run(run)], namespace="Spectrn", region="us-east-2")


def test_dashboard_has_side_by_side_widgets_per_prompt_class(run: RunFolder) -> None:
    body = _body(run)
    widgets = body["widgets"]
    text = widgets[0]
    assert text["type"] == "text" and "qwen3-1.7b" in text["properties"]["markdown"]
    assert "TPOT p50 speedup" in text["properties"]["markdown"]  # the run's speedups from summary.json
    titles = [w["properties"]["title"] for w in widgets[1:]]
    for cls in ("all", "open", "structured"):
        for panel in ("TTFT", "TPOT", "per-token ITL", "e2e latency", "output throughput", "acceptance"):
            assert any(t.startswith(f"{cls} · c4 · {panel}") for t in titles), (cls, panel)
    ttft = next(w for w in widgets if w["properties"].get("title") == "structured · c4 · TTFT (s)")
    lines = ttft["properties"]["metrics"]
    labels = [m[-1]["label"] for m in lines]
    assert labels == [f"{v} {p}" for v in ("baseline", "speculative") for p in ("p50", "p90", "p99")]
    assert all(m[:2] == ["Spectrn", "TTFT"] and "PromptClass" in m and "structured" in m for m in lines)
    assert {m[-1]["color"] for m in lines} == {"#1f77b4", "#ff7f0e"}
    acc = next(w for w in widgets if w["properties"].get("title") == "all · c4 · acceptance")
    assert [m[1] for m in acc["properties"]["metrics"]] == ["TokensPerChunk", "AcceptanceRate", "MeanAcceptanceLength"]
    assert all(w["properties"]["region"] == "us-east-2" for w in widgets[1:])
    speed = next(w for w in widgets if w["properties"].get("title", "").startswith("structured · c4 · speedups"))
    assert speed["properties"]["view"] == "singleValue" and speed["width"] == 24
    exprs = [m[0] for m in speed["properties"]["metrics"] if isinstance(m[0], dict)]
    assert [e["label"] for e in exprs] == [
        "TPOT p50 speedup", "ITL p50 speedup", "e2e p50 speedup", "TTFT p50 speedup", "throughput p50 gain"
    ]  # fmt: skip
    by_id = {m[-1]["id"]: m for m in speed["properties"]["metrics"] if not isinstance(m[0], dict)}
    num, den = exprs[0]["expression"].split("/")
    assert by_id[num][1] == "TPOT" and "baseline" in by_id[num] and "speculative" in by_id[den]
    num, den = exprs[-1]["expression"].split("/")
    assert "speculative" in by_id[num] and "baseline" in by_id[den]  # throughput: higher is better
    assert all(m[-1]["visible"] is False for m in by_id.values())
    assert body["start"] < body["end"] and body["periodOverride"] == "inherit"
    dashboard.validate_dashboard(json.dumps(body))


def test_dashboard_for_a_sweep_shows_every_config(run: RunFolder) -> None:
    views = []
    for label in ("qwen3-0.6b/k5", "qwen3-1.7b/k7", "qwen3-4b/k9"):
        v = dashboard.dashboard_run(run, run_id="sweep-1")
        v.config_label = label
        views.append(v)
    body = dashboard.build_dashboard(views, namespace="Spectrn", region="us-east-1")
    tpot = next(w for w in body["widgets"] if w["properties"].get("title") == "all · c4 · TPOT (s)")
    labels = [m[-1]["label"] for m in tpot["properties"]["metrics"]]
    assert "qwen3-0.6b/k5 speculative p50" in labels and "qwen3-4b/k9 baseline p99" in labels
    assert len(labels) == 3 * 2 * 3
    assert len({m[-1]["color"] for m in tpot["properties"]["metrics"] if "speculative" in m[-1]["label"]}) == 3


def test_dashboard_name_follows_cloudwatch_rules() -> None:
    assert (
        dashboard.dashboard_name("spectrn", "2026-01-01T10:00 qwen3-1.7b/k7")
        == "spectrn-2026-01-01T10-00-qwen3-1-7b-k7"
    )


def _speed(body: dict[str, Any]) -> list[list[Any]]:
    widget = next(w for w in body["widgets"] if "speedups" in w["properties"].get("title", ""))
    return widget["properties"]["metrics"]


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda b: b["widgets"].extend([copy.deepcopy(b["widgets"][1])] * 600), "widgets (max 500)"),
        (lambda b: b["widgets"][1]["properties"]["metrics"].extend([["Spectrn", "TTFT"]] * 500), "metrics (max 500)"),
        (lambda b: b["widgets"][1].update(x=20, width=6), "outside the 24-column grid"),
        (lambda b: b["widgets"][2].update(x=b["widgets"][1]["x"], y=b["widgets"][1]["y"]), "overlap"),
        (lambda b: b["widgets"][1]["properties"].update(stat="median"), "stat 'median'"),
        (lambda b: b["widgets"][1]["properties"].update(period=45), "period 45"),
        (lambda b: b["widgets"][1]["properties"]["metrics"][0].insert(2, "Lonely"), "expected [namespace, name"),
        (lambda b: b["widgets"][1]["properties"]["metrics"][0][-1].update(colour="#fff"), "unknown options"),
        (lambda b: b["widgets"][1]["properties"].pop("region"), "'region' is required"),
        (lambda b: b["widgets"][0]["properties"].update(markdown=" "), "non-empty markdown"),
        (lambda b: b["widgets"][1].update(type="chart"), "type 'chart'"),
        (lambda b: b.update(theme="dark"), "unknown top-level keys"),
        (lambda b: b["widgets"][1].update(height=2.5), "must be integers"),
        (lambda b: _speed(b)[-1][0].update(expression="m0/zz9"), "unknown id 'zz9'"),
        (lambda b: _speed(b)[1][-1].update(id="m0"), "metric id 'm0' used twice"),
        (lambda b: _speed(b)[0][-1].update(id="M0"), "must start with a lowercase letter"),
        (lambda b: _speed(b)[2][0].pop("id"), "an expression needs an id"),
    ],
)
def test_validator_catches_bad_bodies(run: RunFolder, mutate: Any, problem: str) -> None:
    body = _body(run)
    mutate(body)
    with pytest.raises(PublishError, match="invalid dashboard body") as e:
        dashboard.validate_dashboard(body)
    assert problem in str(e.value)


def test_validator_rejects_non_json_and_empty() -> None:
    with pytest.raises(PublishError, match="not JSON"):
        dashboard.validate_dashboard("{widgets: [")
    with pytest.raises(PublishError, match="non-empty 'widgets'"):
        dashboard.validate_dashboard({"widgets": []})


def test_emf_lines_carry_the_same_metrics(run: RunFolder) -> None:
    lines, skipped = emf.emf_lines(run, namespace="Spectrn")
    assert skipped == 0
    docs = [json.loads(ln) for ln in lines]
    itl_total = 0
    for doc in docs:
        meta = doc["_aws"]
        assert isinstance(meta["Timestamp"], int)
        (directive,) = meta["CloudWatchMetrics"]
        assert directive["Namespace"] == "Spectrn"
        for dims in directive["Dimensions"]:
            assert tuple(dims) in (datums.DIMS_BY_CLASS, datums.DIMS_AGGREGATE)
            assert all(isinstance(doc[d], str) and doc[d] for d in dims)
        for m in directive["Metrics"]:
            assert m["Unit"] == datums.METRICS[m["Name"]].unit
            value = doc[m["Name"]]
            assert not isinstance(value, list) or len(value) <= limits.EMF_MAX_VALUES
        itl_total += len(doc.get("ITL", []))
    expected_itl = sum(oracle.tokens(r) - 1 for r in run.records() if r.ok)  # one per token after the first
    assert itl_total == expected_itl
    per_request = [d for d in docs if "Errors" in d]
    assert len(per_request) == len(list(run.records()))
    assert sum(d["Errors"] for d in per_request) == sum(1 for r in run.records() if not r.ok)
    acc = [d for d in docs if "AcceptanceRate" in d]
    assert len(acc) == 1 and acc[0]["AcceptanceRate"] == 62.0 and acc[0]["Variant"] == "speculative"


def test_emf_splits_long_itl_arrays(tmp_path: Path) -> None:
    run = RunFolder.open(make_run(tmp_path, per_class=1, tokens=260, summary=False))
    docs = [json.loads(x) for x in emf.emf_lines(run)[0]]
    one = [d for d in docs if d.get("Variant") == "baseline" and d.get("PromptClass") == "structured" and "ITL" in d]
    assert [len(d["ITL"]) for d in one] == [100, 100, 59]


def test_write_emf_writes_the_run_folder_file(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, summary=False)
    path = emf.write_emf(run_dir)
    assert path == run_dir / "metrics.emf.jsonl"
    assert all(json.loads(x)["_aws"] for x in path.read_text().splitlines())


def test_iam_policy_is_least_privilege() -> None:
    policy = iam.publish_iam_policy("Spectrn", "spectrn", region="eu-west-1", account="123456789012")
    put, dash = policy["Statement"]
    assert put["Action"] == "cloudwatch:PutMetricData" and put["Resource"] == "*"
    assert put["Condition"]["StringEquals"] == {"cloudwatch:namespace": "Spectrn", "aws:RequestedRegion": "eu-west-1"}
    assert set(dash["Action"]) == {"cloudwatch:PutDashboard", "cloudwatch:GetDashboard"}
    assert dash["Resource"] == "arn:aws:cloudwatch::123456789012:dashboard/spectrn-*"
    assert all(s["Effect"] == "Allow" and "*" not in str(s["Action"]) for s in policy["Statement"])
    default = iam.publish_iam_policy("Spectrn", "spectrn")
    assert "aws:RequestedRegion" not in default["Statement"][0]["Condition"]["StringEquals"]
    with pytest.raises(ConfigError, match="dashboard_prefix"):
        iam.publish_iam_policy("Spectrn", "bad prefix*")
    with pytest.raises(ConfigError, match="reserved"):
        iam.publish_iam_policy("AWS/Lambda", "spectrn")


def test_docs_list_every_metric_and_the_policy() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cloudwatch.md").read_text(encoding="utf-8")
    for name, spec in datums.METRICS.items():
        assert f"| `{name}` | {spec.unit} |" in doc, name
    block = doc.split("## IAM", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    assert json.loads(block) == iam.publish_iam_policy("Spectrn", "spectrn")
    for dims in (datums.DIMS_BY_CLASS, datums.DIMS_AGGREGATE):
        assert ", ".join(f"`{d}`" for d in dims) in doc


def test_goodput_in_emf_and_dashboard(tmp_path: Path) -> None:
    from spectrn.analyze.run import ensure_summary
    from spectrn.configuration.config import SpectrnConfig

    cfg = SpectrnConfig().model_dump(mode="json")
    cfg["bench"]["slo"] = ["tpot<=40ms"]
    run = RunFolder.open(make_run(tmp_path, per_class=4, config=cfg))
    summary = ensure_summary(run)
    docs = [json.loads(x) for x in emf.emf_lines(run)[0]]
    good = [d for d in docs if "GoodputRequests" in d]
    assert len(good) == 2 * 3  # (baseline, speculative) x (all classes, structured, open)
    for d in good:
        (directive,) = d["_aws"]["CloudWatchMetrics"]
        assert [m["Name"] for m in directive["Metrics"]] == ["GoodputRequests", "GoodputTokens", "GoodputShare"]
        scope = summary.levels[0].by_prompt_class[d["PromptClass"]] if "PromptClass" in d else summary.levels[0]
        g = scope.variants[d["Variant"]].goodput
        assert g is not None
        assert directive["Dimensions"] == [list(datums.DIMS_BY_CLASS if "PromptClass" in d else datums.DIMS_AGGREGATE)]
        assert d["GoodputRequests"] == g.requests_per_s and d["GoodputTokens"] == g.output_tokens_per_s
        assert d["GoodputShare"] == 100 * (g.fraction or 0.0)
    body = _body(run)
    widgets = [w for w in body["widgets"] if "goodput" in w["properties"].get("title", "")]
    assert [w["properties"]["title"] for w in widgets] == [f"{c} · c4 · goodput (meets every per-request SLO)"
                                                           for c in ("all", "open", "structured")]  # fmt: skip
    speed = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("open · c4 · speedups"))
    assert speed["width"] == 16 and widgets[1]["x"] == 16 and widgets[1]["width"] == 8  # side by side
    # no SLO: no goodput anywhere
    plain = RunFolder.open(make_run(tmp_path / "plain", per_class=2))
    assert not any("Goodput" in x for x in emf.emf_lines(plain)[0])
    assert not any("goodput" in w["properties"].get("title", "") for w in _body(plain)["widgets"])
