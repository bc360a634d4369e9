"""The metric table is the one place a metric is declared: a declaration added to it (and nothing else) appears in
the datums, the EMF lines, the dashboard, and the terminal, Markdown and HTML tables; the table's own
declarations are consistent with the Summary they read."""

from __future__ import annotations

import io
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from doubles import oracle
from doubles.runfactory import make_run
from spectrn.analyze import metric_table
from spectrn.analyze.metric_table import TABLE, Dashboard, Display, Metric, Panel, Series
from spectrn.analyze.run import ensure_summary
from spectrn.run.folder import RunFolder
from spectrn.run.summary import Speedups, Stats, VariantSummary

NAME = "OutputTokensAdded"
TITLE = "output tokens (added)"

# Not in any output before: the request's output tokens under a new name, in a new dashboard panel, and the chunk
# latency distribution (in summary.json, in no table) shown in every report table.
EXTRA = Metric(
    NAME, "Count", "output tokens of one request, declared by this test", "request", "higher",
    request=lambda rm: float(rm.output_tokens),
    display=Display("chunk gap", "decode chunk gap", "us", 1e6, 0, lambda vs: vs.chunk_latency_s,
                    views=frozenset({"terminal", "markdown", "html"})),
    dashboard=Dashboard(Panel(8, TITLE), (Series("Sum", "tokens"),)),
)  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    folder = RunFolder.open(make_run(tmp_path_factory.mktemp("runs"), per_class=4, start=time.time() - 3600))
    ensure_summary(folder)
    return folder


def _outputs(run: RunFolder) -> dict[str, Any]:
    from rich.console import Console

    from spectrn.publish.dashboard import build_dashboard, dashboard_run
    from spectrn.publish.datums import build_metric_datums
    from spectrn.publish.emf import emf_lines
    from spectrn.report.html import report_html
    from spectrn.report.markdown import summary_markdown
    from spectrn.report.tables import render_table

    summary = ensure_summary(run)
    buf = io.StringIO()
    Console(file=buf, width=400, color_system=None).print(render_table(summary))
    markdown = summary_markdown(summary, run.meta.config)
    return {
        "datums": build_metric_datums(run).datums,
        "emf": [json.loads(x) for x in emf_lines(run)[0]],
        "dashboard": build_dashboard([dashboard_run(run)], namespace="Spectrn", region="us-east-2"),
        "terminal": buf.getvalue(),
        "markdown": markdown,
        "html": report_html(run, summary, [], markdown),
    }


def _chunk_gap_us(run: RunFolder, variant: str) -> str:
    """The pooled chunk-latency p50 of a variant in microseconds, read from summary.json as data."""
    raw = json.loads(run.file("summary.json").read_text(encoding="utf-8"))
    return f"{raw['levels'][0]['variants'][variant]['chunk_latency_s']['p50'] * 1e6:.0f}"


def test_a_declaration_added_to_the_table_reaches_every_output(run: RunFolder, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _outputs(run)
    assert NAME not in json.dumps(before["datums"], default=str) + json.dumps(before["emf"])
    assert TITLE not in json.dumps(before["dashboard"])
    assert all("chunk gap" not in before[k] and "decode chunk gap" not in before[k] for k in ("terminal", "markdown",
                                                                                              "html"))  # fmt: skip

    monkeypatch.setattr(metric_table, "TABLE", [*TABLE, EXTRA])
    after = _outputs(run)

    # datums: per (load, variant) on the aggregate dimensions, the values sum to the requests' output tokens
    sums: dict[tuple[str, str], float] = defaultdict(float)
    for d in after["datums"]:
        dims = {x["Name"]: x["Value"] for x in d["Dimensions"]}
        if d["MetricName"] == NAME and "PromptClass" not in dims:
            assert d["Unit"] == "Count"
            sums[(dims["Load"], dims["Variant"])] += sum(v * c for v, c in zip(d["Values"], d["Counts"], strict=True))
    expected: dict[tuple[str, str], float] = defaultdict(float)
    for rec in run.records():
        if rec.ok:
            expected[(rec.level, rec.variant)] += oracle.tokens(rec)
    assert sums == expected and expected

    # EMF: every completed request's line carries it, with its unit in the directive
    ok = {(r.variant, r.index): oracle.tokens(r) for r in run.records() if r.ok}
    seen = []
    for doc in after["emf"]:
        if NAME in doc:
            (directive,) = doc["_aws"]["CloudWatchMetrics"]
            assert {"Name": NAME, "Unit": "Count", "StorageResolution": 60} in directive["Metrics"]
            seen.append(doc[NAME])
    assert sorted(seen) == sorted(ok.values())

    # dashboard: a panel of its own per (level, scope), in a third line of panels; the speedup row moves below it
    widgets = after["dashboard"]["widgets"]
    panels = [w for w in widgets if w["properties"].get("title", "").endswith(f"· {TITLE}")]
    scopes = 1 + len(ensure_summary(run).prompt_classes)
    assert len(panels) == scopes
    first = panels[0]
    assert (first["x"], first["y"]) == (0, 7 + 12)
    assert {m[1] for m in first["properties"]["metrics"]} == {NAME}
    assert [m[-1]["stat"] for m in first["properties"]["metrics"]] == ["Sum", "Sum"]
    speed = next(w for w in widgets if "speedups over the run" in w["properties"].get("title", ""))
    assert speed["y"] == 7 + 18

    # the tables: the added distribution with both variants' p50 as the summary holds it, no speedup declared
    b, s = _chunk_gap_us(run, "baseline"), _chunk_gap_us(run, "speculative")
    # the pooled table comes after the per-class ones (classes first): its row is the last one
    terminal_row = [line for line in after["terminal"].splitlines() if "chunk gap us" in line][-1]
    assert [b, s, "n/a"] == terminal_row.replace("│", " ").split()[-3:]
    assert "| chunk gap p50 us | speedup |" in after["markdown"]
    assert f"| {b} → {s} | n/a |" in after["markdown"]
    assert "decode chunk gap (us)" in after["html"]


def test_declarations_match_the_summary_they_read(run: RunFolder) -> None:
    names = [m.name for m in TABLE]
    assert len(names) == len(set(names))
    vs = ensure_summary(run).levels[0].variants["baseline"]
    assert isinstance(vs, VariantSummary)
    for m in TABLE:
        assert (m.request is not None) == (m.source == "request"), m.name
        assert (m.gaps is not None) == (m.source == "gaps"), m.name
        assert (m.acceptance is not None) == (m.source == "acceptance"), m.name
        assert (m.goodput is not None) == (m.source == "goodput"), m.name
        if m.display is not None:
            assert isinstance(m.display.distribution(vs), Stats), m.name
            if "plots" in m.display.views:
                assert getattr(vs, m.display.field) is m.display.distribution(vs), m.name
        for sd in m.speedups:
            assert sd.field in Speedups.model_fields, (m.name, sd.field)
            assert m.better in ("lower", "higher"), m.name
    seeds = [sd.seed for _, sd in metric_table.speedups() if sd.column is not None]
    assert len(seeds) == len(set(seeds)), "each bootstrap needs its own seed"
    slots = {m.dashboard.panel.slot: m.dashboard.panel for m in TABLE if m.dashboard is not None}
    assert sorted(slots) == list(range(len(slots))), "panels fill the grid in order"


def test_docs_name_the_table_as_where_a_metric_lands() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Where a change lands", 1)[1].split("\n## ", 1)[0]
    assert "src/spectrn/analyze/metric_table.py" in section and "src/spectrn/labels.py" in section
