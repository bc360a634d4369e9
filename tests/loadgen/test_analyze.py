"""Every statistic on hand-computed data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectrn.analyze.summary import (
    analyze_run,
    bootstrap,
    cost_per_million,
    describe,
    equivalence,
    request_metrics,
    speedups,
    stats_with_ci,
    summarize,
)
from spectrn.run.records import RequestRecord


def rec(
    variant: str = "baseline",
    index: int = 0,
    times=(0.1, 0.2, 0.25, 0.45),
    toks=(1, 3, 1, 5),
    e2e: float = 0.5,
    cls: str = "structured",
    error: str | None = None,
    ids=None,
    level: str = "c4",
    sent_at: float = 1000.0,
):
    return RequestRecord(
        variant=variant,
        index=index,
        prompt_id=f"p{index}",
        prompt_class=cls,
        level=level,
        sent_at=sent_at,
        ttft=None if error else times[0],
        e2e=None if error else e2e,
        chunk_times=list(times) if not error else [],
        chunk_tokens=list(toks) if not error else [],
        completion_tokens=None if error else sum(toks),
        status=500 if error else 200,
        error=error,
        output_token_ids=ids,
    )


def test_request_metrics_by_hand() -> None:
    m = request_metrics(rec())
    assert m is not None
    assert m.output_tokens == 10
    assert m.ttft == 0.1 and m.e2e == 0.5
    assert m.tpot == pytest.approx(0.4 / 9)
    assert m.itls == pytest.approx([0.1 / 3] * 3 + [0.05] + [0.2 / 5] * 5)
    assert m.chunk_latencies == pytest.approx([0.1, 0.05, 0.2])
    assert m.llmperf_itl == pytest.approx(0.45 / 4)
    assert m.tokens_per_decode_chunk == pytest.approx(3.0)
    assert m.throughput_tok_s == pytest.approx(20.0)


def test_single_token_request_has_no_tpot() -> None:
    m = request_metrics(rec(times=(0.1,), toks=(1,), e2e=0.1))
    assert m is not None and m.tpot is None and m.itls == []


def test_failed_request_has_no_metrics() -> None:
    assert request_metrics(rec(error="http_500")) is None


def test_describe_matches_numpy_linear_percentiles() -> None:
    d = describe([float(x) for x in range(1, 101)])
    assert d["n"] == 100 and d["mean"] == 50.5
    assert d["p50"] == pytest.approx(50.5) and d["p90"] == pytest.approx(90.1) and d["p99"] == pytest.approx(99.01)
    assert d["min"] == 1 and d["max"] == 100
    assert describe([])["p50"] is None


def test_bootstrap_ci_covers_the_mean_and_is_reproducible() -> None:
    import numpy as np

    x = np.random.default_rng(1).normal(10.0, 2.0, 400)
    ci = bootstrap(lambda i: float(x[i].mean()), x.size, seed=5)
    assert ci is not None and ci[0] < 10.0 < ci[1]
    assert ci[1] - ci[0] == pytest.approx(2 * 1.96 * 2.0 / 20, rel=0.25)  # ~ 2 * 1.96 * sigma / sqrt(n)
    assert bootstrap(lambda i: float(x[i].mean()), x.size, seed=5) == ci
    assert bootstrap(lambda i: 0.0, 1) is None
    s = stats_with_ci(list(x))
    assert s["ci95"]["p50"][0] < s["p50"] < s["ci95"]["p50"][1]


def test_speedups_are_paired_by_index() -> None:
    base, spec = [], []
    for i in range(40):
        jitter = 1 + 0.01 * (i % 5)
        base.append(
            request_metrics(
                rec("baseline", i, times=(0.1, 0.1 + 0.04 * 9 * jitter), toks=(1, 9), e2e=0.1 + 0.04 * 9 * jitter)
            )
        )
        spec.append(
            request_metrics(
                rec("speculative", i, times=(0.1, 0.1 + 0.02 * 9 * jitter), toks=(1, 9), e2e=0.1 + 0.02 * 9 * jitter)
            )
        )
    sp = speedups([m for m in base if m], [m for m in spec if m])
    assert sp["paired_requests"] == 40
    assert sp["tpot_p50"]["value"] == pytest.approx(2.0, rel=1e-6)
    lo, hi = sp["tpot_p50"]["ci95"]
    assert lo <= 2.0 <= hi and hi - lo < 0.05
    assert sp["ttft_p50"]["value"] == pytest.approx(1.0)
    assert sp["throughput"]["value"] > 1.5


def test_equivalence_reports_first_divergence() -> None:
    recs = [
        rec("baseline", 0, ids=[1, 2, 3]),
        rec("speculative", 0, ids=[1, 2, 3]),
        rec("baseline", 1, ids=[1, 2, 3, 4]),
        rec("speculative", 1, ids=[1, 2, 9, 4]),
        rec("baseline", 2, ids=[5]),  # no partner: not compared
    ]
    eq = equivalence(recs)
    assert eq["compared"] == 2 and eq["matched"] == 1 and eq["match_rate"] == 0.5
    assert eq["divergences"] == [{"level": "c4", "index": 1, "prompt_id": "p1", "first_divergence": 2}]


def test_cost_per_million_tokens() -> None:
    # $44.70/h, half an instance, 100 tok/s -> 22.35 / 360000 * 1e6 = $62.08
    assert cost_per_million(100.0, 44.70, 0.5) == pytest.approx(62.0833, rel=1e-4)
    assert cost_per_million(None, 44.70, 0.5) is None


def test_summary_flags_error_rate_and_counts_classes() -> None:
    recs = (
        [rec("baseline", i, sent_at=1000 + i) for i in range(8)]
        + [
            rec("baseline", 8, error="http_500"),
            rec("baseline", 9, error="timeout"),
        ]
        + [rec("speculative", i, times=(0.1, 0.2), toks=(1, 9), e2e=0.2, sent_at=1000 + i) for i in range(10)]
    )
    s = summarize(recs, run_id="r", config={"bench": {"max_error_rate": 0.05}})
    b = s["variants"]["baseline"]
    assert b["requests"] == {
        "completed": 8,
        "errors": 2,
        "error_rate": 0.2,
        "error_classes": {"http_500": 1, "timeout": 1},
        "error_examples": {"http_500": "", "timeout": ""},
    }
    assert s["clean"] is False and any("NOT A CLEAN RUN" in w for w in s["warnings"])
    assert set(s["by_prompt_class"]) == {"structured"}
    assert s["speedup"]["paired_requests"] == 8
    # aggregate throughput: 8 x 10 tokens between first send (1000) and last end (1007.5)
    assert b["output_tokens_per_s"]["aggregate"] == pytest.approx(80 / 7.5)
    assert s["cost"]["baseline"]["usd_per_million_output_tokens"] == pytest.approx(
        cost_per_million(80 / 7.5, 44.70, 0.5)
    )


def test_summary_splits_levels_and_classes() -> None:
    recs = []
    for level in ("c1", "c4"):
        for i in range(4):
            for v in ("baseline", "speculative"):
                recs.append(rec(v, i, cls="open" if i % 2 else "structured", level=level))
    s = summarize(recs, run_id="r")
    assert s["level"] == "c1" and set(s["levels"]) == {"c1", "c4"}
    assert set(s["by_prompt_class"]) == {"open", "structured"}
    assert s["clean"] is True


def test_analyze_run_writes_summary_and_llmperf_files(tmp_path: Path) -> None:
    from spectrn.run.records import RunMeta

    run = tmp_path / "r1"
    run.mkdir()
    (run / "run.json").write_text(
        RunMeta(run_id="r1", spectrn_version="0", started_at=0, model="Qwen/Qwen3-32B", max_tokens=10).model_dump_json()
    )
    with (run / "requests.jsonl").open("w") as f:
        for i in range(5):
            for v in ("baseline", "speculative"):
                f.write(rec(v, i).model_dump_json() + "\n")
        f.write('{"variant": "baseline", "ind')  # torn last line of a killed writer
    (run / "acceptance.json").write_text(json.dumps({"speculative@c4": {"rate": 0.5, "mean_accepted_length": 3.0}}))
    s = analyze_run(run)
    assert s["variants"]["speculative"]["acceptance"]["rate"] == 0.5
    assert s["variants"]["baseline"]["acceptance"] is None
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk["run_id"] == "r1"
    files = sorted(p.name for p in (run / "speculative").iterdir())
    assert files == ["Qwen-Qwen3-32B_0_10_individual_responses.json", "Qwen-Qwen3-32B_0_10_summary.json"]
    llm = json.loads((run / "speculative" / files[1]).read_text())
    assert llm["results_num_completed_requests"] == 5
    assert llm["results_inter_token_latency_s_quantiles_p50"] == pytest.approx(0.45 / 4)
    assert llm["results_ttft_s_mean"] == pytest.approx(0.1)
