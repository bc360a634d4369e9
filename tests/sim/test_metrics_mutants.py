"""The simulator's /metrics family by family: names, types, help texts, labels, bucket bounds and values.

``SimMetrics`` is built in-process (no server) with the clock frozen, so every sample, the ``_created`` ones
included, is known in advance. The exposition is read back with prometheus_client's parser and each family is
compared whole with one written out here: V1's from the recorded upstream server
(``tests/fixtures/vllm-real/draft/metrics_after.body``), V0's from the Neuron fork's ``vllm/engine/metrics.py``
(vLLM 0.9, typo "Speulative" included). The ``*_created`` families are checked as families of their own.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spectrn.sim.metrics import SimMetrics
from spectrn.sim.profiles import get_profile

T = 1_700_000_000.0  # the frozen clock: every _created sample, and V0's lora_requests_info value
V1 = {"engine": "0", "model_name": "tiny-qwen3"}
V0 = {"model_name": "tiny-qwen3"}

TTFT = ("0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0",
        "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0")  # fmt: skip
ITL = ("0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75", "1.0", "2.5", "5.0",
       "7.5", "10.0", "20.0", "40.0", "80.0")  # fmt: skip
REQUEST = ("0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0", "50.0",
           "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0", "7680.0")  # fmt: skip
ITERATION = ("1.0", "8.0", "16.0", "32.0", "64.0", "128.0", "256.0", "512.0", "1024.0", "2048.0", "4096.0", "8192.0",
             "16384.0")  # fmt: skip
TOKENS_2000 = ("1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0")
TOKENS_1000 = TOKENS_2000[:-1]  # vLLM's build_1_2_5_buckets(1024)
PARAMS_N = ("1.0", "2.0", "5.0", "10.0", "20.0")

Family = tuple[str, str, str, list[tuple[str, dict[str, str], float]]]


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: T)


def parsed(metrics: SimMetrics) -> list[Family]:
    return [
        (f.name, f.type, f.documentation, [(s.name, s.labels, s.value) for s in f.samples])
        for f in text_string_to_metric_families(metrics.render().decode())
    ]


def counter(name: str, doc: str, labels: dict[str, str], value: float = 0.0, *, created: bool = True) -> list[Family]:
    out: list[Family] = [(name, "counter", doc, [(f"{name}_total", labels, value)])]
    if created:
        out.append((f"{name}_created", "gauge", doc, [(f"{name}_created", labels, T)]))
    return out


def gauge(name: str, doc: str, labels: dict[str, str], value: float = 0.0) -> list[Family]:
    return [(name, "gauge", doc, [(name, labels, value)])]


def histogram(name: str, doc: str, les: tuple[str, ...], labels: dict[str, str], *, created: bool) -> list[Family]:
    """An empty histogram: every bucket, the count and the sum at 0."""
    samples = [(f"{name}_bucket", {**labels, "le": le}, 0.0) for le in (*les, "+Inf")]
    samples += [(f"{name}_count", labels, 0.0), (f"{name}_sum", labels, 0.0)]
    out: list[Family] = [(name, "histogram", doc, samples)]
    if created:
        out.append((f"{name}_created", "gauge", doc, [(f"{name}_created", labels, T)]))
    return out


def phases(labels: dict[str, str], *, created: bool) -> list[Family]:
    return [
        *histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                   REQUEST, labels, created=created),
        *histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                   REQUEST, labels, created=created),
        *histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                   REQUEST, labels, created=created),
        *histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                   REQUEST, labels, created=created),
    ]  # fmt: skip


def v1_common(success: dict[str, float], tokens: tuple[str, ...]) -> list[Family]:
    """Every V1 family after the spec-decode ones, in registration order (as upstream vLLM 0.32 words them);
    ``tokens``: the bounds of the token-count histograms, vLLM's ``build_1_2_5_buckets(max_model_len)``."""
    success_labels = [{**V1, "finished_reason": r} for r in ("stop", "length", "abort", "error", "repetition")]
    success_doc = "Count of successfully processed requests."
    return [
        *gauge("vllm:num_requests_running", "Number of requests in model execution batches.", V1, 1.0),
        *gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", V1, 2.0),
        *gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", V1, 0.25),
        *counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", V1, 3.0),
        *counter("vllm:prompt_tokens", "Number of prefill tokens processed.", V1, 40.0),
        *counter("vllm:generation_tokens", "Number of generation tokens processed.", V1, 64.0),
        ("vllm:request_success", "counter", success_doc,
         [("vllm:request_success_total", lab, success[lab["finished_reason"]]) for lab in success_labels]),
        ("vllm:request_success_created", "gauge", success_doc,
         [("vllm:request_success_created", lab, T) for lab in success_labels]),
        *histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens, V1, created=True),
        *histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", tokens, V1,
                   created=True),
        *histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION, V1,
                   created=True),
        *histogram("vllm:request_max_num_generation_tokens",
                   "Histogram of maximum number of requested generation tokens.", tokens, V1, created=True),
        *histogram("vllm:request_params_n", "Histogram of the n request parameter.", PARAMS_N, V1, created=True),
        *histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens,
                   V1, created=True),
        *histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT, V1,
                   created=True),
        *histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL, V1,
                   created=True),
        *histogram("vllm:request_time_per_output_token_seconds",
                   "Histogram of time_per_output_token_seconds per request.", ITL, V1, created=True),
        *histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST, V1,
                   created=True),
        *phases(V1, created=True),
    ]  # fmt: skip


