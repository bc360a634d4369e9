"""The local report: self-contained HTML, PNG plots, Markdown, terminal tables, run comparison, sweep heatmap."""

from __future__ import annotations

import json
import re
import struct
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from doubles.runfactory import make_records, make_run
from spectrn.cli.main import main
from spectrn.errors import ConfigError
from spectrn.report import compare, html, plots, tables
from spectrn.run.summary import Summary

PNGS = ["latency_cdf.png", "latency_by_class.png", "speedup.png", "acceptance.png", "throughput.png"]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = make_run(tmp_path_factory.mktemp("runs"), per_class=10, errors=2, start=time.time() - 3600)
    return html.build_report(run_dir)


class _Refs(HTMLParser):
    """Every attribute that can make a browser fetch something, and the text of <style> blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.imgs = 0
        self.in_style = False
        self.styles: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.imgs += tag == "img"
        self.in_style = tag == "style"
        for k, v in attrs:
            if k in ("src", "href", "srcset", "poster", "data", "action", "background", "style") and v is not None:
                self.refs.append((tag, k, v))

    def handle_endtag(self, tag: str) -> None:
        self.in_style = False if tag == "style" else self.in_style

    def handle_data(self, data: str) -> None:
        if self.in_style:
            self.styles.append(data)


def test_report_files(built: Path) -> None:
    out = built.parent
    assert built.name == "index.html" and out.name == "report"
    for name in PNGS:
        w, h = png_size(out / name)
        assert w >= 800 and h >= 300 and (out / name).stat().st_size > 10_000, name
    assert not (out / "load.png").exists()  # one load level only
    md = (out / "summary.md").read_text()
    assert md.startswith("### spectrn run `run-1`")
    assert "| structured |" in md and "| open |" in md and "x [" in md
    assert "| all (pooled) |" in md and "3.40 (counters)" in md  # the pooled row carries the run's counters
    assert "structured: TPOT p50 speedup" in md and "open: TPOT p50 speedup" in md  # headline per class
    assert "NOT A CLEAN RUN" in md  # 2 failed of 22 speculative requests: over the 5 % budget


def test_html_is_self_contained(built: Path) -> None:
    text = built.read_text(encoding="utf-8")
    parser = _Refs()
    parser.feed(text)
    assert parser.imgs == len(PNGS) + 1  # and the throughput-per-instance vs speed-per-user view
    for tag, attr, value in parser.refs:
        assert value.startswith("data:image/png;base64,"), (tag, attr, value[:60])
    css = "".join(parser.styles)
    assert "@import" not in css and "url(" not in css
    assert not re.search(r"(?i)https?://|//[a-z0-9.-]+\.[a-z]{2,}/|<script|<link|<iframe", text)
    assert "127.0.0.1:18001/v1" in text  # endpoints shown as text, without a scheme that could become a link


def test_report_needs_no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the report tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    run_dir = make_run(tmp_path, per_class=3, summary=False)
    index = html.build_report(run_dir)
    assert index.exists()
    assert not (run_dir / "summary.json").exists()  # computed in memory, analyze's file is left alone


def test_without_acceptance_counters_acceptance_comes_from_the_stream(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=3, acceptance={"baseline": None, "speculative": None})
    index = html.build_report(run_dir)
    md = (index.parent / "summary.md").read_text()
    assert "(stream) |" in md and "(counters)" not in md
    assert "acceptance from" in index.read_text()


def test_several_load_levels_get_a_load_plot(tmp_path: Path) -> None:
    recs = make_records(per_class=3, level="c1") + make_records(per_class=3, level="c8", seed=3, start=1_790_100_000)
    index = html.build_report(make_run(tmp_path, records=recs))
    assert png_size(index.parent / "load.png")[0] >= 800
    text = index.read_text()
    assert "Comparison at load c1" in text and "Comparison at load c8" in text


def test_render_table(built: Path) -> None:
    summary = Summary.model_validate_json((built.parent.parent / "summary.json").read_text())
    console = Console(record=True, width=160)
    console.print(tables.render_table(summary))
    text = console.export_text()
    needles = ("structured", "open", "all (pooled)", "TPOT ms", "ITL ms", "tok/s/req", "speedup [95% CI]")
    for needle in (*needles, "acceptance", "$/M tokens"):
        assert needle in text
    raw = json.loads((built.parent.parent / "summary.json").read_text())
    tpot = raw["levels"][0]["by_prompt_class"]["structured"]["speedup"]["tpot_p50"]
    assert f"{tpot['value']:.2f}x [{tpot['ci95'][0]:.2f}, {tpot['ci95'][1]:.2f}]" in text


def test_compare_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from spectrn.configuration.config import SpectrnConfig

    a = make_run(tmp_path, "run-a", per_class=4)
    cfg = SpectrnConfig(num_speculative_tokens=5).model_dump(mode="json")
    b = make_run(tmp_path, "run-b", per_class=4, seed=9, config=cfg)
    cmp = compare.compare_runs(a, b)
    assert cmp["config_differences"] == {"num_speculative_tokens": [7, 5]}
    assert cmp["a"]["config"] == "qwen3-1.7b/k7" and cmp["b"]["config"] == "qwen3-1.7b/k5"
    row = next(r for r in cmp["speedups"] if r["prompt_class"] == "structured" and r["metric"] == "TPOT p50")
    sa = json.loads((a / "summary.json").read_text())["levels"][0]["by_prompt_class"]["structured"]["speedup"][
        "tpot_p50"
    ]
    assert row["a"] == pytest.approx(sa["value"])
    tpot = next(
        r
        for r in cmp["rows"]
        if r["prompt_class"] == "all" and r["variant"] == "speculative" and r["metric"] == "TPOT p50"
    )
    assert tpot["ratio"] == pytest.approx(tpot["b"] / tpot["a"])

    md_path = tmp_path / "cmp.md"
    with pytest.raises(SystemExit) as e:
        main(["compare", str(a), str(b), "--markdown", str(md_path)])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "run-a" in out and "run-b" in out and "num_speculative_tokens: 7 -> 5" in out
    assert "| c4 | structured | TPOT p50 |" in md_path.read_text()
    assert cmp["pairs"] == [["c4", "c4"]]


def test_report_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path, per_class=2)
    with pytest.raises(SystemExit) as e:
        main(["report", str(run_dir), "--out", str(tmp_path / "out")])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert f"report: {tmp_path / 'out' / 'index.html'}" in out and "TPOT ms" in out
    with pytest.raises(SystemExit) as e:
        main(["report", str(tmp_path / "missing")])
    assert e.value.code == 5


def test_sweep_heatmap(tmp_path: Path) -> None:
    cells = [
        {"draft": d, "window": w, "prompt_class": c, "speedup": s, "ci95": [s - 0.1, s + 0.1]}
        for c, base in (("structured", 2.5), ("open", 1.0))
        for d, f in (("qwen3-0.6b", 0.8), ("qwen3-1.7b", 1.0))
        for w, s in ((5, base * f * 0.9), (7, base * f), (15, base * f * 0.7))
    ]
    cells.append({"draft": "qwen3-4b", "window": 7, "prompt_class": "open", "speedup": None})
    path = plots.sweep_heatmap(cells, tmp_path / "sweep" / "heatmap.png")
    w, h = png_size(path)
    assert w > h > 200
    with pytest.raises(ConfigError, match="lacks"):
        plots.sweep_heatmap([{"draft": "x", "speedup": 1.0}], tmp_path / "bad.png")
    with pytest.raises(ConfigError, match="at least one cell"):
        plots.sweep_heatmap([], tmp_path / "bad.png")


def test_report_says_where_metrics_went(tmp_path: Path) -> None:
    from doubles.cwfakes import FakeSink
    from spectrn.publish import emf, publisher

    run_dir = make_run(tmp_path, per_class=2, start=time.time() - 3600)
    emf.write_emf(run_dir)
    sink = FakeSink()
    sink.target = "us-east-1@http://127.0.0.1:4566"
    publisher.publish_run(run_dir, sink)
    text = html.build_report(run_dir).read_text()
    assert "metrics.emf.jsonl" in text
    assert "namespace Spectrn (us-east-1@127.0.0.1:4566): 1/1 calls sent, dashboard spectrn-run-1" in text
    assert not re.search(r"https?://", text)


def test_a_planted_symlink_is_replaced_never_followed(tmp_path: Path) -> None:
    """A symlink where a plot goes (a copied or hostile run folder) must not make the report overwrite its target."""
    run_dir = make_run(tmp_path, per_class=2)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (run_dir / "report").mkdir()
    (run_dir / "report" / "speedup.png").symlink_to(victim)
    (run_dir / "report" / "summary.md").symlink_to(victim)
    html.build_report(run_dir)
    assert victim.read_text() == "keep me"
    assert not (run_dir / "report" / "speedup.png").is_symlink() and png_size(run_dir / "report" / "speedup.png")


def _exact_records() -> list:
    """Every request on an exact schedule: TTFT 50 ms, 25 tokens. Baseline: one token every 45 ms (TPOT 45 ms).
    Speculative: three tokens every 90 ms (TPOT = 8 x 90 ms / 24 = 30 ms, per-token ITL 30 ms). Speedup 1.5."""
    from spectrn.run.records import RequestRecord

    recs = []
    for i in range(12):
        for variant, per_event, gap in (("baseline", 1, 0.045), ("speculative", 3, 0.09)):
            events = 24 // per_event
            times = [0.05 + j * gap for j in range(events + 1)]
            recs.append(
                RequestRecord(
                    variant=variant,
                    index=i,
                    prompt_id=f"p{i}",
                    prompt_class="structured",
                    sent_at=1_790_000_000.0 + 10 * i,
                    ttft=0.05,
                    e2e=times[-1],
                    chunk_times=times,
                    chunk_tokens=[1] + [per_event] * events,
                    completion_tokens=25,
                    status=200,
                )
            )
    return recs


def test_report_shows_the_schedules_numbers(tmp_path: Path) -> None:
    """The figures a reader sees, against the schedule the records were made from (not against the analysis)."""
    index = html.build_report(make_run(tmp_path, records=_exact_records(), acceptance={}))
    md = (index.parent / "summary.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| structured |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "45.0 → 30.0"  # TPOT p50 ms: (24 x 45 ms) / 24 and (8 x 90 ms) / 24
    assert cells[2].startswith("1.50x")
    assert cells[3] == "45.0 → 30.0"  # per-token ITL: 45 ms per token; 90 ms / 3 tokens
    assert cells[5] == "1.13 → 0.77"  # e2e s: 0.05 + 24 x 0.045 = 1.13; 0.05 + 8 x 0.09 = 0.77
    assert cells[7] == "22.1 → 32.5"  # tokens/s per request: 25 / 1.13 and 25 / 0.77
    assert cells[9].startswith("3.00 (stream)")  # three tokens per decode event


def test_the_headline_carries_cost_and_the_pareto_plot_every_level(tmp_path: Path) -> None:
    from spectrn.report.format import headline_lines

    recs = make_records(per_class=3, level="c1") + make_records(per_class=3, level="c8", seed=3, start=1_790_100_000)
    index = html.build_report(make_run(tmp_path, records=recs))
    summary = Summary.model_validate_json((index.parent.parent / "summary.json").read_text())
    lines = headline_lines(summary)
    assert len(lines) == len(summary.headline) == 4
    for h, line in zip(summary.headline, lines, strict=True):
        cs = summary.level(h.level).by_prompt_class[h.scope]
        base, spec = (cs.variants[v].cost.usd_per_million_output_tokens for v in ("baseline", "speculative"))
        # each headline line names both costs of its level and class as the summary has them
        assert line.startswith(f"[{h.level}] {h.scope}: TPOT p50 speedup ")
        assert line.endswith(f"; $/M output tokens ${base:.2f} -> ${spec:.2f}"), line
    assert png_size(index.parent / "pareto.png")[0] >= 700
    text = index.read_text()
    # five plots per level (two levels), the plot across levels and the pareto plot
    assert "Throughput per instance vs speed per user" in text and text.count("data:image/png;base64,") == 12
