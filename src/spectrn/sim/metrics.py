"""The simulator's ``/metrics``: the Prometheus families of the imitated server (see ``profiles``).

``v1`` (upstream vLLM, vllm-neuron): names as recorded in ``tests/fixtures/vllm-real`` (counters exposed
with ``_total`` and a ``_created`` sample, labels ``model_name`` and ``engine``); spec-decode counters exist
only when speculation is on, starting at 0, and move only on ``upstream`` (vllm-neuron 0.2.x never passes
draft tokens to vLLM's scheduler, so they stay at 0).

``v0`` (the Neuron fork, vLLM 0.9's V0 engine, ``vllm/engine/metrics.py``): label ``model_name`` only, no
``_created`` samples (the fork calls ``prometheus_client.disable_created_metrics()``), per-step latency in
``vllm:time_per_output_token_seconds`` (there is no ``inter_token_latency`` or per-request TPOT family), and
five spec-decode families that are always registered but never get a sample on Neuron (only the
SpecDecodeWorker fills them, and Neuron never runs it).

Both dialects bound their token-count histograms with vLLM's ``build_1_2_5_buckets(max_model_len)``.

Latency histograms are fed with the engine's *scheduled* times, so they are the ground truth the harness's
client-side measurements are checked against. Each app has its own registry, so several simulators can run in
one process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric

from spectrn.sim.profiles import ServerProfile

_LATENCY_TTFT = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
_LATENCY_ITL = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
_LATENCY_REQUEST = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip
_ITERATION = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")

CONTENT_TYPE = CONTENT_TYPE_LATEST


def _buckets_1_2_5(max_value: int) -> tuple[float, ...]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, 20, 50, ... up to ``max_value``."""
    out: list[float] = []
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_value:
                return tuple(out)
            out.append(float(m * scale))
        scale *= 10


class _Null:
    """A histogram the imitated server does not have: an observation is a no-op."""

    def observe(self, value: float) -> None:
        pass


