"""Each figure of one run that ``repeats`` averages carries request-level bootstrap values of that figure (the
right column, the right direction): their median sits at the value worked out by hand from the records."""

from __future__ import annotations

import numpy as np
import pytest

from spectrn.analyze.difference import scoped
from spectrn.analyze.repeats import _speedup_figures, _variant_figures
from spectrn.analyze.settings import Settings
from spectrn.analyze.summary import summarize
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta

N = 40
RESAMPLES = 400


def records() -> list[RequestRecord]:
    """N pairs sent 10 ms apart, 10 tokens each: baseline TTFT 0.1 s then 9 tokens after 0.36 s x j, speculative
    TTFT 0.05 s then 9 tokens after 0.18 s x j, with j = 1 + 0.01 (i % 5)."""
    out = []
    for i in range(N):
        j = 1 + 0.01 * (i % 5)
        for variant, ttft, decode in (("baseline", 0.1, 0.36 * j), ("speculative", 0.05, 0.18 * j)):
            out.append(RequestRecord(
                variant=variant, index=i, prompt_id=f"p{i}", prompt_class="structured", level="c4",
                sent_at=1000.0 + 0.01 * i, ttft=ttft, e2e=ttft + decode, chunk_times=[ttft, ttft + decode],
                chunk_tokens=[1, 9], completion_tokens=10, status=200,
            ))  # fmt: skip
    return out


def test_a_variants_bootstrap_values_are_of_its_own_figure() -> None:
    recs = records()
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    summary = summarize(recs, meta)
    accs = scoped(recs, meta)
    vs = summary.levels[0].variants["baseline"]
    figs = _variant_figures(accs[("c4", "all", "baseline")], vs, Settings.of(meta, 0), seed=0, resamples=RESAMPLES)
    # TPOT: 0.04 s x j, median j 1.02; TTFT 0.1 s for every request
    assert np.median(figs["tpot_p50_s"][1]) == pytest.approx(0.0408, rel=1e-9)
    assert np.median(figs["ttft_p50_s"][1]) == pytest.approx(0.1, rel=1e-9)
    # 400 tokens from the first send (1000) to the last end (1000.39 + 0.1 + 0.36 x 1.04 = 1000.8644): 0.8644 s;
    # $/M at $44.70/h on half an instance: 22.35 / (tok/s x 3600) x 1e6
    tok_s = 400 / 0.8644
    assert np.median(figs["output_tokens_per_s"][1]) == pytest.approx(tok_s, rel=0.02)
    assert np.median(figs["usd_per_million_output_tokens"][1]) == pytest.approx(22.35 / (tok_s * 3600) * 1e6, rel=0.02)


def test_the_speedups_bootstrap_values_are_baseline_over_speculative() -> None:
    recs = records()
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    summary = summarize(recs, meta)
    accs = scoped(recs, meta)
    cs = dict(summary.levels[0].scopes())["all"]
    figs = _speedup_figures(accs[("c4", "all", "baseline")], accs[("c4", "all", "speculative")], cs, paired=True,
                            seed=0, resamples=RESAMPLES)  # fmt: skip
    # TPOT 0.04 j / 0.02 j = 2 and TTFT 0.1 / 0.05 = 2 (baseline over speculative: > 1 is faster); throughput:
    # speculative over baseline, the walls 0.39 + 0.1 + 0.3744 = 0.8644 s and 0.39 + 0.05 + 0.1872 = 0.6272 s
    assert np.median(figs["tpot_p50"][1]) == pytest.approx(2.0, rel=1e-9)
    assert np.median(figs["ttft_p50"][1]) == pytest.approx(2.0, rel=1e-9)
    assert np.median(figs["aggregate_throughput"][1]) == pytest.approx(0.8644 / 0.6272, rel=0.02)
