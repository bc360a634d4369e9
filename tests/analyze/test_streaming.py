"""The one-pass, bounded-memory analysis gives the exact numbers (per-request metrics) and the exact numbers
within the sketch's stated relative error (per-token ITL, chunk latency), on a real simulator run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spectrn.analyze.metrics import request_metrics
from spectrn.analyze.run import analyze_folder
from spectrn.analyze.stats import SKETCH_ACCURACY
from spectrn.bench.local import execute, plan_from_config
from spectrn.configuration.sources import build_config
from spectrn.run.records import read_records
from spectrn.runtimes.sim_pair import SimPair


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("streaming")
    cfg = build_config({"runtime": "sim", "bench": {"prompts": "all", "requests": 24, "max_tokens": 200,
                                                    "concurrency": [4]}})  # fmt: skip
    with SimPair(cfg, tmp / "servers", time_scale=0.05) as pair:
        plan = plan_from_config(cfg, dict(pair.endpoints), run_id="stream", out_root=tmp, model=pair.model)
        return execute(plan, cfg, None, quiet=True).run_dir


def test_streaming_analysis_matches_the_exact_numbers(sim_run: Path) -> None:
    _, s = analyze_folder(sim_run)
    recs = [r for r in read_records(sim_run / "requests.jsonl") if not r.warmup]
    for variant in ("baseline", "speculative"):
        ms = [m for r in recs if r.variant == variant and (m := request_metrics(r)) is not None]
        vs = s.levels[0].variants[variant]
        # one number per request: exact (numpy's linear percentiles on every request)
        for field, values in (("ttft_s", [m.ttft for m in ms]), ("tpot_s", [m.tpot for m in ms]),
                              ("e2e_s", [m.e2e for m in ms])):  # fmt: skip
            st = getattr(vs, field)
            for q in (50, 90, 99):
                assert getattr(st, f"p{q}") == pytest.approx(float(np.percentile(values, q)), rel=1e-12), (field, q)
            assert st.relative_error is None
        # per token: every gap g of an event with k tokens counted k times as g / k; mean exact, quantiles
        # within the sketch's relative accuracy of the exact order statistic
        itl = np.array([x for m in ms for x in m.itls])
        assert vs.itl_s.n == itl.size and vs.itl_s.relative_error == SKETCH_ACCURACY
        assert vs.itl_s.mean == pytest.approx(float(itl.mean()), rel=1e-9)
        assert vs.itl_s.min == pytest.approx(float(itl.min())) and vs.itl_s.max == pytest.approx(float(itl.max()))
        for q in (50, 90, 95, 99):
            assert_sketch_quantile(getattr(vs.itl_s, f"p{q}"), itl, q / 100, (variant, q))
        gaps = np.array([g for m in ms for g in m.gaps])
        assert vs.chunk_latency_s.n == gaps.size
        assert_sketch_quantile(vs.chunk_latency_s.p50, gaps, 0.5, (variant, "chunk p50"))


def assert_sketch_quantile(got: float | None, values: np.ndarray, q: float, where: object) -> None:
    """DDSketch's guarantee: the q-quantile is within the relative accuracy of the order statistic at rank
    q * (n - 1) (between the two neighbours where the rank falls between them)."""
    a = np.sort(values)
    r = q * (a.size - 1)
    lo, hi = a[int(np.floor(r))], a[int(np.ceil(r))]
    assert got is not None
    assert lo * (1 - SKETCH_ACCURACY) <= got <= hi * (1 + SKETCH_ACCURACY), (where, got, lo, hi)