class SimMetrics:
    """All families for one served model; ``render()`` gives the exposition bytes."""

    success: Any  # finished_reason -> counter child
    tpot: Any  # a Histogram child, or _Null where the server has no per-request TPOT family
    spec_per_pos: list[Any]  # V1, speculative only: one counter child per draft position

    def __init__(
        self,
        model_name: str,
        *,
        profile: ServerProfile,
        speculative: bool,
        window: int,
        max_model_len: int = 1024,
        process_metrics: bool = True,
    ) -> None:
        # The fork disables prometheus_client's _created samples (process-wide there; per registry here).
        self.registry = _RegistryWithoutCreated() if profile.metrics == "v0" else CollectorRegistry()
        self.profile = profile
        self.counts_spec = speculative and profile.spec_counters_move
        if process_metrics:
            from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR

            for collector in (GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR):
                self.registry.register(collector)
        if profile.metrics == "v0":
            self._init_v0(model_name, max_model_len)
        else:
            self._init_v1(model_name, speculative, window, max_model_len)

    def _init_v1(self, model_name: str, speculative: bool, window: int, max_model_len: int) -> None:
        tokens = _buckets_1_2_5(max_model_len)  # V1's token histograms too (vllm/v1/metrics/loggers.py)
        labels = ("model_name", "engine")
        lv = {"model_name": model_name, "engine": "0"}
        r = self.registry

        def counter(name: str, doc: str) -> Counter:
            c = Counter(name, doc, labels, registry=r)
            return c.labels(**lv)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r).labels(**lv)

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(**lv)

        if speculative:
            self.spec_drafts = counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            self.spec_draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
            self.spec_accepted = counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
            per_pos = Counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                (*labels, "position"),
                registry=r,
            )
            # V1 registers one child per position of num_speculative_tokens.
            self.spec_per_pos = [per_pos.labels(**lv, position=str(i)) for i in range(window)]
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            (*labels, "finished_reason"),
            registry=r,
        )
        self.success = {reason: success.labels(**lv, finished_reason=reason) for reason in FINISH_REASONS}
        self.req_prompt_tokens = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
        self.req_generation_tokens = hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", tokens
        )
        self.iteration_tokens = hist(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", _ITERATION
        )
        self.max_num_generation_tokens = hist(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        )
        self.params_n = hist("vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20))
        self.max_tokens_param = hist(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens
        )
        self.ttft = hist(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _LATENCY_TTFT
        )
        self.itl = hist(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", _LATENCY_ITL
        )
        self.tpot = hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            _LATENCY_ITL,
        )
        self.e2e = hist(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", _LATENCY_REQUEST
        )
        self.queue_time, self.inference_time, self.prefill_time, self.decode_time = _phase_histograms(hist)

    def _init_v0(self, model_name: str, max_model_len: int) -> None:
        lv = {"model_name": model_name}
        labels = ("model_name",)
        r = self.registry

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=r).labels(**lv)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r).labels(**lv)

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(**lv)

        tokens = _buckets_1_2_5(max_model_len)
        self.running = gauge("vllm:num_requests_running", "Number of requests currently running on GPU.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self._lora = Gauge(
            "vllm:lora_requests_info",
            "Running stats on lora requests.",
            ("running_lora_adapters", "max_lora", "waiting_lora_adapters"),
            registry=r,
        ).labels(running_lora_adapters="", max_lora="0", waiting_lora_adapters="")
        self.kv_usage = gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.")
        self.preemptions = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
        self.iteration_tokens = hist(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", _ITERATION
        )
        self.ttft = hist(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _LATENCY_TTFT
        )
        # V0's "time per output token" is observed per engine step and running request: an inter-token latency.
        self.itl = hist(
            "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", _LATENCY_ITL
        )
        self.e2e = hist(
            "vllm:e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
            _LATENCY_REQUEST,
        )
        self.queue_time, self.inference_time, self.prefill_time, self.decode_time = _phase_histograms(hist)
        self.req_prompt_tokens = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
        self.req_generation_tokens = hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", tokens
        )
        self.max_num_generation_tokens = hist(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        )
        self.params_n = hist("vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20))
        self.max_tokens_param = hist(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens
        )
        success = Counter(
            "vllm:request_success_total",
            "Count of successfully processed requests.",
            (*labels, "finished_reason"),
            registry=r,
        )
        # V0 creates a finished_reason child when a request first finishes that way.
        self.success = _LazyLabels(success, lv, "finished_reason")
        self.tpot = _Null()
        # Always registered, never given a sample on Neuron.
        Gauge("vllm:spec_decode_draft_acceptance_rate", "Speulative token acceptance rate.", labels, registry=r)
        Gauge("vllm:spec_decode_efficiency", "Speculative decoding system efficiency.", labels, registry=r)
        Counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", labels, registry=r)
        Counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", labels, registry=r)
        Counter("vllm:spec_decode_num_emitted_tokens_total", "Number of emitted tokens.", labels, registry=r)

    # ---- updates the engine makes --------------------------------------------------------------------
    def spec_step(self, proposals: int, accepted: int) -> None:
        """One speculative decode step of one request (counted only where the server's counters move)."""
        if not self.counts_spec:
            return
        self.spec_drafts.inc()
        self.spec_draft_tokens.inc(proposals)
        self.spec_accepted.inc(accepted)
        for i in range(accepted):
            self.spec_per_pos[i].inc()

    def request_done(self, emitted: int, max_tokens: int) -> None:
        """Per-request size histograms: the most tokens any of its n sequences generated (n is 1 here)."""
        self.max_num_generation_tokens.observe(emitted)
        self.params_n.observe(1)

    def render(self) -> bytes:
        if self.profile.metrics == "v0":
            self._lora.set(time.time())
        return generate_latest(self.registry)


class _RegistryWithoutCreated(CollectorRegistry):
    """A registry whose families carry no ``_created`` samples (so the exposition has no ``*_created`` families)."""

    def collect(self) -> Iterator[Metric]:
        for family in super().collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


class _LazyLabels:
    """``success[reason].inc()`` creating the labelled child on first use."""

    def __init__(self, family: Counter, labels: dict[str, str], key: str) -> None:
        self.family = family
        self.labels = labels
        self.key = key

    def __getitem__(self, value: str) -> Any:
        # ``labels()`` returns the child it made the first time for these values.
        return self.family.labels(**self.labels, **{self.key: value})


def _phase_histograms(
    hist: Callable[[str, str, tuple[float, ...]], Histogram],
) -> tuple[Histogram, Histogram, Histogram, Histogram]:
    """The per-request phase histograms (queue, inference, prefill, decode), named and described alike by V0 and V1."""
    queue, inference, prefill, decode = (
        hist(
            f"vllm:request_{name}_time_seconds",
            f"Histogram of time spent in {phase} phase for request.",
            _LATENCY_REQUEST,
        )
        for name, phase in (
            ("queue", "WAITING"),
            ("inference", "RUNNING"),
            ("prefill", "PREFILL"),
            ("decode", "DECODE"),
        )
    )
    return queue, inference, prefill, decode
