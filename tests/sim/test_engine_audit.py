"""The engine's steps and the /metrics they feed, driven in-process step by step (audit, issue 29).

No server, no clock: each step is run at a start time the test chooses, with scripted acceptance draws, so
every chunk time, token count and counter value is known in advance. Expected values are worked out by hand
from the preset (``qwen3-32b-trn2``: prefill 0.030 s + 2.5e-4 s per prompt token; target memory term 0.044 +
1e-4 per sequence + 1.7e-7 per context token; draft pass 0.0035 + 0.9e-8 per context token) and from vLLM's
metric names (``tests/fixtures/vllm-real``).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spectrn.sim.engine import Engine, SimRequest
from spectrn.sim.faults import FaultPlan
from spectrn.sim.metrics import SimMetrics
from spectrn.sim.model import PRESETS, resolve
from spectrn.sim.profiles import get_profile
from spectrn.sim.tokens import OutputStream, Token

PRESET = PRESETS["qwen3-32b-trn2"]
UP = {"engine": "0", "model_name": "m"}  # upstream's label set on every family


class _Sink:
    """Accepts every chunk; keeps (rid, tokens, finish) as encoded."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, int, str | None]] = []

    def encode(self, req: SimRequest, tokens: list[Token], finish: str | None, first: bool) -> bytes | None:
        self.chunks.append((req.rid, len(tokens), finish))
        return b"x"

    def write(self, req: SimRequest, data: bytes | None, finish: str | None) -> bool:
        return True


class _Draws:
    """A request's acceptance draws, scripted (what ``random.Random.random`` would return)."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def _engine(profile: str, *, window: int = 3, max_num_seqs: int = 2, kv: int = 0, spec: bool = True) -> Engine:
    prof = get_profile(profile)
    model = resolve(PRESET, speculative=spec, draft=None, window=window, time_scale=1.0, semantics=prof.window)
    metrics = SimMetrics("m", profile=prof, speculative=spec, window=window, max_model_len=1000, process_metrics=False)
    return Engine(model, metrics, max_num_seqs=max_num_seqs, seed=0, kv_capacity_tokens=kv)


def _req(rid: str, prompt: int, target: int, probs: list[float], draws: _Draws, sink: _Sink, arrival: float = 0.0):
    return SimRequest(
        rid=rid,
        counter=1,
        prompt_text="p",
        prompt_ids=[1] * prompt,
        target_len=target,
        finish_reason="length",
        max_tokens=target + 5,
        sink=sink,
        fault=FaultPlan(),
        output=OutputStream("p", 0),
        rng=draws,  # type: ignore[arg-type]
        probs=probs,
        arrival=arrival,
        done=asyncio.get_running_loop().create_future(),
    )


def _step(engine: Engine, start: float) -> float:
    """One step as the engine's loop runs it (prefill when something is admissible, else decode); its end."""
    admit = engine._admissible(start)
    if admit:
        end = start + engine.model.prefill_s(sum(r.prompt_len for r in admit))
        engine._deliver(engine._plan_prefill(admit, end), end, prefill=True)
    else:
        ctx = sum(r.prompt_len + r.emitted for r in engine.running)
        end = start + engine.model.step_s(len(engine.running), ctx)
        engine._deliver(engine._plan_decode(end), end, prefill=False)
    return end


def _samples(engine: Engine) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = engine.metrics.render().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if not s.name.endswith("_created")
    }


