"""What to send and how: the prompt workload (files, synthetic lengths, classes) and the bench settings, with the
one-load-shape-per-run rule."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from spectrn.configuration.base import Strict
from spectrn.configuration.origins import FieldError, Origins, dotted_path, flag_of
from spectrn.names import name_problem

MAX_REQUESTS = 1_000_000
# A prompt longer than this is no prompt: 10 million characters is about 20 times the longest context spectrn takes
# (max_model_len 131072 tokens at about 4 characters each).
MAX_PROMPT_CHARS = 10_000_000


class LengthDistribution(Strict):
    """A seeded length distribution (synthetic workloads): draws are rounded and clipped to [min, max]."""

    dist: Literal["fixed", "uniform", "normal", "lognormal"] = Field(
        default="fixed",
        description="fixed: always mean; uniform: mean +- spread; normal: mean, standard deviation spread; lognormal: median mean, sigma of the logarithm spread.",
    )
    mean: float = Field(gt=0, le=1_000_000, description="The mean (lognormal: the median).")
    spread: float = Field(
        default=0.0,
        ge=0,
        le=1_000_000,
        description="uniform: half-width; normal: standard deviation; lognormal: sigma.",
    )
    min: int = Field(default=1, ge=1, le=1_000_000, description="Smallest length drawn.")
    max: int = Field(default=100_000, ge=1, le=1_000_000, description="Largest length drawn.")

    @model_validator(mode="after")
    def _bounds(self) -> LengthDistribution:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        if self.dist != "fixed" and self.spread == 0:
            raise ValueError(f"dist {self.dist} needs a spread above 0 (or use dist: fixed)")
        return self


class SyntheticWorkload(Strict):
    """``bench.prompts: synthetic``: seeded prompts of drawn lengths (docs/workloads.md, Synthetic workloads)."""

    prompts: int = Field(default=256, ge=1, le=100_000, description="Distinct prompts to make.")
    input_words: LengthDistribution = Field(
        default_factory=lambda: LengthDistribution(mean=256),
        description="Words per prompt (about 1.3 tokens a word in English; for exact token counts add bench.input_tokens, which shapes prompts through the server's /tokenize).",
    )
    output_tokens: LengthDistribution | None = Field(
        default=None,
        description="Output tokens per prompt (each request's max_tokens, capped at bench.max_tokens); unset: bench.max_tokens for all.",
    )
    prompt_class: str = Field(default="synthetic", description="The prompt class of every synthetic prompt.")

    @field_validator("prompt_class")
    @classmethod
    def _class(cls, v: str) -> str:
        problem = name_problem(v)
        if problem:
            raise ValueError(problem)
        return v


def positive_weights(v: dict[str, float]) -> dict[str, float]:
    """Class weights are shares of a schedule: each a positive, finite number (a class to leave out has no prompts)."""
    for key, weight in v.items():
        if not (0 < weight < 1e9):  # also refuses NaN and infinity
            raise ValueError(f"{weight} for class {key!r} is not a positive weight")
    return v


class WorkloadConfig(Strict):
    """How a prompt file is read and shaped (docs/workloads.md); the defaults change nothing."""

    format: Literal["auto", "yaml", "jsonl", "sharegpt", "csv", "spec-bench", "hf-disk"] = Field(
        default="auto",
        description="Format of the bench.prompts file: auto picks by extension and content (.yaml/.yml: YAML prompt set; .json: ShareGPT when it is a list, else YAML; .jsonl: Spec-Bench when the first row has question_id and turns, else JSONL; .csv: CSV; a folder: a Hugging Face dataset saved with save_to_disk).",
    )
    sample: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Keep this many prompts, drawn with bench.seed after the length filters (unset: all).",
    )
    min_chars: int | None = Field(
        default=None,
        ge=0,
        le=MAX_PROMPT_CHARS,
        description="Drop prompts whose text (first turn, as in the file) has fewer characters (at most 10000000).",
    )
    max_chars: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PROMPT_CHARS,
        description="Drop prompts whose text (first turn, as in the file) has more characters (at most 10000000).",
    )
    class_map: dict[str, str] = Field(
        default_factory=dict,
        description="Category in the file -> prompt class (a safe name); unmapped categories are sanitized (docs/workloads.md).",
    )
    class_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Prompt class -> relative share of the schedule's requests (classes not listed: 1); empty: every prompt equally often.",
    )
    default_class: str = Field(default="default", description="Prompt class of rows without a category.")
    system_prompt: str = Field(
        default="",
        max_length=100_000,
        description="A system message sent before every request (chat API: role system; completions API: the first paragraph of the prompt), identical for every request.",
    )
    prefix: str = Field(
        default="",
        max_length=100_000,
        description="Text put verbatim before every prompt (after the system prompt), identical for every request.",
    )
    prompt_field: str | None = Field(
        default=None,
        description="JSONL/CSV/hf-disk: the column holding the prompt (unset: prompt, then text, then messages).",
    )
    class_field: str | None = Field(
        default=None, description="JSONL/CSV/hf-disk: the column holding the category (unset: class, then category)."
    )
    output_tokens_field: str | None = Field(
        default=None,
        description="JSONL/CSV/hf-disk: the column holding an output length hint (unset: output_tokens, then max_tokens).",
    )
    id_field: str | None = Field(
        default=None,
        description="JSONL/CSV/hf-disk: the column holding the prompt id (unset: id; else the row number).",
    )
    synthetic: SyntheticWorkload = Field(
        default_factory=SyntheticWorkload,
        description="With bench.prompts: synthetic, the prompts made (seeded by bench.seed).",
    )

    @field_validator("default_class")
    @classmethod
    def _default_class(cls, v: str) -> str:
        problem = name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("class_map")
    @classmethod
    def _class_map(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            problem = name_problem(value)
            if problem:
                raise ValueError(f"class_map[{key!r}]: {problem}")
        return v

    @field_validator("class_weights")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        return positive_weights(v)

    @model_validator(mode="after")
    def _lengths(self) -> WorkloadConfig:
        if self.min_chars is not None and self.max_chars is not None and self.min_chars > self.max_chars:
            # named field by field: a --set of either key is found where the section itself has no origin
            raise FieldError(
                f"bench.workload: min_chars {self.min_chars} is above max_chars {self.max_chars}",
                fields=("bench.workload.min_chars", "bench.workload.max_chars"),
                fix="lower bench.workload.min_chars or raise bench.workload.max_chars",
            )
        return self


class BenchConfig(Strict):
    prompts: str = Field(
        default="structured",
        description="Prompt set name (structured, open, sample, all), synthetic (seeded prompts of drawn lengths: bench.workload.synthetic), or a path to a prompt file or saved dataset (formats: docs/workloads.md).",
    )
    api: Literal["chat", "completions"] = Field(default="chat", description="OpenAI API used for requests.")
    concurrency: list[int] = Field(
        default=[4],
        description="Closed-loop concurrency levels (one run per level); a single number is one level.",
    )
    request_rate: list[float] | None = Field(
        default=None,
        description="Open-loop request rates per endpoint (req/s), one level each (labelled r2 for 2 req/s); a single number is one level. Excludes concurrency and trace (docs/load-shapes.md).",
    )
    arrivals: Literal["poisson", "constant", "gamma"] = Field(
        default="poisson",
        description="Arrival process of open-loop rates: poisson (exponential gaps), constant (equal gaps) or gamma (gaps of shape burstiness). Seeded by seed; both endpoints get the same arrival times.",
    )
    burstiness: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        description="Shape of gamma arrivals (only with arrivals: gamma; unset: 1.0): 1 is Poisson, below 1 burstier, above 1 smoother (as vllm bench serve --burstiness).",
    )
    max_in_flight: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Open loop (request_rate or trace): at most this many requests in flight per endpoint; an arrival that finds the cap reached waits, and its TTFT counts from its send (record field queued_s: the wait). Unset: 1024.",
    )
    duration_s: float | None = Field(
        default=None,
        gt=0,
        le=7 * 86400,
        description="Run each level for this many seconds: no request starts after it, those in flight finish (or hit timeout_s). requests is then an upper bound (default 1,000,000 when not given).",
    )
    trace: str | None = Field(
        default=None,
        description="Replay a trace: a JSONL or CSV file of arrival offsets in seconds (timestamp or arrival_s), with optional input_tokens and output_tokens per row; one level, labelled trace. Excludes request_rate and concurrency.",
    )
    requests: int = Field(
        default=32,
        ge=1,
        le=MAX_REQUESTS,
        description="Measured requests per endpoint and level; with duration_s or trace an upper bound, 1,000,000 when not given.",
    )
    warmup: int = Field(
        default=2, ge=0, le=10_000, description="Warm-up requests per endpoint, excluded from statistics."
    )
    max_tokens: int = Field(
        default=600,
        ge=1,
        le=131072,
        description="Output tokens per request: the exact length with ignore_eos, else the cap on a natural length.",
    )
    ignore_eos: bool | None = Field(
        default=None,
        description='Ask for max_tokens exactly (ignore_eos with min_tokens = max_tokens) instead of letting each answer end at its end-of-sequence token; unset: on for the built-in sets (structured, open, sample, all), off for a prompt file or dataset, whose natural lengths are part of the workload (docs/benchmarks.md, "Natural output lengths"). The llmperf engine sends it only when set.',
    )
    input_tokens: int | None = Field(
        default=None,
        ge=1,
        le=131072,
        description="Target input length; prompts are extended to this many tokens using the server's /tokenize.",
    )
    temperature: float = Field(
        default=0.0, ge=0.0, le=2.0, description="Sampling temperature, always sent (0 = greedy)."
    )
    schedule: Literal["simultaneous", "interleaved"] = Field(
        default="simultaneous",
        description="Run both endpoints at once (as the published experiment) or alternate A/B/A/B.",
    )
    nonce: bool = Field(default=False, description="Prefix each prompt with a unique nonce to defeat prefix caching.")
    ramp_s: float | None = Field(
        default=None,
        ge=0,
        le=3600,
        description="Spread the start of the closed-loop workers evenly over this many seconds; unset: 10 ms per stream (at most 10 s and half a warm-up request), so TTFT means the same at every load (docs/benchmarks.md); 0: all start at once, as the published experiment.",
    )
    timeout_s: float = Field(
        default=1200.0,
        gt=0,
        le=86400,
        description="Per-request timeout (seconds). The llmperf engine has no per-request setting of its own: its --timeout is the whole run's budget, rendered as this timeout times the number of waves (requests / concurrency).",
    )
    seed: int = Field(default=0, description="Seed for prompt order and Poisson arrivals.")
    max_error_rate: float = Field(
        default=0.05, ge=0, le=1, description="Above this error rate a run is flagged as not clean."
    )
    slo: list[str] = Field(
        default_factory=list,
        description="Latency targets (docs/slo.md): per request (tpot<=50ms: a request meets it when its own value does; these define goodput) or at a percentile (p90:tpot<=50ms), on ttft, tpot, itl or e2e, units ms or s, optionally for one prompt class (structured/p90:tpot<=40ms).",
    )
    slo_ttft_s: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="Per-request SLO on TTFT in seconds (at most a day, like timeout_s): the same as slo: [ttft<=X s].",
    )
    slo_tpot_s: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="Per-request SLO on TPOT in seconds (at most a day, like timeout_s): the same as slo: [tpot<=X s].",
    )
    loadgen_pods: int = Field(
        default=1, ge=1, le=64, description="Pods of the in-cluster load Job (Indexed Job shards)."
    )
    workload: WorkloadConfig = Field(
        default_factory=WorkloadConfig,
        description="How the prompt file is read and shaped: format, sampling, filters, classes (docs/workloads.md).",
    )

    @model_validator(mode="before")
    @classmethod
    def _bound_by_time(cls, data: Any) -> Any:
        """A level bounded by its duration or its trace is not cut at the default 32 requests."""
        if isinstance(data, dict) and data.get("requests") is None:
            if data.get("duration_s") is not None or data.get("trace") is not None:
                data = {**data, "requests": MAX_REQUESTS}
        return data

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: list[str]) -> list[str]:
        """Parsed at load, so a typo fails before any request is sent (the text is kept as written)."""
        from spectrn.analyze.slo import SloSyntaxError, parse_slos

        try:
            parse_slos(v)
        except SloSyntaxError as e:
            raise FieldError(f"bench.slo: {e.message}", fields=("bench.slo",), fix=e.fix) from None
        return v

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate_list(cls, v: Any) -> Any:
        """``2`` and ``"1,2,4"`` (a flag, an environment variable, a run.json from before lists) are lists too."""
        if isinstance(v, str) and "," in v:
            return [part.strip() for part in v.split(",") if part.strip()]
        if v is not None and not isinstance(v, list):
            return [v]
        return v

    @field_validator("request_rate")
    @classmethod
    def _rates(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("needs at least one rate")
        for rate in v:
            if not 0 < rate <= 1_000_000:  # also refuses NaN and infinity
                raise ValueError(f"rate {rate:g} is outside (0, 1000000] req/s")
        if len({f"{r:g}" for r in v}) < len(v):
            raise ValueError(f"rates {v} repeat a level")
        return v

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("needs at least one level")
        for level in v:
            if level < 1 or level > 4096:
                raise ValueError(f"level {level} outside 1..4096")
        if len(set(v)) < len(v):  # two c4 levels would share one label: one run's results overwrite the other's
            raise ValueError(f"levels {v} repeat a level")
        return v


def load_shape_rules(b: BenchConfig, origins: Origins | None) -> None:
    """One load shape per run: closed-loop concurrency, open-loop rates or a trace, each with only the
    settings that apply to it. ``concurrency`` has a default (and ``spectrn init`` writes it), so it
    conflicts only where a person chose it: a flag, ``--set``, the environment, or a file value other than
    the default; without ``origins`` (a config rebuilt from a dump) that rule is not applied."""

    def chosen(key: str) -> bool:
        found = origins.find(dotted_path(key)) if origins else None
        if found is None:
            return False
        if found.startswith(("flag ", "--set ", "environment variable ")):
            return True
        name = key.split(".")[1]
        return bool(getattr(b, name) != BenchConfig.model_fields[name].default)

    def given(key: str) -> str:
        flag = flag_of(origins, dotted_path(key))
        value = getattr(b, key.split(".")[1])
        text = (
            ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in value)
            if isinstance(value, list)
            else (f"{value:g}" if isinstance(value, float) else str(value))
        )
        return f"{flag or key} {text}"

    def conflict(a: str, c: str, why: str, fix: str) -> FieldError:
        return FieldError(f"{given(a)} and {given(c)} both given: {why}", fields=(a, c), fix=fix)

    open_loop = "bench.trace" if b.trace is not None else "bench.request_rate"
    if b.request_rate is not None and b.trace is not None:
        raise conflict(
            "bench.trace", "bench.request_rate", "a trace brings its own arrival times",
            "give one of them: --trace replays the file's times, --rate generates arrivals",
        )  # fmt: skip
    if (b.request_rate is not None or b.trace is not None) and chosen("bench.concurrency"):
        raise conflict(
            open_loop, "bench.concurrency",
            "open-loop arrivals and closed-loop streams are two load shapes; one run has one",
            "keep one of them (remove the other from where it came from); cap open-loop requests in "
            "flight with --max-in-flight",
        )  # fmt: skip
    if b.burstiness is not None and b.arrivals != "gamma":
        raise conflict(
            "bench.burstiness", "bench.arrivals", "burstiness is the shape of gamma arrivals only",
            "set --arrivals gamma, or drop --burstiness",
        )  # fmt: skip
    if b.arrivals != "poisson" and b.trace is not None:
        raise conflict(
            "bench.arrivals", "bench.trace", "a trace brings its own arrival times",
            "drop --arrivals when replaying a trace",
        )  # fmt: skip
    if b.arrivals != "poisson" and b.request_rate is None:
        raise FieldError(
            f"{given('bench.arrivals')} needs an open-loop rate: arrival processes apply to bench.request_rate",
            fields=("bench.arrivals",),
            fix="add --rate REQ/S (e.g. --rate 2), or drop --arrivals for closed loop",
        )
    if b.max_in_flight is not None and b.request_rate is None and b.trace is None:
        raise FieldError(
            f"{given('bench.max_in_flight')} applies to open loop only: a closed-loop level has exactly "
            "concurrency requests in flight",
            fields=("bench.max_in_flight", "bench.concurrency"),
            fix="add --rate REQ/S or --trace FILE, or drop --max-in-flight and set --concurrency",
        )
