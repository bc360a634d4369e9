"""The whole output of a run comparison, worked out here by hand: the entire ``compare_runs`` dict of two runs
whose summaries are written here (every provenance difference and warning, the configuration as each run ran it,
every p50 row and speedup, classes only one run measured), and the entire Markdown text, speedups table and B / A
table of a comparison built here, with missing values and intervals (n/a), more than 30 configuration differences
and two unclean runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doubles.runfactory import make_run
from spectrn.report.compare import compare_markdown, compare_runs, compare_table, differences_table
from spectrn.run.summary import (
    ClassSummary,
    LevelSummary,
    Load,
    Provenance,
    Requests,
    ServerIdentity,
    Speedup,
    Speedups,
    Stats,
    Summary,
    Throughput,
    VariantSummary,
    Verdict,
)

# ---- compare_runs -----------------------------------------------------------------------------------------------


def _variant(ttft: float, tpot: float, itl: float, e2e: float, tput: float) -> VariantSummary:
    """Seconds and tok/s that are binary fractions (products and ratios exact); means unlike the medians (2x)."""
    s = lambda x: Stats(n=4, p50=x, mean=x * 2)  # noqa: E731
    return VariantSummary(
        ttft_s=s(ttft), tpot_s=s(tpot), itl_s=s(itl), e2e_s=s(e2e), chunk_latency_s=s(tpot), llmperf_itl_s=s(tpot),
        output_tokens_per_s=Throughput(per_request=s(tput)), output_tokens=s(100), requests=Requests(completed=4),
    )  # fmt: skip


def _summaries() -> tuple[Summary, Summary]:
    a = Summary(
        run_id="a", config_label="k4", verdict=Verdict(clean=True, performance=True),
        provenance=Provenance(
            runtime="sim", profile="fast", time_scale=2.0, rescaled=True,
            servers={"baseline": ServerIdentity(model="m", version="0.6.1", profile="upstream"),
                     "speculative": ServerIdentity(model="m")},
        ),
        levels=[
            LevelSummary(
                load=Load.parse("c2"),
                variants={"baseline": _variant(0.25, 0.0625, 0.03125, 1.5, 16.0),
                          "speculative": _variant(0.25, 0.03125, 0.015625, 1.0, 32.0)},
                speedup=Speedups(tpot_p50=Speedup(value=2.0, ci95=(1.5, 2.5)), throughput=Speedup(value=1.25)),
                by_prompt_class={"open": ClassSummary(
                    variants={"speculative": _variant(0.5, 0.125, 0.0625, 2.0, 8.0)},
                    speedup=Speedups(e2e_p50=Speedup(value=0.75, ci95=(0.5, 1.0))),
                )},
            ),
            LevelSummary(load=Load.parse("c6"), variants={"baseline": _variant(1.0, 1.0, 1.0, 1.0, 1.0)}),
        ],
    )  # fmt: skip
    b = Summary(
        run_id="b", config_label="k8", verdict=Verdict(clean=False, performance=False),
        provenance=Provenance(
            runtime="llmperf", engine="llmperf", load_shape="ramp",
            servers={"baseline": ServerIdentity(model="m", version="0.7.0", profile="upstream"),
                     "speculative": ServerIdentity(url="http://s")},
        ),
        levels=[
            LevelSummary(
                load=Load.parse("c2"),
                variants={"baseline": _variant(0.5, 0.0625, 0.0625, 3.0, 16.0),
                          "speculative": _variant(0.125, 0.015625, 0.0078125, 0.5, 64.0)},
                speedup=Speedups(tpot_p50=Speedup(value=4.0, ci95=(3.5, 4.5)),
                                 itl_p50=Speedup(value=1.5, ci95=(1.25, 1.75))),
                by_prompt_class={"code": ClassSummary(
                    variants={"baseline": _variant(1.0, 0.25, 0.125, 4.0, 4.0)},
                    speedup=Speedups(ttft_p50=Speedup(value=1.0)),
                )},
            ),
        ],
    )  # fmt: skip
    return a, b


def _run(root: Path, run_id: str, summary: Summary) -> Path:
    """A run folder (its records at c4, its run.json's provenance the default: endpoints) with this summary."""
    folder = make_run(root, run_id, summary=False, per_class=3, errors=0)
    (folder / "summary.json").write_text(summary.model_dump_json(), encoding="utf-8")
    return folder


def _rows(cls: str, variant: str, spec: list[tuple[str, float | None, float | None, float | None]]) -> list:
    """The p50 rows of one (class, variant) at c2: (metric, A, B, B / A) each."""
    units = {"TTFT p50": "ms", "TPOT p50": "ms", "per-token ITL p50": "ms", "e2e latency p50": "s",
             "tok/s per request p50": "tok/s"}  # fmt: skip
    return [
        {"level": "c2", "prompt_class": cls, "variant": variant, "metric": metric, "unit": units[metric],
         "a": a, "b": b, "ratio": ratio}
        for metric, a, b, ratio in spec
    ]  # fmt: skip


_METRICS = ["TTFT p50", "TPOT p50", "per-token ITL p50", "e2e latency p50", "tok/s per request p50"]


def _none_rows(cls: str, variant: str) -> list:
    return _rows(cls, variant, [(m, None, None, None) for m in _METRICS])


def _speedup(cls: str, metric: str, a: float | None, a_ci: Any, b: float | None, b_ci: Any) -> dict[str, Any]:
    return {"level": "c2", "prompt_class": cls, "metric": metric, "a": a, "a_ci95": a_ci, "b": b, "b_ci95": b_ci}


WARNING = "their figures are not comparable as performance results; compare speedups within each run only"


def test_compare_runs_gives_the_whole_comparison_of_two_hand_written_runs(tmp_path: Path) -> None:
    sa, sb = _summaries()
    cmp = compare_runs(_run(tmp_path, "a", sa), _run(tmp_path, "b", sb))
    assert cmp == {
        "a": {"run_id": "a", "config": "k4", "clean": True,
              "provenance": "runtime sim; server profile fast; "
                            "simulated at time scale 2: figures rescaled to real time"},
        "b": {"run_id": "b", "config": "k8", "clean": False,
              "provenance": "runtime llmperf; load generator llmperf; load shape: ramp"},
        # in the order _provenance lists them, servers sorted; a server's words are model, version, profile
        "provenance_differences": {
            "runtime": ["sim", "llmperf"],
            "server profile": ["fast", None],
            "time scale": [2.0, 1.0],
            "load generator": ["spectrn", "llmperf"],
            "load shape": [None, "ramp"],
            "performance result": [True, False],
            "baseline server": ["m 0.6.1 upstream", "m 0.7.0 upstream"],
            "speculative server": ["m", None],  # B's knows only its URL: no words
        },
        "warnings": [
            f"the runs differ in runtime (sim vs llmperf): {WARNING}",
            f"the runs differ in server profile (fast vs None): {WARNING}",
            f"the runs differ in time scale (2.0 vs 1.0): {WARNING}",
            f"the runs differ in load generator (spectrn vs llmperf): {WARNING}",
        ],
        "pairs": [["c2", "c2"]],  # A's c6 has no match in B
        # the configuration as run (the summaries' provenance, not run.json's endpoints): A simulated, with its
        # profile and time scale; B, an llmperf run, has no sim.* keys at all
        "config_differences": {
            "runtime": ["sim", "llmperf"],
            "sim.image": ["spectrn:0.1.0", None],
            "sim.preset": ["qwen3-32b-trn2", None],
            "sim.profile": ["fast", None],
            "sim.time_scale": [2.0, None],
        },
        "rows": [
            # latencies in ms (e2e in s), B / A of the seconds
            *_rows("all", "baseline", [("TTFT p50", 250.0, 500.0, 2.0), ("TPOT p50", 62.5, 62.5, 1.0),
                    ("per-token ITL p50", 31.25, 62.5, 2.0), ("e2e latency p50", 1.5, 3.0, 2.0),
                    ("tok/s per request p50", 16.0, 16.0, 1.0)]),
            *_rows("all", "speculative", [("TTFT p50", 250.0, 125.0, 0.5), ("TPOT p50", 31.25, 15.625, 0.5),
                    ("per-token ITL p50", 15.625, 7.8125, 0.5), ("e2e latency p50", 1.0, 0.5, 0.5),
                    ("tok/s per request p50", 32.0, 64.0, 2.0)]),
            # "open": only A measured it, and only its speculative variant
            *_none_rows("open", "baseline"),
            *_rows("open", "speculative", [("TTFT p50", 500.0, None, None), ("TPOT p50", 125.0, None, None),
                    ("per-token ITL p50", 62.5, None, None), ("e2e latency p50", 2.0, None, None),
                    ("tok/s per request p50", 8.0, None, None)]),
            # "code": only B measured it, and only its baseline variant
            *_rows("code", "baseline", [("TTFT p50", None, 1000.0, None), ("TPOT p50", None, 250.0, None),
                    ("per-token ITL p50", None, 125.0, None), ("e2e latency p50", None, 4.0, None),
                    ("tok/s per request p50", None, 4.0, None)]),
            *_none_rows("code", "speculative"),
        ],  # fmt: skip
        "speedups": [
            _speedup("all", "TPOT p50", 2.0, [1.5, 2.5], 4.0, [3.5, 4.5]),
            _speedup("all", "ITL p50", None, None, 1.5, [1.25, 1.75]),
            _speedup("all", "e2e p50", None, None, None, None),
            _speedup("all", "TTFT p50", None, None, None, None),
            _speedup("all", "throughput", 1.25, None, None, None),
            _speedup("open", "TPOT p50", None, None, None, None),
            _speedup("open", "ITL p50", None, None, None, None),
            _speedup("open", "e2e p50", 0.75, [0.5, 1.0], None, None),
            _speedup("open", "TTFT p50", None, None, None, None),
            _speedup("open", "throughput", None, None, None, None),
            _speedup("code", "TPOT p50", None, None, None, None),
            _speedup("code", "ITL p50", None, None, None, None),
            _speedup("code", "e2e p50", None, None, None, None),
            _speedup("code", "TTFT p50", None, None, 1.0, None),
            _speedup("code", "throughput", None, None, None, None),
        ],
        "differences": [],  # the runs' requests are at c4, which neither summary has
    }  # fmt: skip


# ---- the views --------------------------------------------------------------------------------------------------


def _cmp() -> dict[str, Any]:
    config = {"draft": ["small", None], **{f"window.k{i:02}": [i, 2 * i] for i in range(1, 31)}}  # 31 differences
    return {
        "a": {"run_id": "run-a", "config": "k4", "clean": False, "provenance": "runtime sim; server profile fast"},
        "b": {"run_id": "run-b", "config": "k8", "clean": False, "provenance": "runtime endpoints"},
        "provenance_differences": {"runtime": ["sim", "endpoints"], "server profile": ["fast", None]},
        "warnings": ["the runs differ in runtime (sim vs endpoints)", "the runs differ in time scale (2.0 vs 1.0)"],
        "pairs": [["c4", "c4"], ["c8", "c8"]],
        "config_differences": config,
        "rows": [],
        "speedups": [
            {"level": "c4", "prompt_class": "all", "metric": "TPOT p50", "a": 2.5, "a_ci95": [2.4, 2.6],
             "b": 3.1, "b_ci95": [3.0, 3.2]},
            {"level": "c4", "prompt_class": "all", "metric": "TTFT p50", "a": 1.2, "a_ci95": None,
             "b": None, "b_ci95": None},
            {"level": "c4", "prompt_class": "open", "metric": "TPOT p50", "a": None, "a_ci95": None,
             "b": 1.5, "b_ci95": [1.25, 1.75]},
            {"level": "c8", "prompt_class": "open", "metric": "TPOT p50", "a": 2.0, "a_ci95": None,
             "b": 1.75, "b_ci95": None},
        ],
        "differences": [
            {"level": "c4", "prompt_class": "all", "variant": "speculative", "metric": "TPOT p50", "ratio": 0.8123,
             "ci95": [0.8, 0.825]},
            {"level": "c4", "prompt_class": "all", "variant": "speculative", "metric": "aggregate tok/s",
             "ratio": 1.25, "ci95": None},
            {"level": "c4", "prompt_class": "all", "variant": "baseline", "metric": "TPOT p50", "ratio": None,
             "ci95": None},
            {"level": "c8", "prompt_class": "all", "variant": "baseline", "metric": "TPOT p50", "ratio": 1.0,
             "ci95": [0.99949, 1.0004]},
        ],
    }  # fmt: skip


def _cells(table: Any) -> list[list[str]]:
    columns = [[str(c) for c in col._cells] for col in table.columns]
    return [list(r) for r in zip(*columns, strict=True)]


def _columns(table: Any) -> list[tuple[str, str, bool]]:
    return [(str(c.header), c.justify, c.no_wrap) for c in table.columns]


MARKDOWN = (
    "### spectrn: `run-b` (`k8`) vs `run-a` (`k4`)\n"
    "\n"
    "- A `run-a`: runtime sim; server profile fast\n"
    "- B `run-b`: runtime endpoints\n"
    "\n"
    "**WARNING: the runs differ in runtime \\(sim vs endpoints\\)**\n"
    "**WARNING: the runs differ in time scale \\(2.0 vs 1.0\\)**\n"
    "\n"
    "Provenance differences (A → B):\n"
    "\n"
    '- runtime: `"sim"` → `"endpoints"`\n'
    '- server profile: `"fast"` → `null`\n'
    "\n"
    "| load | prompt class | speedup of | A | B | B − A |\n"
    "|---|---|---|---|---|---|\n"
    "| c4 | all | TPOT p50 | 2.50x [2.40, 2.60] | 3.10x [3.00, 3.20] | +0.60 |\n"
    "| c4 | all | TTFT p50 | 1.20x | n/a | n/a |\n"
    "| c4 | open | TPOT p50 | n/a | 1.50x [1.25, 1.75] | n/a |\n"
    "| c8 | open | TPOT p50 | 2.00x | 1.75x | -0.25 |\n"
    "\n"
    "B / A with 95% bootstrap intervals (each run's requests resampled on its own):\n"
    "\n"
    "| load | prompt class | variant | metric | B / A [95% CI] |\n"
    "|---|---|---|---|---|\n"
    "| c4 | all | speculative | TPOT p50 | 0.812x [0.800, 0.825] |\n"
    "| c4 | all | speculative | aggregate tok/s | 1.250x |\n"
    "| c4 | all | baseline | TPOT p50 | n/a |\n"
    "| c8 | all | baseline | TPOT p50 | 1.000x [0.999, 1.000] |\n"
    "\n"
    "Configuration differences (A → B):\n"
    "\n"
    '- `draft`: `"small"` → `null`\n'
    + "".join(f"- `window.k{i:02}`: `{i}` → `{2 * i}`\n" for i in range(1, 30))  # the first 30: k30 is left out
    + "\n"
    "**run run-a is not clean**\n"
    "\n"
    "**run run-b is not clean**\n"
)


def test_compare_markdown_is_this_whole_text() -> None:
    assert compare_markdown(_cmp()) == MARKDOWN


def test_compare_markdown_of_runs_alike_and_clean_has_only_the_title_and_the_speedups() -> None:
    cmp = _cmp() | {"provenance_differences": {}, "warnings": [], "differences": [], "config_differences": {}}
    cmp["a"] = cmp["a"] | {"clean": True}
    cmp["b"] = cmp["b"] | {"clean": True}
    cmp["speedups"] = cmp["speedups"][:1]
    assert compare_markdown(cmp) == (
        "### spectrn: `run-b` (`k8`) vs `run-a` (`k4`)\n"
        "\n"
        "- A `run-a`: runtime sim; server profile fast\n"
        "- B `run-b`: runtime endpoints\n"
        "\n"
        "\n"
        "| load | prompt class | speedup of | A | B | B − A |\n"
        "|---|---|---|---|---|---|\n"
        "| c4 | all | TPOT p50 | 2.50x [2.40, 2.60] | 3.10x [3.00, 3.20] | +0.60 |\n"
    )


def test_compare_table_names_each_scope_once_and_shows_b_minus_a() -> None:
    t = compare_table(_cmp())
    assert str(t.title) == "speedups: A = run-a (k4)  vs  B = run-b (k8)"
    assert str(t.caption) == "A: runtime sim; server profile fast\nB: runtime endpoints"
    assert _columns(t) == [
        ("load", "left", True), ("prompt class", "left", True), ("speedup of", "left", True),
        ("A [95% CI]", "right", True), ("B [95% CI]", "right", True), ("B - A", "right", True),
    ]  # fmt: skip
    assert _cells(t) == [
        ["c4", "all", "TPOT p50", "2.50x [2.40, 2.60]", "3.10x [3.00, 3.20]", "+0.60"],  # 3.1 - 2.5
        ["", "", "TTFT p50", "1.20x", "n/a", "n/a"],
        ["c4", "open", "TPOT p50", "n/a", "1.50x [1.25, 1.75]", "n/a"],
        ["c8", "open", "TPOT p50", "2.00x", "1.75x", "-0.25"],  # 1.75 - 2.0
    ]


def test_differences_table_names_each_scope_once_and_gives_b_over_a_with_three_digits() -> None:
    t = differences_table(_cmp())
    assert str(t.title) == "B / A: B = run-b  over  A = run-a (95% CI, each run resampled)"
    assert _columns(t) == [
        ("load", "left", True), ("prompt class", "left", True), ("variant", "left", True), ("metric", "left", True),
        ("B / A [95% CI]", "right", True),
    ]  # fmt: skip
    assert _cells(t) == [
        ["c4", "all", "speculative", "TPOT p50", "0.812x [0.800, 0.825]"],
        ["", "", "", "aggregate tok/s", "1.250x"],
        ["c4", "all", "baseline", "TPOT p50", "n/a"],
        ["c8", "all", "baseline", "TPOT p50", "1.000x [0.999, 1.000]"],
    ]