def _get(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_upstream_steps_chunks_and_counters() -> None:
    async def scenario() -> None:
        sink = _Sink()
        e = _engine("upstream", kv=100)
        a = _req("a", 10, 4, [0.9, 0.9, 0.9], _Draws(0.1, 0.2, 0.95), sink)
        b = _req("b", 20, 3, [0.9, 0.9, 0.9], _Draws(0.95, 0.1, 0.1, 0.1), sink)
        c = _req("c", 5, 2, [0.9, 0.9, 0.9], _Draws(), sink)
        e.waiting.extend([a, b, c])
        # step 1: prefill of a and b (batch limit 2, c waits): 0.030 + 2.5e-4 * 30 = 0.0375
        t1 = _step(e, 0.0)
        assert t1 == pytest.approx(0.0375, rel=1e-12)
        assert [r.rid for r in e.running] == ["a", "b"] and [r.rid for r in e.waiting] == ["c"]
        assert (a.first_at, a.admitted_at) == (t1, 0.0)
        s = _samples(e)
        assert _get(s, "vllm:kv_cache_usage_perc", **UP) == pytest.approx(0.32)  # (10+1 + 20+1) / 100
        assert _get(s, "vllm:num_requests_running", **UP) == 2 and _get(s, "vllm:num_requests_waiting", **UP) == 1
        # step 2: decode of both, upstream window 3 (3 proposals, 4 verified), context 11 + 21 = 32:
        # 3 draft passes of 0.0035 + 0.9e-8 * 32, target 0.044 + 1e-4 * 2 + 1.7e-7 * 32 (compute 1.7e-4*2*4 below)
        d2 = 3 * (0.0035 + 0.9e-8 * 32) + (0.044 + 1e-4 * 2 + 1.7e-7 * 32)
        t2 = _step(e, t1)
        assert t2 - t1 == pytest.approx(d2, rel=1e-9)
        # a: draws 0.1, 0.2 accepted, 0.95 rejected -> 2 accepted + 1 = 3 tokens = all 3 left: finished (length)
        # b: first draw 0.95 rejected -> 1 token, 1 of 3 left
        assert list(a.chunks.n) == [1, 3] and list(a.chunks.accepted) == [-1, 2]
        assert list(b.chunks.n) == [1, 1] and list(b.chunks.accepted) == [-1, 0]
        assert (a.finished, b.finished) == ("length", None)
        assert a.done.done() and not b.done.done()
        # step 3: a's place is free, c (arrived at 0) is admitted: a prefill of 5 tokens, 0.030 + 0.00125
        t3 = _step(e, t2)
        assert t3 - t2 == pytest.approx(0.03125, rel=1e-9)
        assert [r.rid for r in e.running] == ["b", "c"] and c.admitted_at == t2
        # step 4: decode b (1 left: capped at 1 token though 3 are accepted) and c (1 left, no draws needed ...)
        c.rng = _Draws(0.99)  # type: ignore[assignment]
        t4 = _step(e, t3)
        assert list(b.chunks.n) == [1, 1, 1] and list(b.chunks.accepted) == [-1, 0, 3]
        assert list(c.chunks.n) == [1, 1] and list(c.chunks.accepted) == [-1, 0]
        assert (b.finished, c.finished) == ("length", "length") and e.running == []
        assert sink.chunks == [
            ("a", 1, None),
            ("b", 1, None),
            ("a", 3, "length"),
            ("b", 1, None),
            ("c", 1, None),
            ("b", 1, "length"),
            ("c", 1, "length"),
        ]
        s = _samples(e)
        # spec counters: 4 decode steps of requests (a, b, b, c) x 3 proposals; accepted 2 + 0 + 3 + 0
        assert _get(s, "vllm:spec_decode_num_drafts_total", **UP) == 4
        assert _get(s, "vllm:spec_decode_num_draft_tokens_total", **UP) == 12
        assert _get(s, "vllm:spec_decode_num_accepted_tokens_total", **UP) == 5
        per_pos = {p: _get(s, "vllm:spec_decode_num_accepted_tokens_per_pos_total", **UP, position=p) for p in "012"}
        assert per_pos == {"0": 2, "1": 2, "2": 1}  # a: 0, 1; b: 0, 1, 2
        assert _get(s, "vllm:prompt_tokens_total", **UP) == 35 and _get(s, "vllm:generation_tokens_total", **UP) == 9
        reasons = {r: _get(s, "vllm:request_success_total", **UP, finished_reason=r) for r in ("stop", "length")}
        assert reasons == {"stop": 0, "length": 3}
        assert {r for (n, lab) in s if n == "vllm:request_success_total" for k, r in lab if k == "finished_reason"} == {
            "stop",
            "length",
            "abort",
            "error",
            "repetition",
        }
        # tokens per step: prefill 2 + 30 prompt; decode 3 + 1; prefill 1 + 5; decode 1 + 1 -> sum 44, 4 steps
        assert _get(s, "vllm:iteration_tokens_total_sum", **UP) == 44
        assert _get(s, "vllm:iteration_tokens_total_count", **UP) == 4
        # TTFT from arrival (0): a, b at t1; c at t3
        assert _get(s, "vllm:time_to_first_token_seconds_sum", **UP) == pytest.approx(2 * t1 + t3)
        # ITL from the previous chunk: a, b: t2 - t1; b: t4 - t2 (it waited out c's prefill); c: t4 - t3
        assert _get(s, "vllm:inter_token_latency_seconds_sum", **UP) == pytest.approx(2 * (t2 - t1) + 2 * t4 - t2 - t3)
        # per request, finished a (t2), b (t4), c (t4); all arrived at 0
        assert _get(s, "vllm:e2e_request_latency_seconds_sum", **UP) == pytest.approx(t2 + 2 * t4)
        assert _get(s, "vllm:request_queue_time_seconds_sum", **UP) == pytest.approx(t2)  # only c queued, until t2
        assert _get(s, "vllm:request_prefill_time_seconds_sum", **UP) == pytest.approx(2 * t1 + (t3 - t2))
        assert _get(s, "vllm:request_decode_time_seconds_sum", **UP) == pytest.approx((t2 - t1) + (t4 - t1) + (t4 - t3))
        assert _get(s, "vllm:request_inference_time_seconds_sum", **UP) == pytest.approx(t2 + t4 + (t4 - t2))
        # TPOT per request: decode time / (tokens - 1): a (t2 - t1) / 3, b (t4 - t1) / 2, c (t4 - t3) / 1
        tpot = (t2 - t1) / 3 + (t4 - t1) / 2 + (t4 - t3)
        assert _get(s, "vllm:request_time_per_output_token_seconds_sum", **UP) == pytest.approx(tpot)
        assert _get(s, "vllm:request_prompt_tokens_sum", **UP) == 35
        assert _get(s, "vllm:request_generation_tokens_sum", **UP) == 9  # 4 + 3 + 2 emitted
        assert _get(s, "vllm:request_params_max_tokens_sum", **UP) == 24  # (4 + 5) + (3 + 5) + (2 + 5)

    _run(scenario())


def test_a_request_arriving_exactly_at_the_step_start_is_admitted() -> None:
    async def scenario() -> None:
        e = _engine("upstream")
        r = _req("r", 8, 3, [0.5, 0.5, 0.5], _Draws(), _Sink(), arrival=1.25)
        e.waiting.append(r)
        assert e._admissible(1.0) == [] and e._admissible(1.25) == [r]

    _run(scenario())


def test_a_one_token_request_finishes_in_its_prefill() -> None:
    async def scenario() -> None:
        sink = _Sink()
        e = _engine("upstream")
        e.waiting.append(_req("one", 8, 1, [0.5, 0.5, 0.5], _Draws(), sink))
        _step(e, 0.0)
        assert sink.chunks == [("one", 1, "length")] and e.running == []

    _run(scenario())


def test_nxdi_decode_context_counts_emitted_tokens_and_baseline_emits_one() -> None:
    async def scenario() -> None:
        e = _engine("vllm-neuron", spec=False)
        r = _req("r", 100, 10, [], _Draws(), _Sink())
        e.waiting.append(r)
        t1 = _step(e, 0.0)
        t2 = _step(e, t1)
        t3 = _step(e, t2)
        # baseline decode: 0.044 + 1e-4 + 1.7e-7 * context; context 101 then 102 (prompt + emitted)
        assert t2 - t1 == pytest.approx(0.044 + 1e-4 + 1.7e-7 * 101, rel=1e-9)
        assert t3 - t2 == pytest.approx(0.044 + 1e-4 + 1.7e-7 * 102, rel=1e-9)
        assert list(r.chunks.n) == [1, 1, 1] and list(r.chunks.accepted) == [-1, -1, -1]

    _run(scenario())


def test_vllm_neuron_registers_spec_counters_that_never_move() -> None:
    async def scenario() -> None:
        e = _engine("vllm-neuron", window=3)  # NxDI: 2 proposals a step
        r = _req("r", 4, 3, [0.9, 0.9], _Draws(0.1, 0.1), _Sink())
        e.waiting.append(r)
        _step(e, _step(e, 0.0))
        assert list(r.chunks.accepted) == [-1, 2]
        s = _samples(e)
        for name in ("drafts", "draft_tokens", "accepted_tokens"):
            assert _get(s, f"vllm:spec_decode_num_{name}_total", **UP) == 0
        # one child per position of the window, labelled 0 .. window - 1
        per_pos = {
            dict(lab).get("position") for (n, lab) in s if n == "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        }
        assert per_pos == {"0", "1", "2"}

    _run(scenario())


def test_neuron_fork_v0_families_and_buckets() -> None:
    async def scenario() -> None:
        e = _engine("neuron-fork", window=3, kv=10)
        r = _req("r", 4, 3, [0.9, 0.9], _Draws(0.1, 0.1), _Sink())
        e.waiting.append(r)
        t1 = _step(e, 0.0)
        t2 = _step(e, t1)
        assert r.finished == "length"
        text = e.metrics.render().decode()
        assert "_created" not in text  # the fork disables the _created samples
        s = _samples(e)
        v0 = {"model_name": "m"}
        assert _get(s, "vllm:gpu_cache_usage_perc", **v0) == pytest.approx(0.0)  # nothing running after the finish
        assert _get(s, "vllm:num_preemptions_total", **v0) == 0
        assert _get(s, "vllm:prompt_tokens_total", **v0) == 4 and _get(s, "vllm:generation_tokens_total", **v0) == 3
        assert _get(s, "vllm:request_success_total", **v0, finished_reason="length") == 1
        # only the reasons seen get a child (V0 creates it on first use)
        reasons = {dict(lab)["finished_reason"] for (n, lab) in s if n == "vllm:request_success_total"}
        assert reasons == {"length"}
        # V0's time_per_output_token_seconds is per step: one decode step, t2 - t1
        assert _get(s, "vllm:time_per_output_token_seconds_sum", **v0) == pytest.approx(t2 - t1)
        assert _get(s, "vllm:time_per_output_token_seconds_count", **v0) == 1
        assert _get(s, "vllm:request_max_num_generation_tokens_sum", **v0) == 3  # emitted, not max_tokens (8)
        assert _get(s, "vllm:request_params_n_sum", **v0) == 1
        assert _get(s, "vllm:request_params_max_tokens_sum", **v0) == 8
        # the spec-decode families exist and never get a sample on Neuron
        names = {n for (n, _) in s}
        assert not any(n.startswith("vllm:spec_decode") for n in names)
        for fam in ("draft_acceptance_rate", "efficiency", "num_accepted_tokens", "num_draft_tokens"):
            assert f"# TYPE vllm:spec_decode_{fam}" in text
        # token histograms: vLLM's 1-2-5 buckets up to max_model_len (1000 here, included)
        les = [dict(lab)["le"] for (n, lab) in s if n == "vllm:request_prompt_tokens_bucket"]
        assert les == ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "+Inf"]
        assert "vllm:request_time_per_output_token_seconds" not in text and "inter_token_latency" not in text

    _run(scenario())


def _buckets_and_labels(text: str) -> dict[str, tuple[list[str], frozenset[str]]]:
    """Per family: the ``le`` bounds of its buckets (histograms) and the label names of its samples."""
    out: dict[str, tuple[list[str], frozenset[str]]] = {}
    for fam in text_string_to_metric_families(text):
        les = [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket")]
        names = frozenset(k for s in fam.samples if not s.name.endswith("_created") for k in s.labels if k != "le")
        out[fam.name] = (les, names)
    return out


def test_upstream_families_have_the_buckets_and_labels_of_real_vllm() -> None:
    from .conftest import FIXTURES

    real = _buckets_and_labels((FIXTURES / "draft" / "metrics_after.body").read_text())
    # The recorded server ran with --max-model-len 2048.
    metrics = SimMetrics(
        "m", profile=get_profile("upstream"), speculative=True, window=4, max_model_len=2048, process_metrics=False
    )
    sim = _buckets_and_labels(metrics.render().decode())
    shared = sorted(set(real) & set(sim))
    for family in (
        "vllm:request_generation_tokens",
        "vllm:request_prompt_tokens",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:iteration_tokens_total",
        "vllm:request_success",
        "vllm:spec_decode_num_accepted_tokens_per_pos",
    ):
        assert family in shared, family
    assert {f: sim[f] for f in shared} == {f: real[f] for f in shared}


def test_the_engine_loop_schedules_steps_back_to_back_with_the_model_durations() -> None:
    """The real loop (not the step helper above): scheduled chunk times are exact sums of the model's durations,
    whatever the machine's load, because each step starts at the previous step's deadline."""
    scale = 0.01

    async def scenario() -> None:
        prof = get_profile("upstream")
        model = resolve(PRESET, speculative=True, draft=None, window=3, time_scale=scale, semantics=prof.window)
        metrics = SimMetrics("m", profile=prof, speculative=True, window=3, process_metrics=False)
        e = Engine(model, metrics, max_num_seqs=2, seed=0)
        sink = _Sink()
        a = _req("a", 10, 4, [0.9, 0.9, 0.9], _Draws(0.1, 0.2, 0.95), sink)
        b = _req("b", 20, 3, [0.9, 0.9, 0.9], _Draws(0.95, 0.1, 0.1, 0.1), sink)
        c = _req("c", 5, 2, [0.9, 0.9, 0.9], _Draws(0.99), sink)
        e.start()
        try:
            for r in (a, b, c):
                e.submit(r)
            await asyncio.wait_for(asyncio.gather(a.done, b.done, c.done), timeout=60)
        finally:
            await e.stop()
        t1, t2 = a.chunks.t
        assert list(b.chunks.t[:2]) == [t1, t2]  # a and b step together
        t3, t4 = c.chunks.t
        assert b.chunks.t[2] == t4
        # the times are the event loop's monotonic clock, seconds since boot: a difference of two of them is exact only
        # to their float spacing (3.6e-12 s after 4.5 hours up), which rel=1e-9 of a 0.5 ms step is not
        clock = 4 * math.ulp(t4)
        # prefill of a and b: 0.030 + 2.5e-4 * (10 + 20) = 0.0375
        assert t1 - a.admitted_at == pytest.approx(0.0375 * scale, rel=1e-9, abs=clock)
        # decode of a, b over context 11 + 21 = 32 (see test_upstream_steps_chunks_and_counters)
        d2 = 3 * (0.0035 + 0.9e-8 * 32) + (0.044 + 1e-4 * 2 + 1.7e-7 * 32)
        assert t2 - t1 == pytest.approx(d2 * scale, rel=1e-9, abs=clock)
        # c's prefill (5 tokens) right after a finished: 0.030 + 2.5e-4 * 5
        assert (t3 - t2, c.admitted_at) == (pytest.approx(0.03125 * scale, rel=1e-9, abs=clock), t2)
        # decode of b (20 + 2 tokens) and c (5 + 1): context 28
        d4 = 3 * (0.0035 + 0.9e-8 * 28) + (0.044 + 1e-4 * 2 + 1.7e-7 * 28)
        assert t4 - t3 == pytest.approx(d4 * scale, rel=1e-9, abs=clock)
        assert [list(r.chunks.n) for r in (a, b, c)] == [[1, 3], [1, 1, 1], [1, 1]]

    _run(scenario())


def test_kv_usage_is_capped_at_one() -> None:
    async def scenario() -> None:
        e = _engine("upstream", kv=4)
        e.waiting.append(_req("r", 8, 3, [0.5, 0.5, 0.5], _Draws(), _Sink()))
        _step(e, 0.0)  # 8 + 1 tokens held against a capacity of 4
        assert _get(_samples(e), "vllm:kv_cache_usage_perc", **UP) == 1.0

    _run(scenario())


def test_describe_reports_the_requests_ground_truth() -> None:
    async def scenario() -> None:
        e = _engine("upstream")
        # "hello there": predictability 0, alpha_open 0.32; upstream window 3: positions 0, 1, 2
        probs = [0.32 * math.exp(-((i / 7) ** 4)) for i in range(3)]
        r = _req("r", 2, 3, probs, _Draws(0.99), _Sink(), arrival=0.0)
        r.prompt_text = "hello there"
        e.waiting.append(r)
        _step(e, _step(e, 0.0))
        t1, t2 = r.chunks.t
        expected_tokens = 1 + probs[0] + probs[0] * probs[1] + probs[0] * probs[1] * probs[2]
        assert e.describe(r) == {
            "id": "r",
            "counter": 1,
            "prompt": "hello there",
            "prompt_tokens": 2,
            "predictability": 0.0,
            "accept_prob": pytest.approx(0.32),
            "position_probs": probs,
            "expected_tokens_per_step": pytest.approx(expected_tokens, rel=1e-12),
            "target_tokens": 3,
            "emitted_tokens": 2,
            "finish_reason": None,
            "arrival": 0.0,
            "admitted": 0.0,
            "chunks": [
                {"t": t1, "n": 1, "accepted": -1, "written": r.chunks.w[0]},
                {"t": t2, "n": 1, "accepted": 0, "written": r.chunks.w[1]},
            ],
        }

    _run(scenario())
