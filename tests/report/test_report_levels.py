"""Reports right for every number of load levels and classes, through the CLI: plots per level and labelled,
classes before the pooled figure, the batch limit said, TPOT and per-token ITL reconciled, tables on stdout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from doubles.runfactory import make_records, make_run
from support import run_cli

LEVELS = ("c1", "c4", "c16")


def three_level_run(root: Path) -> Path:
    recs = []
    for n, level in enumerate(LEVELS):
        recs += make_records(per_class=6, level=level, errors=0, seed=n, start=1_790_000_000 + 10_000 * n)
    return make_run(root, "three", recs)


def test_a_three_level_two_class_report_draws_and_names_every_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = three_level_run(tmp_path)
    code, out, err = run_cli(["report", run_dir], capsys)
    assert code == 0, err
    page = (run_dir / "report" / "index.html").read_text()
    figures = re.findall(r'<figure><img alt="([^"]*)" src="data:image/png;base64,[^"]*"><figcaption><b>([^<]*)\.</b> '
                         r"([^<]*)</figcaption>", page)  # fmt: skip
    alts = [f[0] for f in figures]
    for level in LEVELS:  # five plots per level, each with the level in its title, caption and file
        mine = [f for f in figures if " at load " in f[0] and f[0].split(" at load ")[1].split(",")[0] == level]
        assert [f[0].split(" at load")[0] for f in mine] == [
            "Latency CDFs", "Latency per prompt class", "Speedups per prompt class", "Acceptance per prompt class",
            "Throughput per prompt class",
        ], alts  # fmt: skip
        assert all(re.search(rf" at load {level}\b", f[2]) for f in mine)
        for stem in ("latency_cdf", "latency_by_class", "speedup", "acceptance", "throughput"):
            assert (run_dir / "report" / f"{stem}-{level}.png").is_file()
    assert not (run_dir / "report" / "speedup.png").exists()  # no unlabelled first-level plot
    assert "Latency CDFs at load c16, all prompt classes pooled" in alts  # pooled only where it says so
    assert alts[-2:] == ["Across load levels, per prompt class",
                         "Throughput per instance vs speed per user, all prompt classes pooled"]  # fmt: skip
    assert "output equivalence:" not in page  # never without its level (the bench test below shows it named)
    # classes first, the pooled row last, in every comparison table
    table = page[page.index("<h2>Comparison at load c1</h2>") : page.index("<h2>Comparison at load c4</h2>")]
    first_cells = re.findall(r'<tr><td class="l">([^<]*)</td>', table)
    assert first_cells.index("open") < first_cells.index("structured") < first_cells.index("all (pooled)")
    assert "<h2>Headline per prompt class: TPOT speedup and cost</h2>" in page
    # the table printed on stdout, the report's locations after it
    assert "Comparison" not in err and "TPOT ms" in out and f"report: {run_dir / 'report' / 'index.html'}" in out
    # the terminal table and summary.md: classes first, the pooled row last, at every level
    assert out.index("│ open ") < out.index("│ structured ") < out.index("│ all (pooled) ")
    md = (run_dir / "report" / "summary.md").read_text()
    assert md.index("| open |") < md.index("| structured |") < md.index("| all (pooled) |")


def test_load_plot_has_a_column_per_class_and_a_labelled_pooled_one(tmp_path: Path) -> None:
    from spectrn.report.plots import plot_load_levels
    from spectrn.run.summary import Summary

    run_dir = three_level_run(tmp_path)
    summary = Summary.model_validate_json((run_dir / "summary.json").read_text())
    captured: list[object] = []
    import spectrn.report.plots as plots

    real_save = plots._save
    plots._save = lambda fig, path: captured.append(fig) or real_save(fig, path)  # type: ignore[assignment]
    try:
        plot_load_levels(summary, tmp_path / "load.png")
    finally:
        plots._save = real_save  # type: ignore[assignment]
    (fig,) = captured
    titles = [ax.get_title() for ax in fig.axes]  # type: ignore[attr-defined]
    assert titles == ["open: TPOT p50", "structured: TPOT p50", "all (pooled): TPOT p50",
                      "open: aggregate output tok/s", "structured: aggregate output tok/s",
                      "all (pooled): aggregate output tok/s"]  # fmt: skip
    for ax in fig.axes:  # type: ignore[attr-defined]
        assert [t.get_text() for t in ax.get_xticklabels()] == list(LEVELS)


def test_acceptance_plot_gives_every_series_its_own_colour(tmp_path: Path) -> None:
    from spectrn.report.plots import plot_acceptance
    from spectrn.run.summary import Summary

    run_dir = make_run(tmp_path, "acc", per_class=6, errors=0, classes=("a", "b", "c"))
    summary = Summary.model_validate_json((run_dir / "summary.json").read_text())
    import spectrn.report.plots as plots

    captured: list[object] = []
    real_save = plots._save
    plots._save = lambda fig, path: captured.append(fig) or real_save(fig, path)  # type: ignore[assignment]
    try:
        plot_acceptance(summary.levels[0], tmp_path / "acc.png")
    finally:
        plots._save = real_save  # type: ignore[assignment]
    (fig,) = captured
    ax = fig.axes[0]  # type: ignore[attr-defined]
    handles, labels = ax.get_legend_handles_labels()
    colours = [tuple(h.patches[0].get_facecolor()) for h in handles]
    assert len(labels) >= 3 and len(set(colours)) == len(colours), list(zip(labels, colours, strict=True))
    assert labels[-1].startswith("all (pooled)")  # the pooled series last


def test_tpot_and_itl_disagreeing_are_explained_on_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path, "disagree", per_class=6, errors=0)
    summary = json.loads((run_dir / "summary.json").read_text())
    sp = summary["levels"][0]["by_prompt_class"]["open"]["speedup"]
    sp["tpot_p50"]["value"], sp["itl_p50"]["value"] = 0.94, 1.15  # as a real open class measured it
    (run_dir / "summary.json").write_text(json.dumps(summary))
    code, _, err = run_cli(["report", run_dir, "--no-table"], capsys)
    assert code == 0, err
    page = (run_dir / "report" / "index.html").read_text()
    assert "open: TPOT 0.94x but per-token ITL 1.15x." in page
    assert "is the mean of its per-token ITL samples" in page
    assert not re.search(r"structured: TPOT [0-9.]+x but", page)  # only where the two disagree


def test_bench_tables_on_stdout_with_the_batch_limit_and_one_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        ["bench", "--local", "--time-scale", "0.05", "--requests", "3", "--max-tokens", "8", "--prompts", "all",
         "--concurrency", "1,8", "--set", "max_num_seqs=4", "--run-id", "lim", "--out-dir", tmp_path, "--no-report"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "TPOT ms" in out and "TPOT ms" not in err  # `spectrn bench ... > table.txt` keeps the table
    assert "note: c8 is above the batch limit (max_num_seqs 4): 8 streams, at most 4 decoded at once" in out
    assert "c1 is above" not in out
    assert "c1: closed loop, 1 stream, the stream starts at once" in out and "1 streams" not in out
    for level in ("c1", "c8"):  # named with its level (a correctness headline leads with it)
        assert re.search(rf"(output equivalence at load {level}|\[{level}\] output equivalence): \d+/\d+", out), out
    assert f"results: {tmp_path / 'lim'}" in err and "results:" not in out


def test_run_dir_usage_reads_as_a_metavar(capsys: pytest.CaptureFixture[str]) -> None:
    for path in (["twin", "calibrate"], ["dashboard"]):
        code, out, _ = run_cli([*path, "--help"], capsys)
        assert code == 0
        assert f"Usage: spectrn {' '.join(path)} [OPTIONS] {{RUN_DIR}}..." in out
        assert "{run_dirs}" not in out and "RUN_DIR..." not in out
