"""Repeated runs: the point is the mean of the runs' figures; the two-stage interval widens with the between-run
spread and does not when runs agree (``spectrn.analyze.repeats``); ``spectrn bench --repeats`` end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from spectrn.analyze.repeats import repeated_figure, two_stage_interval

RESAMPLES = 1000
N_RUNS = 5
N_REQUESTS = 200


def _run(values: np.ndarray, seed: int) -> tuple[float, np.ndarray, tuple[float, float]]:
    """One synthetic run's median, its request-level bootstrap medians and its own 95% percentile interval,
    computed here from the definitions (not by spectrn)."""
    gen = np.random.default_rng(seed)
    idx = gen.integers(0, values.size, (RESAMPLES, values.size))
    reps = np.median(values[idx], axis=1)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    return float(np.median(values)), reps, (float(lo), float(hi))


def _runs(shifts: list[float], seed: int) -> list[tuple[float, np.ndarray, tuple[float, float]]]:
    """Runs of TPOT-like values (lognormal around 20 ms, CV about 0.3), run i scaled by ``shifts[i]``."""
    gen = np.random.default_rng(seed)
    return [_run(0.020 * s * gen.lognormal(0.0, 0.3, N_REQUESTS), seed + 1 + i) for i, s in enumerate(shifts)]


def _width(ci: tuple[float, float] | None) -> float:
    assert ci is not None
    return ci[1] - ci[0]


def test_runs_that_differ_widen_the_interval_beyond_any_single_run() -> None:
    runs = _runs([0.8, 0.9, 1.0, 1.1, 1.25], seed=1)  # a between-run spread of about 17% (CV)
    fig = repeated_figure([(p, r) for p, r, _ in runs], seed=0, resamples=RESAMPLES)
    points = [p for p, _, _ in runs]
    assert fig.point == pytest.approx(sum(points) / len(points), rel=1e-12)
    assert fig.runs == pytest.approx(points)
    mean = sum(points) / len(points)
    sd = (sum((p - mean) ** 2 for p in points) / (len(points) - 1)) ** 0.5
    assert fig.cv == pytest.approx(sd / mean, rel=1e-9)
    widest_single = max(_width(ci) for _, _, ci in runs)
    assert fig.ci95 is not None
    assert _width(fig.ci95) > 1.5 * widest_single, (fig.ci95, widest_single)
    assert fig.ci95[0] < mean < fig.ci95[1]


def test_runs_that_agree_give_about_a_single_runs_width() -> None:
    ratios = []
    for seed in range(5):
        runs = _runs([1.0] * N_RUNS, seed=100 + 10 * seed)
        ci = two_stage_interval([(p, r) for p, r, _ in runs], seed=seed, resamples=RESAMPLES)
        single = float(np.mean([_width(c) for _, _, c in runs]))
        ratios.append(_width(ci) / single)
    # no between-run spread: the mean of 5 runs is known better than one run (sqrt(1/5) = 0.45 of its width),
    # and the two-stage bootstrap counts within-run noise twice (sqrt((2N - 1) / N^2) = 0.6): not wider than one run
    assert 0.35 < float(np.median(ratios)) < 1.0, ratios


def test_a_run_without_request_values_contributes_its_point_and_too_few_runs_give_no_interval() -> None:
    runs = _runs([1.0, 1.0], seed=7)
    fig = repeated_figure([(runs[0][0], runs[0][1]), (0.030, None)], seed=0, resamples=RESAMPLES)
    assert fig.point == pytest.approx((runs[0][0] + 0.030) / 2)
    assert fig.ci95 is not None and fig.ci95[1] > runs[0][0]
    one = repeated_figure([(runs[0][0], runs[0][1]), (None, None)], seed=0, resamples=RESAMPLES)
    assert one.point == pytest.approx(runs[0][0]) and one.ci95 is None and one.cv is None
    assert one.runs == [pytest.approx(runs[0][0]), None]


# ---- through the CLI -------------------------------------------------------------------------------------


def _schema_errors(doc: object, name: str) -> list[str]:
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / name).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]


def _summary_points(summary: dict[str, object]) -> dict[tuple[str, str, str, str], float | None]:
    """Each figure repeats.json averages, read from one summary.json as plain JSON."""
    out: dict[tuple[str, str, str, str], float | None] = {}
    for lv in summary["levels"]:  # type: ignore[attr-defined]
        scopes = [("all", {"variants": lv["variants"], "speedup": lv["speedup"]}), *lv["by_prompt_class"].items()]
        for cls, cs in scopes:
            for v, vs in cs["variants"].items():
                key = (lv["load"]["label"], cls, v)
                out[(*key, "tpot_p50_s")] = vs["tpot_s"]["p50"]
                out[(*key, "ttft_p50_s")] = vs["ttft_s"]["p50"]
                out[(*key, "output_tokens_per_s")] = vs["output_tokens_per_s"]["aggregate"]
                out[(*key, "usd_per_million_output_tokens")] = vs["cost"]["usd_per_million_output_tokens"]
            for name in ("tpot_p50", "ttft_p50", "aggregate_throughput"):
                out[(lv["load"]["label"], cls, "speedup", name)] = cs["speedup"][name]["value"]
    return out


@pytest.mark.slow
def test_bench_repeats_writes_analysable_runs_and_a_valid_aggregate(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    from contract import assert_valid_run_folder

    out = tmp_path / "res"
    code, stdout, stderr = cli(
        "bench", "--local", "--repeats", "3", "--requests", "6", "--concurrency", "2", "--time-scale", "0.05",
        "--max-tokens", "16", "--out-dir", str(out), "--run-id", "rep", "--no-report", "-o", "json",
    )  # fmt: skip
    assert code == 0, stderr
    parent = out / "rep"
    folders = [parent / f"rep-r{i}" for i in (1, 2, 3)]
    summaries = [assert_valid_run_folder(d) for d in folders]
    assert [s["run_id"] for s in summaries] == ["rep-r1", "rep-r2", "rep-r3"]
    doc = json.loads((parent / "repeats.json").read_text())
    assert json.loads(stdout) == doc  # -o json: the aggregate is the one document on stdout
    assert not _schema_errors(doc, "repeats.schema.json")
    assert doc["repeats"] == 3 and [r["folder"] for r in doc["runs"]] == ["rep-r1", "rep-r2", "rep-r3"]
    per_run = [_summary_points(s) for s in summaries]
    checked = 0
    for lv in doc["levels"]:
        for cls, sc in lv["scopes"].items():
            figs = [((v, name), f) for v, rv in sc["variants"].items() for name, f in rv.items()]
            figs += [(("speedup", name), f) for name, f in sc["speedup"].items()]
            for (who, name), f in figs:
                values = [pts[(lv["label"], cls, who, name)] for pts in per_run]
                assert f["runs"] == pytest.approx(values)
                expected = sum(values) / 3  # type: ignore[arg-type]
                assert f["point"] == pytest.approx(expected, rel=1e-12), (lv["label"], cls, who, name)
                assert f["ci95"] is not None and f["ci95"][0] <= f["ci95"][1]
                checked += 1
    assert checked >= 11  # 4 figures x 2 variants + 3 speedups, at least in the pooled scope
    assert "repeats:" in stderr and "run 3 of 3" in stderr

    # every run folder stays a normal run: analyze and compare read it
    code, _, err = cli("analyze", str(folders[0]), "--no-report", "-o", "json")
    assert code == 0, err
    code, cmp_out, err = cli("compare", str(folders[0]), str(folders[2]), "-o", "json")
    assert code == 0, err
    assert json.loads(cmp_out)["differences"]


def test_repeats_zero_is_a_usage_error_naming_the_flag(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    code, stdout, stderr = cli("bench", "--local", "--repeats", "0", "--out-dir", str(tmp_path / "o"))
    assert code == 2
    assert "--repeats 0 is below 1" in stderr and "N >= 1" in stderr
    assert not (tmp_path / "o").exists()


def test_repeats_in_the_cluster_is_refused_naming_the_fix(cli: Callable[..., tuple[int, str, str]]) -> None:
    code, _, stderr = cli("bench", "--repeats", "2")
    assert code == 2
    assert "--repeats 2 needs a local run" in stderr and "--local" in stderr


def test_repeats_refuses_a_folder_that_already_holds_something(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "run.json").write_text("{}")
    code, _, stderr = cli("bench", "--local", "--repeats", "2", "--out-dir", str(tmp_path), "--run-id", "rep")
    assert code == 2
    assert "already exists and is not an empty folder" in stderr
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == ["run.json"]
