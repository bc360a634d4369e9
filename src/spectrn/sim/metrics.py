"""The simulator's ``/metrics``: vLLM's Prometheus families, names, help texts, labels and buckets.

Names follow vLLM's v1 engine as recorded in ``tests/fixtures/vllm-real`` (counters are exposed with
``_total`` and a ``_created`` gauge family, exactly as prometheus_client writes them). Spec-decode
counters exist only when speculation is on, starting at 0. Latency histograms are fed with the engine's
*scheduled* times, so they are the ground truth the harness's client-side measurements are checked against.
Each app has its own registry, so several simulators can run in one process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

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
_TOKENS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)
_ITERATION = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")

CONTENT_TYPE = CONTENT_TYPE_LATEST


class SimMetrics:
    """All families for one served model; ``render()`` gives the exposition bytes."""

    def __init__(self, model_name: str, *, speculative: bool, window: int, process_metrics: bool = True) -> None:
        self.registry = CollectorRegistry()
        if process_metrics:
            from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR

            for collector in (GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR):
                self.registry.register(collector)
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

        self.speculative = speculative
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
        self.req_prompt_tokens = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", _TOKENS)
        self.req_generation_tokens = hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", _TOKENS
        )
        self.iteration_tokens = hist(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", _ITERATION
        )
        self.max_tokens_param = hist(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", _TOKENS
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
        self.queue_time = hist(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", _LATENCY_REQUEST
        )
        self.inference_time = hist(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            _LATENCY_REQUEST,
        )
        self.prefill_time = hist(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            _LATENCY_REQUEST,
        )
        self.decode_time = hist(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", _LATENCY_REQUEST
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
