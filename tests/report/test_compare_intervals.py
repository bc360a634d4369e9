"""`spectrn compare` gives B / A of TPOT p50, aggregate throughput and $/M with intervals, on two real simulator
runs, in every output; the points are checked against the two summaries computed here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

BENCH = ["bench", "--local", "--requests", "8", "--concurrency", "2", "--time-scale", "0.05", "--max-tokens", "16"]


@pytest.mark.slow
def test_compare_prints_intervals_on_the_ratios_of_two_runs(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    out = tmp_path / "results"
    for run_id, window in (("a", "7"), ("b", "5")):
        code, _, err = cli(*BENCH, "--out-dir", out, "--run-id", run_id, "--window", window)
        assert code == 0, err
    code, text, err = cli("compare", out / "a", out / "b", "-o", "json")
    assert code == 0, err
    cmp = json.loads(text)
    sa = json.loads((out / "a" / "summary.json").read_text())
    sb = json.loads((out / "b" / "summary.json").read_text())
    rows = {(r["prompt_class"], r["variant"], r["metric"]): r for r in cmp["differences"]}
    for variant in ("baseline", "speculative"):
        va, vb = sa["levels"][0]["variants"][variant], sb["levels"][0]["variants"][variant]
        expected = {
            "TPOT p50": vb["tpot_s"]["p50"] / va["tpot_s"]["p50"],
            "aggregate tok/s": vb["output_tokens_per_s"]["aggregate"] / va["output_tokens_per_s"]["aggregate"],
            "$/M output tokens": vb["cost"]["usd_per_million_output_tokens"]
            / va["cost"]["usd_per_million_output_tokens"],
        }
        for metric, ratio in expected.items():
            row = rows[("all", variant, metric)]
            assert row["ratio"] == pytest.approx(ratio, rel=1e-9), (variant, metric)
            lo, hi = row["ci95"]
            # 8 requests: a median's bootstrap takes few values, so the point may sit on a bound
            assert lo <= ratio <= hi and hi - lo > 0.005 * ratio, (variant, metric, row)
        # one price for both runs: the $/M ratio is the inverse of the throughput ratio, bounds swapped
        thr, cost = rows[("all", variant, "aggregate tok/s")], rows[("all", variant, "$/M output tokens")]
        assert cost["ci95"] == pytest.approx([1 / thr["ci95"][1], 1 / thr["ci95"][0]], rel=1e-9)
    code, table, err = cli("compare", out / "a", out / "b")
    assert code == 0, err
    assert "B / A" in table and "aggregate tok/s" in table
    lo, hi = rows[("all", "speculative", "aggregate tok/s")]["ci95"]
    assert f"[{lo:.3f}, {hi:.3f}]" in table
    md = tmp_path / "cmp.md"
    code, _, err = cli("compare", out / "a", out / "b", "--markdown", md)
    assert code == 0, err
    text_md = md.read_text()
    ratio = rows[("all", "baseline", "TPOT p50")]["ratio"]
    lo, hi = rows[("all", "baseline", "TPOT p50")]["ci95"]
    assert f"| baseline | TPOT p50 | {ratio:.3f}x [{lo:.3f}, {hi:.3f}] |" in text_md
