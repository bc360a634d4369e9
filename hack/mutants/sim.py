"""Hand-made mutants of the sim area (see ``hack/mutants/__init__.py``): the simulator's cost and acceptance
model, its engine and /metrics, the load generator's stream parsing, arrivals and acceptance deltas, and
``collect``'s shard merge."""

from __future__ import annotations

_MODEL = "src/spectrn/sim/model.py"
_ENGINE = "src/spectrn/sim/engine.py"
_METRICS = "src/spectrn/sim/metrics.py"
_STREAM = "src/spectrn/loadgen/stream.py"
_ARRIVALS = "src/spectrn/loadgen/arrivals.py"
_SCRAPE = "src/spectrn/loadgen/metrics.py"
_COLLECT = "src/spectrn/bench/incluster.py"
_SINKS = "src/spectrn/sim/sinks.py"
_BODIES = "src/spectrn/sim/bodies.py"
_PARSE = "src/spectrn/sim/parse.py"

_T_MODEL = ("tests/sim/test_model_audit.py",)
_T_ENGINE = ("tests/sim/test_engine_audit.py",)
_T_STREAM = ("tests/loadgen/test_stream_audit.py",)
_T_ARRIVALS = ("tests/loadgen/test_arrivals_audit.py",)
_T_SCRAPE = ("tests/loadgen/test_metrics_audit.py",)
_T_COLLECT = ("tests/bench/test_incluster_audit.py",)
_T_SINKS = ("tests/sim/test_sinks_audit.py",)
_T_PARSE = ("tests/sim/test_parse_audit.py",)