def _feed_gauges_and_counters(m: SimMetrics) -> None:
    m.running.set(1)
    m.waiting.set(2)
    m.kv_usage.set(0.25)
    m.preemptions.inc(3)
    m.prompt_tokens.inc(40)
    m.generation_tokens.inc(64)


def test_v1_speculative_exposition_is_upstream_vllm_family_by_family(frozen_clock: None) -> None:
    # As the recorded server: --max-model-len 2048, so the token histograms end at 2000.
    m = SimMetrics(
        "tiny-qwen3",
        profile=get_profile("upstream"),
        speculative=True,
        window=2,
        max_model_len=2048,
        process_metrics=False,
    )
    _feed_gauges_and_counters(m)
    m.success["length"].inc(2)
    m.success["stop"].inc()
    m.spec_step(2, 1)
    m.spec_step(2, 2)
    per_pos = "Accepted tokens per draft position."
    pos = [{**V1, "position": "0"}, {**V1, "position": "1"}]
    expected = [
        *counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", V1, 2.0),
        *counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", V1, 4.0),
        *counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", V1, 3.0),
        ("vllm:spec_decode_num_accepted_tokens_per_pos", "counter", per_pos,
         [("vllm:spec_decode_num_accepted_tokens_per_pos_total", pos[0], 2.0),
          ("vllm:spec_decode_num_accepted_tokens_per_pos_total", pos[1], 1.0)]),
        ("vllm:spec_decode_num_accepted_tokens_per_pos_created", "gauge", per_pos,
         [("vllm:spec_decode_num_accepted_tokens_per_pos_created", pos[0], T),
          ("vllm:spec_decode_num_accepted_tokens_per_pos_created", pos[1], T)]),
        *v1_common({"stop": 1.0, "length": 2.0, "abort": 0.0, "error": 0.0, "repetition": 0.0}, TOKENS_2000),
    ]  # fmt: skip
    got = parsed(m)
    assert [f[0] for f in got] == [f[0] for f in expected]
    for mine, want in zip(got, expected, strict=True):
        assert mine == want, want[0]


def test_v1_without_speculation_has_no_spec_decode_families(frozen_clock: None) -> None:
    # max_model_len 1024: V1 builds its token histograms from it as V0 does, so they end at 1000, not 2000.
    m = SimMetrics(
        "tiny-qwen3",
        profile=get_profile("vllm-neuron"),
        speculative=False,
        window=0,
        max_model_len=1024,
        process_metrics=False,
    )
    _feed_gauges_and_counters(m)
    m.spec_step(3, 2)  # a server that does not speculate counts nothing
    expected = v1_common({"stop": 0.0, "length": 0.0, "abort": 0.0, "error": 0.0, "repetition": 0.0}, TOKENS_1000)
    got = parsed(m)
    assert [f[0] for f in got] == [f[0] for f in expected]
    for mine, want in zip(got, expected, strict=True):
        assert mine == want, want[0]


def test_v1_a_finished_request_feeds_its_size_histograms_as_vllm_does(frozen_clock: None) -> None:
    # the transcript (vllm-base/metrics_after.body): 8 requests, n 1 each, 704 tokens generated; so
    # request_max_num_generation_tokens sums to 704 (one sequence per request) and request_params_n to 8
    m = SimMetrics(
        "tiny-qwen3", profile=get_profile("vllm-neuron"), speculative=False, window=0, max_model_len=1024,
        process_metrics=False,
    )  # fmt: skip
    m.request_done(88, 100)
    m.request_done(300, 400)
    got = {f[0]: f[3] for f in parsed(m)}
    gen = {(name, lab.get("le")): v for name, lab, v in got["vllm:request_max_num_generation_tokens"]}
    assert (
        gen[("vllm:request_max_num_generation_tokens_count", None)],
        gen[("vllm:request_max_num_generation_tokens_sum", None)],
    ) == (2.0, 388.0)
    assert [
        gen[("vllm:request_max_num_generation_tokens_bucket", le)] for le in ("50.0", "100.0", "200.0", "500.0")
    ] == [0.0, 1.0, 1.0, 2.0]
    n = {(name, lab.get("le")): v for name, lab, v in got["vllm:request_params_n"]}
    assert (n[("vllm:request_params_n_bucket", "1.0")], n[("vllm:request_params_n_sum", None)]) == (2.0, 2.0)


