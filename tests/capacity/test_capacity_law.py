"""``spectrn capacity`` against servers whose latency follows a known law of the requests in flight: the search
must find the highest concurrency the law itself allows, for baseline and speculative, and price it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from doubles.load_law_server import Law, LawServer

# Baseline: one token per event; TTFT grows steeply with load. Speculative: two tokens per event at the same
# gap (TPOT halves), a cheap prefill. Each SLO sits midway between two concurrencies of the law it binds, and
# well clear of the few milliseconds a loaded machine adds (steps of 16 and 30 ms per request in flight).
BASE = Law(gap_s=0.006, gap_per_request_s=0.016, ttft_s=0.002, ttft_per_request_s=0.030, tokens_per_event=1)
SPEC = Law(gap_s=0.006, gap_per_request_s=0.016, ttft_s=0.002, ttft_per_request_s=0.002, tokens_per_event=2)
TPOT_SLO_S, TTFT_SLO_S = 0.047, 0.047
MAX_TOKENS = 5  # 4 tokens after the first: a multiple of both laws' tokens per event
HOURLY_USD, SHARE = 10.0, 0.5


def law_capacity(law: Law, maximum: int) -> int:
    """The highest concurrency whose steady-state TPOT and TTFT both meet the SLOs, from the law alone."""
    ok = [c for c in range(1, maximum + 1) if law.tpot(c) <= TPOT_SLO_S and law.ttft(c) <= TTFT_SLO_S]
    assert ok == list(range(1, len(ok) + 1)), "the law must be monotone for the search to be checkable"
    return ok[-1]


@pytest.mark.slow
def test_search_finds_the_law_capacity_for_both_variants(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    expected = {"baseline": law_capacity(BASE, 64), "speculative": law_capacity(SPEC, 64)}
    # the two SLOs each bind one variant, so the search is checked against both
    assert BASE.ttft(expected["baseline"] + 1) > TTFT_SLO_S and BASE.tpot(expected["baseline"] + 1) <= TPOT_SLO_S
    assert SPEC.tpot(expected["speculative"] + 1) > TPOT_SLO_S and SPEC.ttft(expected["speculative"] + 1) <= TTFT_SLO_S
    with LawServer(BASE) as base, LawServer(SPEC) as spec:
        code, out, err = cli(
            "capacity", "--endpoint", f"baseline={base.url}", "--endpoint", f"speculative={spec.url}",
            "--slo", "p50:tpot<=47ms", "--slo", "p50:ttft<=47ms", "--max", "64", "--max-tokens", MAX_TOKENS,
            "--set", f"pricing.instance_hourly_usd={HOURLY_USD}", "--set", f"pricing.instances_per_service={SHARE}",
            "--set", "bench.warmup=0", "--id", "cap", "--out-dir", tmp_path / "out", "-o", "json",
        )  # fmt: skip
        peaks = {"baseline": base.peak, "speculative": spec.peak}
    assert code == 0, err
    doc = json.loads(out)
    folder = tmp_path / "out" / "cap"
    assert json.loads((folder / "capacity.json").read_text()) == doc
    for v, cap in expected.items():
        got = doc["variants"][v]
        assert got["capacity"] == cap, (v, got, doc["probes"])
        assert got["first_fail"] == cap + 1  # bisection ran down to adjacent concurrencies
        assert got["capacity_per_instance"] == pytest.approx(cap / SHARE)
        assert peaks[v] >= cap + 1  # the failing load really was applied
        # the cost at capacity is the price over the measured throughput (per service: x share)
        thr_instance = got["output_tokens_per_s_per_instance"]["value"]
        usd = got["usd_per_million_output_tokens"]["value"]
        assert usd == pytest.approx(HOURLY_USD / (thr_instance * 3600) * 1e6, rel=1e-9)
        # throughput at capacity: c streams of MAX_TOKENS tokens per request lifetime, less the ramp and drain
        law = BASE if v == "baseline" else SPEC
        lifetime = law.ttft(cap) + (MAX_TOKENS - 1) * law.tpot(cap)
        steady = cap * MAX_TOKENS / lifetime / SHARE
        assert 0.5 * steady < thr_instance < 1.1 * steady, (v, thr_instance, steady)
        lo, hi = got["usd_per_million_output_tokens"]["ci95"]
        assert lo <= usd <= hi
    # the capacity probes were real runs, each a run folder with a summary (spectrn report reads it)
    for v in expected:
        run = folder / doc["variants"][v]["probe"]
        assert (run / "run.json").is_file() and (run / "summary.json").is_file()
    # ratios: capacity from the law; cost ratio is the inverse of the throughput ratio, with intervals
    assert doc["capacity_ratio"]["value"] == pytest.approx(expected["speculative"] / expected["baseline"])
    thr, cost = doc["throughput_ratio"], doc["cost_ratio"]
    b, s = (doc["variants"][v]["output_tokens_per_s_per_instance"]["value"] for v in ("baseline", "speculative"))
    assert thr["value"] == pytest.approx(s / b) and cost["value"] == pytest.approx(b / s)
    assert thr["ci95"][0] <= thr["value"] <= thr["ci95"][1] and cost["ci95"][0] <= cost["value"] <= cost["ci95"][1]
    assert thr["ci95"][0] > 1.0  # speculation carries more tokens at its capacity, beyond the interval
    # the speculative law is faster at every load: it never stops paying within the range
    assert doc["stops_paying"]["compared"] and doc["stops_paying"]["cost_from"] is None
    # the requests rule: p50 needs ceil(10 / 0.5) = 20 requests per variant and probe
    assert doc["requests_per_probe"] == math.ceil(10 / (1 - 0.5))
    assert (folder / "capacity.md").is_file() and "Capacity at the SLO" in (folder / "capacity.html").read_text()


# Speculation whose step cost grows faster with load than the baseline's: it pays at low load and stops paying
# once (2 + 30 n) / 2 exceeds 30 + 5 n, i.e. from n = 2.3 requests in flight on.
CHEAP_BASE = Law(gap_s=0.030, gap_per_request_s=0.005, ttft_s=0.002, ttft_per_request_s=0.0, tokens_per_event=1)
COSTLY_SPEC = Law(gap_s=0.002, gap_per_request_s=0.030, ttft_s=0.002, ttft_per_request_s=0.0, tokens_per_event=2)


@pytest.mark.slow
def test_the_load_from_which_speculation_stops_paying(cli: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    probed = [1, 2, 4]  # doubling from 1 to --max 4: the SLO is loose, every load passes
    worse = [c for c in probed if COSTLY_SPEC.tpot(c) >= CHEAP_BASE.tpot(c)]
    assert worse == [4] and COSTLY_SPEC.tpot(2) < 0.8 * CHEAP_BASE.tpot(2)  # the law: pays at 1 and 2, not at 4
    with LawServer(CHEAP_BASE) as base, LawServer(COSTLY_SPEC) as spec:
        code, out, err = cli(
            "capacity", "--endpoint", f"baseline={base.url}", "--endpoint", f"speculative={spec.url}",
            "--slo", "p50:tpot<=1s", "--max", "4", "--max-tokens", MAX_TOKENS, "--set", "bench.warmup=0",
            "--id", "pay", "--out-dir", tmp_path / "out", "-o", "json",
        )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert [p["load"] for p in doc["probes"]] == probed
    assert all(doc["variants"][v]["capacity"] == 4 and doc["variants"][v]["reached_max"] for v in doc["variants"])
    stops = doc["stops_paying"]
    assert stops["tpot_from"] == worse[0] and stops["cost_from"] == worse[0]
    assert [c["load"] for c in stops["compared"]] == probed
    assert any("raise --max" in n for n in doc["notes"])
