"""Run B against run A (``spectrn compare``): every row is B / A, per level pair, scope and variant, with the
ratios worked out by hand from the records' own timings."""

from __future__ import annotations

import pytest

from spectrn.analyze.difference import differences, scoped
from spectrn.analyze.summary import summarize
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta

N = 10


def run(decode_s: float, level: str) -> tuple[list[RequestRecord], RunMeta]:
    """N baseline requests, one a second, each 10 tokens: 1 at 0.1 s, then 9 after ``decode_s`` stretched by
    0 to 4 % (i % 5)."""
    recs = [
        RequestRecord(
            variant="baseline",
            index=i,
            prompt_id=f"p{i}",
            prompt_class="structured",
            level=level,
            sent_at=1000.0 + i,
            ttft=0.1,
            e2e=0.1 + decode_s * (1 + 0.01 * (i % 5)),
            chunk_times=[0.1, 0.1 + decode_s * (1 + 0.01 * (i % 5))],
            chunk_tokens=[1, 9],
            completion_tokens=10,
            status=200,
        )  # fmt: skip
        for i in range(N)
    ]
    return recs, RunMeta(run_id=level, spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())


def test_every_row_is_b_over_a() -> None:
    # TPOT median: the stretches 0, 0, 1, 1, 2, 2, 3, 3, 4, 4 % have median 2 %: 1.02 x 0.36 / 9 in A, half in B;
    # walls: first send 1000 to the last end, request 9's (stretch 4 %): 9.1 + 1.04 x 0.36 = 9.4744 s in A and
    # 9.1 + 1.04 x 0.18 = 9.2872 s in B, 100 tokens each; one price: the $/M ratio is the walls' ratio
    ra, ma = run(0.36, "c4")
    rb, mb = run(0.18, "c8")
    sa, sb = summarize(ra, ma), summarize(rb, mb)
    rows = differences(sa, sb, scoped(ra, ma), scoped(rb, mb), [("c4", "c8")])
    got = {(r["level"], r["prompt_class"], r["variant"], r["metric"]): r for r in rows}
    expected = {"TPOT p50": 0.5, "aggregate tok/s": 9.4744 / 9.2872, "$/M output tokens": 9.2872 / 9.4744}
    assert list(got) == [
        ("c4 vs c8", cls, "baseline", metric) for cls in ("all", "structured") for metric in expected
    ]  # "all" first, then each class, as summary.json's scopes
    for (_, _, _, metric), row in got.items():
        assert row["ratio"] == pytest.approx(expected[metric], rel=1e-9), metric
        lo, hi = row["ci95"]
        assert lo <= row["ratio"] <= hi, (metric, row)


def test_a_level_compared_with_itself_is_named_once_and_a_missing_variant_is_skipped() -> None:
    ra, ma = run(0.36, "c4")
    spec = [r.model_copy(update={"variant": "speculative"}) for r in ra]
    sa, sb = summarize(ra, ma), summarize(ra + spec, ma)
    rows = differences(sa, sb, scoped(ra, ma), scoped(ra + spec, ma), [("c4", "c4")])
    assert {(r["level"], r["variant"]) for r in rows} == {("c4", "baseline")}  # A has no speculative
    assert all(r["ratio"] == pytest.approx(1.0) for r in rows)