def test_v0_exposition_is_the_neuron_forks_family_by_family(frozen_clock: None) -> None:
    m = SimMetrics(
        "tiny-qwen3",
        profile=get_profile("neuron-fork"),
        speculative=True,
        window=4,
        max_model_len=2048,
        process_metrics=False,
    )
    _feed_gauges_and_counters(m)
    # V0 makes a finished_reason child when a request first finishes that way, and keeps that order.
    m.success["length"].inc()
    m.success["stop"].inc()
    m.success["length"].inc()
    m.spec_step(4, 3)  # never counted on Neuron
    lora = {"max_lora": "0", "running_lora_adapters": "", "waiting_lora_adapters": ""}
    expected: list[Family] = [
        *gauge("vllm:num_requests_running", "Number of requests currently running on GPU.", V0, 1.0),
        *gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", V0, 2.0),
        *gauge("vllm:lora_requests_info", "Running stats on lora requests.", lora, T),
        *gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", V0, 0.25),
        *counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", V0, 3.0, created=False),
        *counter("vllm:prompt_tokens", "Number of prefill tokens processed.", V0, 40.0, created=False),
        *counter("vllm:generation_tokens", "Number of generation tokens processed.", V0, 64.0, created=False),
        *histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION, V0,
                   created=False),
        *histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT, V0,
                   created=False),
        *histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", ITL, V0,
                   created=False),
        *histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                   REQUEST, V0, created=False),
        *phases(V0, created=False),
        *histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKENS_2000, V0,
                   created=False),
        *histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", TOKENS_2000, V0,
                   created=False),
        *histogram("vllm:request_max_num_generation_tokens",
                   "Histogram of maximum number of requested generation tokens.", TOKENS_2000, V0, created=False),
        *histogram("vllm:request_params_n", "Histogram of the n request parameter.", PARAMS_N, V0, created=False),
        *histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", TOKENS_2000,
                   V0, created=False),
        ("vllm:request_success", "counter", "Count of successfully processed requests.",
         [("vllm:request_success_total", {**V0, "finished_reason": "length"}, 2.0),
          ("vllm:request_success_total", {**V0, "finished_reason": "stop"}, 1.0)]),
        # Registered, never given a sample.
        ("vllm:spec_decode_draft_acceptance_rate", "gauge", "Speulative token acceptance rate.", []),
        ("vllm:spec_decode_efficiency", "gauge", "Speculative decoding system efficiency.", []),
        ("vllm:spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.", []),
        ("vllm:spec_decode_num_draft_tokens", "counter", "Number of draft tokens.", []),
        ("vllm:spec_decode_num_emitted_tokens", "counter", "Number of emitted tokens.", []),
    ]  # fmt: skip
    got = parsed(m)
    assert [f[0] for f in got] == [f[0] for f in expected]
    for mine, want in zip(got, expected, strict=True):
        assert mine == want, want[0]


def test_v0_counter_samples_are_named_with_total_and_no_created_line_is_left() -> None:
    m = SimMetrics("tiny-qwen3", profile=get_profile("neuron-fork"), speculative=False, window=0, max_model_len=64)
    m.success["abort"].inc()
    text = m.render().decode()
    assert "_created" not in text
    assert 'vllm:request_success_total{finished_reason="abort",model_name="tiny-qwen3"} 1.0\n' in text
    assert "# TYPE vllm:spec_decode_num_emitted_tokens_total counter\n" in text
    # build_1_2_5_buckets(64): 1, 2, 5, 10, 20, 50.
    les = [s.labels["le"] for f in text_string_to_metric_families(text) if f.name == "vllm:request_params_max_tokens"
           for s in f.samples if s.name.endswith("_bucket")]  # fmt: skip
    assert les == ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "+Inf"]


@pytest.mark.parametrize("profile", ["upstream", "neuron-fork"])
def test_process_and_python_families_are_exposed_by_default(profile: str) -> None:
    # As a real vLLM server's default registry (the recorded transcript has these): the server builds SimMetrics
    # without saying, so the default must be on.
    m = SimMetrics("tiny-qwen3", profile=get_profile(profile), speculative=False, window=0, max_model_len=2048)
    types: dict[str, Any] = {f.name: f.type for f in text_string_to_metric_families(m.render().decode())}
    assert {k: v for k, v in types.items() if k.startswith(("python_", "process_"))} == {
        "python_gc_objects_collected": "counter",
        "python_gc_objects_uncollectable": "counter",
        "python_gc_collections": "counter",
        "python_info": "gauge",
        "process_virtual_memory_bytes": "gauge",
        "process_resident_memory_bytes": "gauge",
        "process_start_time_seconds": "gauge",
        "process_cpu_seconds": "counter",
        "process_open_fds": "gauge",
        "process_max_fds": "gauge",
    }
