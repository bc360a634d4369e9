"""The dashboard body of hand-made ``DashboardRun``s, written out here: the time range, every widget's title
and place on the grid (levels in load order, "all" before each class), a whole metric widget, the colours of a
sweep's configs, the goodput widget; and the run's text widget from a real summary."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from doubles.runfactory import make_run
from spectrn.publish import dashboard
from spectrn.publish.dashboard import DashboardRun
from spectrn.run.folder import RunFolder

START = 1_790_000_000.0  # 2026-09-21T14:13:20Z
END = START + 100
PANELS = [
    "TTFT (s)", "TPOT (s)", "per-token ITL (s)", "e2e latency (s)", "output throughput (tok/s per request)",
    "acceptance", "errors / requests", "output tokens per request",
]  # fmt: skip
SPEEDUP = "speedups over the run (baseline / speculative; > 1 = faster)"
GOODPUT = "goodput (meets every per-request SLO)"


def _run(config: str = "cfg/k7", **kw: Any) -> DashboardRun:
    fields: dict[str, Any] = {"run_id": "r1", "config_label": config, "levels": ["c10", "c2"],
                              "prompt_classes": ["open"], "variants": ["baseline", "speculative"], "start": START,
                              "end": END, "has_acceptance": True, "markdown": "# r1"}  # fmt: skip
    return DashboardRun(**(fields | kw))


def _body(*runs: DashboardRun) -> dict[str, Any]:
    return dashboard.build_dashboard(list(runs), namespace="Spectrn", region="eu-west-1")


def _widget(body: dict[str, Any], title: str) -> dict[str, Any]:
    (w,) = [w for w in body["widgets"] if w["properties"].get("title") == title]
    return w


def test_a_sweeps_range_runs_a_minute_before_the_first_send_to_two_after_the_last_end_and_its_text_joins_all() -> None:
    body = _body(_run(), _run("cfg/k3", start=START - 600, end=END + 600, markdown="# k3"))
    # START - 600 - 60: 14:13:20 - 11 min = 14:02:20; END + 600 + 120 = START + 820 s: 14:13:20 + 13:40 = 14:27:00
    assert (body["start"], body["end"], body["periodOverride"]) == (
        "2026-09-21T14:02:20.000Z", "2026-09-21T14:27:00.000Z", "inherit"
    )  # fmt: skip
    # a sweep's text widget: each config's text, in the order given, between rules
    assert body["widgets"][0]["properties"]["markdown"] == "# r1\n\n---\n\n# k3"


def test_widgets_in_load_order_all_first_on_a_four_wide_grid() -> None:
    body = _body(_run(goodput={("c2", "all", "speculative"): ["GoodputRequests", "GoodputShare"]}))
    got = [(w["properties"].get("title"), w["x"], w["y"], w["width"], w["height"]) for w in body["widgets"]]
    expect: list[tuple[str | None, int, int, int, int]] = [(None, 0, 0, 24, 7)]
    y = 7
    for level in ("c2", "c10"):  # c2 before c10: load order, not text order
        for cls in ("all", "open"):
            for i, panel in enumerate(PANELS):  # 8 panels: two lines of four, 6 x 6 each
                expect.append((f"{cls} · {level} · {panel}", 6 * (i % 4), y + 6 * (i // 4), 6, 6))
            if (level, cls) == ("c2", "all"):  # the speedups, then goodput beside them
                expect += [
                    (f"{cls} · {level} · {SPEEDUP}", 0, y + 12, 16, 3),
                    (f"all · c2 · {GOODPUT}", 16, y + 12, 8, 3),
                ]
            else:
                expect.append((f"{cls} · {level} · {SPEEDUP}", 0, y + 12, 24, 3))
            y += 15
    assert got == expect
    assert body["widgets"][0]["properties"] == {"markdown": "# r1"}


def test_a_class_panel_draws_each_variants_percentiles_in_its_colour() -> None:
    w = _widget(_body(_run()), "open · c2 · TTFT (s)")
    dims = ["RunId", "r1", "Config", "cfg/k7", "Load", "c2"]
    base = [*dims, "Variant", "baseline", "PromptClass", "open"]
    spec = [*dims, "Variant", "speculative", "PromptClass", "open"]
    assert w["type"] == "metric"
    assert w["properties"] == {
        "title": "open · c2 · TTFT (s)",
        "view": "bar",
        "region": "eu-west-1",
        "metrics": [
            ["Spectrn", "TTFT", *base, {"stat": "p50", "label": "baseline p50", "color": "#1f77b4"}],
            ["Spectrn", "TTFT", *base, {"stat": "p90", "label": "baseline p90", "color": "#1f77b4"}],
            ["Spectrn", "TTFT", *base, {"stat": "p99", "label": "baseline p99", "color": "#1f77b4"}],
            ["Spectrn", "TTFT", *spec, {"stat": "p50", "label": "speculative p50", "color": "#ff7f0e"}],
            ["Spectrn", "TTFT", *spec, {"stat": "p90", "label": "speculative p90", "color": "#ff7f0e"}],
            ["Spectrn", "TTFT", *spec, {"stat": "p99", "label": "speculative p99", "color": "#ff7f0e"}],
        ],
        "stat": "p50",
        "period": 60,
        "setPeriodToTimeRange": True,
        "liveData": False,
    }


def test_acceptance_is_drawn_for_the_speculative_variant_of_all_classes_only() -> None:
    body = _body(_run())
    agg = [
        m[1:-1] + [m[-1]["stat"], m[-1]["label"]]
        for m in _widget(body, "all · c2 · acceptance")["properties"]["metrics"]
    ]
    dims = ["RunId", "r1", "Config", "cfg/k7", "Load", "c2", "Variant"]
    assert agg == [
        ["TokensPerChunk", *dims, "baseline", "Average", "baseline tokens per chunk"],
        ["AcceptanceRate", *dims, "speculative", "Average", "speculative acceptance %"],
        ["MeanAcceptanceLength", *dims, "speculative", "Average", "speculative mean accepted length"],
    ]
    per_class = _widget(body, "open · c2 · acceptance")["properties"]["metrics"]
    assert [(m[1], m[9]) for m in per_class] == [("TokensPerChunk", "baseline"), ("TokensPerChunk", "speculative")]
    errors = _widget(body, "all · c2 · errors / requests")["properties"]["metrics"]
    assert [(m[-1]["stat"], m[-1]["label"]) for m in errors] == [
        ("Sum", "baseline errors"), ("SampleCount", "baseline requests"),
        ("Sum", "speculative errors"), ("SampleCount", "speculative requests"),
    ]  # fmt: skip


def test_a_sweeps_configs_keep_baseline_blue_and_take_the_next_colour_each() -> None:
    body = _body(_run("cfg/k3"), _run("cfg/k7"))
    metrics = _widget(body, "all · c2 · TPOT (s)")["properties"]["metrics"]
    p50 = [(m[-1]["label"], m[-1]["color"]) for m in metrics if m[-1]["stat"] == "p50"]
    assert p50 == [
        ("cfg/k3 baseline p50", "#1f77b4"), ("cfg/k3 speculative p50", "#ff7f0e"),
        ("cfg/k7 baseline p50", "#1f77b4"), ("cfg/k7 speculative p50", "#2ca02c"),
    ]  # fmt: skip
    speed = _widget(body, f"all · c2 · {SPEEDUP}")["properties"]["metrics"]
    assert [m[0]["label"] for m in speed if isinstance(m[0], dict)][:2] == [
        "cfg/k3 TPOT p50 speedup",
        "cfg/k3 ITL p50 speedup",
    ]


def test_a_run_without_a_speculative_variant_has_no_speedups() -> None:
    body = _body(_run(variants=["baseline"]))
    assert not [w for w in body["widgets"] if SPEEDUP in w["properties"].get("title", "")]


def test_the_goodput_widget_shows_the_published_metrics_as_averages() -> None:
    body = _body(_run(goodput={("c2", "open", "speculative"): ["GoodputRequests", "GoodputShare"]}))
    w = _widget(body, f"open · c2 · {GOODPUT}")
    dims = ["RunId", "r1", "Config", "cfg/k7", "Load", "c2", "Variant", "speculative", "PromptClass", "open"]
    assert w["properties"] == {
        "title": f"open · c2 · {GOODPUT}",
        "view": "singleValue",
        "region": "eu-west-1",
        "metrics": [
            ["Spectrn", "GoodputRequests", *dims, {"stat": "Average", "label": "speculative goodput req/s",
                                                   "color": "#ff7f0e"}],
            ["Spectrn", "GoodputShare", *dims, {"stat": "Average", "label": "speculative % within SLO",
                                                "color": "#ff7f0e"}],
        ],
        "period": 60,
        "setPeriodToTimeRange": True,
        "liveData": False,
    }  # fmt: skip


def test_dashboard_run_shifts_the_time_range_and_keeps_the_callers_run_id(tmp_path: Path) -> None:
    start = time.time() - 3600
    run = RunFolder.open(make_run(tmp_path, per_class=2, start=start))
    plain = dashboard.dashboard_run(run)
    view = dashboard.dashboard_run(run, run_id="sweep 9", time_shift_s=7200.0)
    assert (view.start, view.end) == (plain.start + 7200.0, plain.end + 7200.0)
    assert view.run_id == "sweep 9" and plain.run_id == "run-1"
    assert (view.levels, view.prompt_classes, view.variants) == (
        ["c4"],
        ["open", "structured"],
        ["baseline", "speculative"],
    )
    assert plain.start == min(r.sent_at for r in run.records())


@pytest.mark.parametrize(
    ("name", "expect"),
    [("r_1", "spectrn-r_1"), ("a.b c", "spectrn-a-b-c"), ("x" * 300, "spectrn-" + "x" * 247)],
    ids=["underscore", "dot-space", "long"],
)
def test_dashboard_names_keep_letters_digits_dash_underscore_within_255(name: str, expect: str) -> None:
    assert dashboard.dashboard_name("spectrn", name) == expect


def test_the_text_widget_names_the_run_its_verdict_speedups_of_the_first_level_and_acceptance(
    tmp_path: Path,
) -> None:
    from doubles.runfactory import make_records
    from spectrn.analyze.run import ensure_summary

    records = make_records(per_class=3, level="c2") + make_records(per_class=3, level="c8", seed=5, errors=0)
    run = RunFolder.open(make_run(tmp_path, records=records))
    s = ensure_summary(run)
    lines = dashboard.run_markdown(run.meta.config, s).split("\n")
    assert lines[0] == "# spectrn run run-1"
    assert lines[1].startswith("target **qwen3-32b**, draft **qwen3-1.7b**, window **7**, mode fused")
    assert not s.verdict.performance  # too few decode events: said, with the reasons
    assert lines[2] == "**NOT A PERFORMANCE RESULT:** " + "; ".join(s.verdict.reasons)
    table = lines[lines.index("| prompt class | TPOT p50 speedup | ITL p50 | e2e p50 | throughput |") :]
    assert table[1] == "|---|---|---|---|---|"
    c2 = next(lv for lv in s.levels if lv.label == "c2")  # the first load level, whatever else ran
    for row, cls in zip(table[2:4], ("open", "structured"), strict=True):
        sp = c2.by_prompt_class[cls].speedup
        assert sp is not None and sp.tpot_p50 is not None and sp.throughput is not None
        cells = row.split(" | ")
        assert (cells[0], cells[1], cells[-1]) == (f"| {cls}", sp.tpot_p50.text(), f"{sp.throughput.text()} |")
    # acceptance.json: rate 0.62, mean accepted length 3.4, shown as a percentage and to two decimals
    assert "\nacceptance (counters) rate 62.0 %, mean acceptance length 3.40\n" in "\n".join(lines) + "\n"
    assert lines[-1].startswith("**not clean:** ")


@pytest.mark.parametrize("scale", [0.5, 4.0])
def test_the_text_widget_says_a_simulated_runs_time_scale_either_way(tmp_path: Path, scale: float) -> None:
    from spectrn.analyze.run import ensure_summary

    run = RunFolder.open(make_run(tmp_path, per_class=2))
    s = ensure_summary(run)
    assert "simulated at time scale" not in dashboard.run_markdown(run.meta.config, s)  # real time: nothing to say
    scaled = s.model_copy(update={"provenance": s.provenance.model_copy(update={"time_scale": scale})})
    lines = dashboard.run_markdown(run.meta.config, scaled).split("\n")
    assert lines[2] == f"simulated at time scale {scale:g}; figures rescaled to real time"
