"""The simulator's latency histograms checked by their sums, not only their counts: each ``_sum`` equals the
total of the durations the engine scheduled, read back from its own ground truth (``/sim/requests``): a
histogram fed the wrong difference (or the right one twice) keeps its count and changes its sum."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable

import httpx
import pytest

from spectrn.sim.server import SimHandle

from .conftest import OPEN, STRUCTURED
from .test_ground_truth import metric, stream_timed, truth


@pytest.mark.parametrize("profile", ["upstream", "neuron-fork"])
def test_latency_histogram_sums_are_the_scheduled_durations(start_sim: Callable[..., SimHandle], profile: str) -> None:
    h = start_sim(speculative=True, time_scale=0.02, profile=profile)
    bodies = [
        {"prompt": p, "max_tokens": n, "ignore_eos": True, "temperature": 0}
        for p, n in ((STRUCTURED, 80), (OPEN, 50), (STRUCTURED + " 7", 30), (OPEN + "?", 21))
    ]
    with cf.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda b: stream_timed(h, b), bodies))
    with httpx.Client(base_url=h.base_url) as c:
        text = c.get("/metrics").text
    reqs = [truth(h, rid) for rid, _ in results]
    firsts = [r["chunks"][0]["t"] for r in reqs]
    lasts = [r["chunks"][-1]["t"] for r in reqs]
    ttft = sum(f - r["arrival"] for f, r in zip(firsts, reqs, strict=True))
    itl = sum(b["t"] - a["t"] for r in reqs for a, b in zip(r["chunks"], r["chunks"][1:], strict=False))
    e2e = sum(last - r["arrival"] for last, r in zip(lasts, reqs, strict=True))
    decode = sum(last - f for last, f in zip(lasts, firsts, strict=True))
    assert ttft > 0 and itl > 0 and decode == pytest.approx(itl, rel=1e-9)  # the oracle's own consistency
    itl_name = "vllm:inter_token_latency_seconds" if profile == "upstream" else "vllm:time_per_output_token_seconds"
    assert metric(text, "vllm:time_to_first_token_seconds_sum") == pytest.approx(ttft, rel=1e-9)
    assert metric(text, f"{itl_name}_sum") == pytest.approx(itl, rel=1e-9)
    assert metric(text, "vllm:e2e_request_latency_seconds_sum") == pytest.approx(e2e, rel=1e-9)
    assert metric(text, "vllm:request_generation_tokens_sum") == sum(b["max_tokens"] for b in bodies)
    assert metric(text, "vllm:request_prompt_tokens_sum") == sum(r["prompt_tokens"] for r in reqs)