MANUAL: tuple[tuple[str, str, str, str, tuple[str, ...], str], ...] = (
    (
        "sim-kv-per-sequence-dropped",
        _MODEL,
        "memory = c.weights_read_s + c.kv_read_per_seq_s * batch + c.kv_read_per_token_s * context_tokens",
        "memory = c.weights_read_s + c.kv_read_per_token_s * context_tokens",
        _T_MODEL,
        "every decode step too short by 0.1 ms per running sequence: TPOT off at every concurrency",
    ),
    (
        "sim-accept-cap-ignored",
        _MODEL,
        "min(a.accept_cap, base * math",
        "min(1.0, base * math",
        _T_MODEL,
        "a strong draft accepts every proposal (probability 1, not the preset's 0.98 cap)",
    ),
    (
        "sim-measured-class-not-scaled",
        _MODEL,
        "measured = [min(1.0, p * scale) for p in cls.position_probs[: self.proposals]]",
        "measured = [min(1.0, p) for p in cls.position_probs[: self.proposals]]",
        _T_MODEL,
        "a calibrated class ignores temperature and draft quality: sampling runs accept as often as greedy ones",
    ),
    (
        "sim-class-curve-off-by-one",
        _MODEL,
        "return measured + curve[len(measured) :]",
        "return measured + curve[len(measured) + 1 :]",
        _T_MODEL,
        "a calibrated class loses a proposal position: fewer tokens per step than the window allows",
    ),
    (
        "sim-acceptance-rate-per-window",
        _MODEL,
        "return (self.expected_tokens_per_step(prompt) - 1.0) / self.proposals",
        "return (self.expected_tokens_per_step(prompt) - 1.0) / self.window",
        _T_MODEL,
        "the expected acceptance rate divides by the window, not the proposals (NxDI proposes k - 1)",
    ),
    (
        "sim-crossover-tie-pays",
        _MODEL,
        "if spec >= plain:",
        "if spec > plain:",
        _T_MODEL,
        "a speculation that only ties the baseline is reported as paying up to a larger batch",
    ),
    (
        "sim-size-rule-natural-log",
        _MODEL,
        "1 + 0.08 * math.log2(ratio)",
        "1 + 0.08 * math.log(ratio)",
        _T_MODEL,
        "an uncalibrated draft larger than 1.7B gets a lower quality than the documented size rule",
    ),
    (
        "sim-predictability-six-words",
        _MODEL,
        "if len(words) >= 6:",
        "if len(words) > 6:",
        _T_MODEL,
        "a repetitive six-word prompt scores 0 predictability (open-ended acceptance)",
    ),
    (
        "sim-engine-context-without-output",
        _ENGINE,
        "ctx = sum(r.prompt_len + r.emitted for r in self.running)",
        "ctx = sum(r.prompt_len for r in self.running)",
        _T_ENGINE,
        "decode steps ignore the tokens generated so far: long outputs never slow down",
    ),
    (
        "sim-engine-prefill-longest-prompt",
        _ENGINE,
        "duration = self.model.prefill_s(sum(r.prompt_len for r in admit))",
        "duration = self.model.prefill_s(max(r.prompt_len for r in admit))",
        _T_ENGINE,
        "a prefill of several prompts costs only the longest one: TTFT too short under load",
    ),
    (
        "sim-engine-ttft-from-admission",
        _ENGINE,
        "m.ttft.observe(t - req.arrival)",
        "m.ttft.observe(t - req.admitted_at)",
        _T_ENGINE,
        "vllm:time_to_first_token_seconds leaves out queueing: the server's TTFT disagrees with the client's",
    ),
    (
        "sim-engine-tpot-divides-by-all-tokens",
        _ENGINE,
        "m.tpot.observe((t - req.first_at) / (req.emitted - 1))",
        "m.tpot.observe((t - req.first_at) / req.emitted)",
        _T_ENGINE,
        "vllm:request_time_per_output_token_seconds too low: the first token counted in the decode time",
    ),
    (
        "sim-metrics-position-label-from-one",
        _METRICS,
        "self.spec_per_pos = [per_pos.labels(**lv, position=str(i)) for i in range(window)]",
        "self.spec_per_pos = [per_pos.labels(**lv, position=str(i + 1)) for i in range(window)]",
        _T_ENGINE,
        "per-position acceptance labelled 1..k instead of vLLM's 0..k-1: the harness refuses the series",
    ),
    (
        "sim-metrics-counters-move-on-every-profile",
        _METRICS,
        "self.counts_spec = speculative and profile.spec_counters_move",
        "self.counts_spec = speculative",
        _T_ENGINE,
        "vllm-neuron's spec-decode counters move although the real plugin leaves them at 0",
    ),
    (
        "sim-metrics-generation-buckets",
        _METRICS,
        '"vllm:request_generation_tokens", "Number of generation tokens processed.", _TOKENS',
        '"vllm:request_generation_tokens", "Number of generation tokens processed.", _ITERATION',
        _T_ENGINE,
        "vllm:request_generation_tokens has other buckets than real vLLM's",
    ),
    (
        "sim-metrics-v0-max-generation-is-max-tokens",
        _METRICS,
        "self.max_num_generation_tokens.observe(emitted)",
        "self.max_num_generation_tokens.observe(max_tokens)",
        _T_ENGINE,
        "the fork's vllm:request_max_num_generation_tokens records max_tokens, not the tokens generated",
    ),
    (
        "loadgen-stream-empty-token-ids",
        _STREAM,
        "self.ids.append(len(ids) if ids is not None else None)",
        "self.ids.append(len(ids) if ids else None)",
        _T_STREAM,
        "an event with an empty token_ids list drops the run from exact token_ids counts to text estimates",
    ),
    (
        "loadgen-stream-reasoning-weight",
        _STREAM,
        "self.text_len.append(len(text) + len(thinking))",
        "self.text_len.append(len(text))",
        _T_STREAM,
        "reasoning chunks get one token each in text-estimated counts: TPOT of a thinking model wrong",
    ),
    (
        "loadgen-stream-event-limit-boundary",
        _STREAM,
        "if len(self.times) >= self.max_events:",
        "if len(self.times) > self.max_events:",
        _T_STREAM,
        "one event more than the limit is accepted before the request is classified bad_response",
    ),
    (
        "loadgen-stream-first-finish-reason",
        _STREAM,
        "self.finish_reason = valid_text(choice.finish_reason[:MAX_FINISH_REASON_CHARS])",
        "self.finish_reason = self.finish_reason or valid_text(choice.finish_reason[:MAX_FINISH_REASON_CHARS])",
        _T_STREAM,
        "the record keeps the first finish reason sent, not the last",
    ),
    (
        "loadgen-stream-apportion-rounds",
        _STREAM,
        "out = [max(1, total * x // wsum) for x in w]",
        "out = [max(1, round(total * x / wsum)) for x in w]",
        _T_STREAM,
        "text-estimated token counts round half to even, moving tokens between chunks",
    ),
    (
        "loadgen-arrivals-gamma-scale",
        _ARRIVALS,
        "rng.gammavariate(shape, 1.0 / (rate * shape))",
        "rng.gammavariate(shape, 1.0 / rate)",
        _T_ARRIVALS,
        "gamma arrivals at burstiness b send b times slower than the configured rate",
    ),
    (
        "loadgen-arrivals-burstiness-default",
        _ARRIVALS,
        'shape["burstiness"] = level.burstiness or 1.0',
        'shape["burstiness"] = level.burstiness',
        _T_ARRIVALS,
        "run.json's load shape of a gamma level without burstiness records null, not the shape 1 it ran with",
    ),
    (
        "loadgen-shard-cap-floor",
        _ARRIVALS,
        "return max(1, -(-(level.concurrency or DEFAULT_MAX_IN_FLIGHT) // shards))",
        "return max(1, (level.concurrency or DEFAULT_MAX_IN_FLIGHT) // shards)",
        _T_ARRIVALS,
        "sharded open-loop levels keep fewer requests in flight than the configured cap",
    ),
    (
        "loadgen-acceptance-rate-per-draft",
        _SCRAPE,
        '"rate": accepted / draft_tokens if draft_tokens > 0 else None',
        '"rate": accepted / drafts if draft_tokens > 0 else None',
        _T_SCRAPE,
        "acceptance rate per draft (can exceed 1) instead of per draft token",
    ),
    (
        "loadgen-workload-sample-note-lost",
        "src/spectrn/loadgen/workloads.py",
        "if opts.sample < len(prompts):",
        "if opts.sample <= len(prompts):",
        ("tests/loadgen/test_workloads_audit.py",),
        "bench.workload.sample equal to the set's size no longer warns that every prompt is used",
    ),
    (
        "loadgen-workload-set-weights-win",
        "src/spectrn/loadgen/workloads.py",
        "weights = {**prompt_set.class_weights, **opts.class_weights}",
        "weights = {**opts.class_weights, **prompt_set.class_weights}",
        ("tests/loadgen/test_workloads_audit.py",),
        "bench.workload.class_weights is ignored for classes the prompt set already weights",
    ),
    (
        "loadgen-prompt-output-tokens-uncapped",
        "src/spectrn/loadgen/schedulers.py",
        "if req.output_tokens is not None and req.output_tokens < plan.params.max_tokens:",
        "if req.output_tokens is not None:",
        ("tests/loadgen/test_schedulers_audit.py",),
        "a workload row's output length above bench.max_tokens is asked for in full",
    ),
    (
        "loadgen-ramp-cap-whole-warmup-request",
        "src/spectrn/loadgen/schedulers.py",
        "if warm_e2e is not None and ramp > warm_e2e / 2:",
        "if warm_e2e is not None and ramp > warm_e2e:",
        ("tests/loadgen/test_schedulers_audit.py",),
        "the closed-loop ramp outlasts half a request: first-wave requests end before the last streams start",
    ),
    (
        "collect-latest-end-from-earliest",
        _COLLECT,
        "latest = max(metas, key=lambda i: metas[i].finished_at or 0.0)",
        "latest = min(metas, key=lambda i: metas[i].finished_at or 0.0)",
        _T_COLLECT,
        "a sharded run's acceptance stops at the first shard's end: requests of later shards are missed",
    ),
    (
        "collect-interrupted-all",
        _COLLECT,
        '"interrupted": any(m.interrupted for m in metas.values()),',
        '"interrupted": all(m.interrupted for m in metas.values()),',
        _T_COLLECT,
        "a sharded run with one stopped shard is reported complete",
    ),
    (
        "collect-level-with-a-dot",
        _COLLECT,
        'variant, _, level = key.partition(".")',
        'variant, _, level = key.rpartition(".")',
        _T_COLLECT,
        "the merged acceptance of a rate level like r0.5 is filed under a wrong variant and level",
    ),
    (
        "collect-shard-notes-unnamed",
        _COLLECT,
        'notes += [f"shard {idx}: {note}" for note in m.notes]',
        "notes += list(m.notes)",
        _T_COLLECT,
        "merged run notes no longer say which shard wrote them",
    ),
    (
        "sim-settings-profile-semantics-dropped",
        "src/spectrn/sim/settings.py",
        "            semantics=self.server_profile.window,\n",
        "",
        ("tests/sim/test_settings_audit.py",),
        "--profile upstream on the Neuron preset still proposes window - 1 tokens (NxDI semantics)",
    ),
    (
        "sim-sink-role-event-usage",
        _SINKS,
        'pids = self.prompt_ids_json if self.return_token_ids else "null"\n'
        "                role_usage = f',\"usage\":{self._usage(0)}'",
        'pids = self.prompt_ids_json if self.return_token_ids else "null"\n'
        "                role_usage = f',\"usage\":{self._usage(done)}'",
        _T_SINKS,
        "a chat stream's role event already claims the first token: usage-counted chunks are off by one",
    ),
    (
        "sim-sink-final-usage-needs-continuous",
        _SINKS,
        "if self.include_usage:\n                events.append(self._final_usage(done))",
        "if self.continuous_usage:\n                events.append(self._final_usage(done))",
        _T_SINKS,
        "include_usage alone gives no final usage event: the client has no server token count",
    ),
    (
        "sim-sink-held-text-lost-at-the-end",
        _SINKS,
        "        if finish:\n            out.extend(held)\n            held.clear()",
        "        if finish:\n            held.clear()",
        _T_SINKS,
        "the Neuron fork profile drops the text its detokenizer held back when the stream ends",
    ),
    (
        "sim-sink-prompt-ids-on-every-event",
        _SINKS,
        'pids = self.prompt_ids_json if (first and self.return_token_ids) else "null"',
        'pids = self.prompt_ids_json if self.return_token_ids else "null"',
        _T_SINKS,
        "every completion event repeats prompt_token_ids, unlike vLLM (first event only)",
    ),
    (
        "sim-body-total-tokens-without-prompt",
        _BODIES,
        '"total_tokens": req.prompt_len + req.emitted,\n        "completion_tokens": req.emitted,\n'
        '        "prompt_tokens_details": None,\n        "completion_tokens_details": None,',
        '"total_tokens": req.emitted,\n        "completion_tokens": req.emitted,\n'
        '        "prompt_tokens_details": None,\n        "completion_tokens_details": None,',
        _T_SINKS,
        "a non-streaming body's usage.total_tokens leaves out the prompt",
    ),
    (
        "sim-parse-eos-on-the-max-tokens-token",
        _PARSE,
        'if natural >= max_tokens else (natural, "stop")',
        'if natural > max_tokens else (natural, "stop")',
        _T_PARSE,
        "a request cut by max_tokens exactly where EOS falls reports finish stop instead of length",
    ),
    (
        "sim-parse-min-tokens-ignored",
        _PARSE,
        "natural = max(min_tokens, natural_length(prompt_text, s.seed))",
        "natural = natural_length(prompt_text, s.seed)",
        _T_PARSE,
        "min_tokens is accepted but outputs still end at their natural EOS",
    ),
    (
        "sim-parse-default-temperature-greedy",
        _PARSE,
        "temperature = 1.0 if temperature is None else float(temperature)",
        "temperature = 0.0 if temperature is None else float(temperature)",
        _T_PARSE,
        "a request without temperature is simulated greedy (vLLM samples at 1.0): acceptance too high",
    ),
    (
        "collect-expected-pods-from-parallelism",
        _COLLECT,
        'return int(spec.get("completions") or spec.get("parallelism") or 1)',
        'return int(spec.get("parallelism") or 1)',
        _T_COLLECT,
        "an Indexed Job running fewer pods at once than it completes is collected before every shard is done",
    ),
    (
        "collect-shard-index-label-ignored",
        _COLLECT,
        'raw = annotations.get(INDEX_ANNOTATION) or labels.get(INDEX_ANNOTATION) or "0"',
        'raw = annotations.get(INDEX_ANNOTATION) or "0"',
        _T_COLLECT,
        "pods that carry the completion index as a label only are all collected as shard 0",
    ),
)
