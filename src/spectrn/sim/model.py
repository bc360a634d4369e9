"""The simulator's ground truth: cost model, acceptance model and calibrated presets (pure, no I/O).

Everything the engine does with time and acceptance is computed here, so that tests and the load
generator's checks can ask the same functions what *should* happen.

Window semantics (``spectrn.windows``): with window ``k`` a step proposes ``P = proposals(sem, k)`` draft
tokens (``k - 1`` on NxDI, ``k`` upstream), the target verifies ``V = P + 1`` positions per sequence and
the step emits at most ``V`` tokens. The draft runs ``k`` times either way (NxDI's extra run fills its
KV cache).

Cost model (seconds, before ``time_scale``; ``b`` = running sequences, ``C`` = sum of their context
tokens, ``t`` = positions processed per sequence). A decode step is a roofline: whichever of reading
memory and computing takes longer.

    target(b, C, t) = max(weights_read_s + kv_read_per_seq_s * b + kv_read_per_token_s * C,    memory
                          compute_per_token_s * b * t)                                          compute
    draft(b, C)     = max(run_s + kv_read_per_token_s' * C,  compute_per_token_s' * b)           one draft pass
    baseline step   = target(b, C, 1)
    spec step       = k * draft(b, C) + target(b, C, V)
    prefill(P)      = prefill_base_s + prefill_per_token_s * P          P = prompt tokens admitted in the step

(primed values are the draft's). At the published load (4 sequences) both models are memory bound, so a
speculative step costs the baseline step plus ``k`` draft passes. The compute term takes over when
``b * V`` passes ``weights_read_s / compute_per_token_s`` (about 260 positions per step in
``qwen3-32b-trn2``): from there every verified position costs compute, rejected ones included, and
speculation stops paying. ``crossover_batch`` finds that concurrency; docs/simulator.md tabulates it.
Prefill is the same with or without speculation (the published experiment found TTFT unchanged).

Acceptance model. A prompt's *predictability* ``p`` in [0, 1] comes from its content only (see
``predictability``): repeated word bigrams, zlib compressibility, and cue words for structured output
(counting, lists, JSON, code) versus open-ended output (story, essay, explain...). Then

    alpha(prompt) = alpha_open + (alpha_structured - alpha_open) * p
    a_i           = min(accept_cap, alpha * quality(draft) * exp(-(i / decay_tau) ** decay_gamma)),  i = 0..P-1

``a_i`` is the probability that draft position ``i`` is accepted given that all earlier positions were
(divided by ``1 + temperature_penalty * T`` when sampling at temperature ``T`` > 0: sampled tokens agree
less often with the draft; an assumption, not a calibration).
Real acceptance decays with position (see the per-position counters); the stretched-exponential keeps the
first few positions nearly flat and falls steeply past ``decay_tau``, which is what makes window 7 beat both
5 and 15 on a structured mix. Each step draws positions in order and stops at the first rejection; the
step emits the accepted prefix plus one token from the target, so

    E[tokens per step] = 1 + sum_{i=1..P} prod_{j<i} a_j

(for a constant ``a`` this is the familiar (1 - a^(P+1)) / (1 - a)). ``quality`` is 1.0 for the reference
draft (qwen3-1.7b) and 0.4 for qwen3-0.6b (the published "~60% lower acceptance"); other catalog models
follow a size rule: quality = (params / 1.7) ** 0.88 below 1.7B and 1 + 0.08 * log2(params / 1.7) above;
a draft pass costs ref_draft_run_s * sqrt(params / 1.7) (small drafts on a wide tensor-parallel group are
latency bound, so cost grows slowly with size) and its KV and compute terms scale with params / target params.

Per-class acceptance (``acceptance.classes``, written by ``spectrn twin calibrate``). A prompt that contains one
of a class's texts (or matches its ``pattern``) takes that class's measured conditional acceptance per position
(``position_probs``) instead of the predictability rule; positions beyond the measured ones follow the class's
decay curve ``alpha * exp(-(i / decay_tau) ** decay_gamma)`` (capped at ``accept_cap``). Both are multiplied by
the draft's quality (1 for the calibrated draft) and divided by the temperature penalty, as above. Prompts no
class matches use the predictability rule.

Calibration of ``qwen3-32b-trn2`` (target Qwen3-32B, TP 32, LNC 2, batch limit 4, NxDI semantics; see
``expected_tpot_s``): baseline ~45 ms per token at concurrency 4; 1.7B draft window 7 ~15 ms on structured
prompts and about baseline on open-ended ones; 0.6B draft no net gain; window 5 and 15 both slower than 7
on a structured mix.
"""

from __future__ import annotations

import math
import re
import zlib
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from spectrn.configuration.catalog import MODELS
from spectrn.sim.profiles import ProfileName, check_profile_name, get_profile
from spectrn.windows import WindowSemantics, draft_runs, proposals, verified_tokens

REFERENCE_DRAFT_PARAMS_B = 1.7


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CostModel(_Strict):
    """Step costs in seconds at time scale 1 (see the module docstring for the formulas)."""

    prefill_base_s: float = Field(default=0.030, ge=0, description="Fixed cost of a prefill (context encoding) step.")
    prefill_per_token_s: float = Field(default=0.00025, ge=0, description="Prefill cost per prompt token.")
    weights_read_s: float = Field(
        default=0.0440,
        gt=0,
        description="Memory term of a target step: one read of the weights plus the step's fixed work.",
    )
    kv_read_per_seq_s: float = Field(
        default=0.0001, ge=0, description="Memory term per running sequence (its cache blocks, sampling)."
    )
    kv_read_per_token_s: float = Field(
        default=1.7e-7, ge=0, description="Memory term per context token in the batch (KV cache read)."
    )
    compute_per_token_s: float = Field(
        default=1.7e-4,
        ge=0,
        description="Compute term per position processed in a step (batch x positions verified per sequence).",
    )
    ref_draft_run_s: float = Field(
        default=0.0035, ge=0, description="Memory term of one pass of a 1.7B draft (base of the size rule)."
    )


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class AcceptanceClass(_Strict):
    """Measured acceptance of one prompt class, and which prompts belong to it (see the module docstring)."""

    name: str = Field(min_length=1, max_length=100, description="Prompt class label, e.g. structured.")
    contains: list[str] = Field(
        default_factory=list, description="A prompt containing any of these texts belongs to the class."
    )
    pattern: str | None = Field(
        default=None, description="Or: a prompt matching this regular expression (Python re.search) belongs to it."
    )
    position_probs: list[float] = Field(
        default_factory=list,
        description="Conditional acceptance of proposal position i given positions 0..i-1 were accepted, as measured.",
    )
    alpha: float = Field(
        ge=0, le=1, description="First-position acceptance of the class's decay curve (positions beyond the table)."
    )

    @field_validator("position_probs")
    @classmethod
    def _probs(cls, v: list[float]) -> list[float]:
        for i, p in enumerate(v):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"position_probs[{i}] = {p} is not a probability in [0, 1]")
        return v

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                _compiled(v)
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from None
        return v

    @model_validator(mode="after")
    def _selects(self) -> AcceptanceClass:
        if not self.contains and self.pattern is None:
            raise ValueError(f"class {self.name!r} selects no prompt: give contains (texts) or pattern (a regex)")
        return self

    def matches(self, prompt: str) -> bool:
        if any(text in prompt for text in self.contains):
            return True
        return self.pattern is not None and _compiled(self.pattern).search(prompt) is not None


class AcceptanceModel(_Strict):
    """How often the draft's proposals are accepted."""

    alpha_structured: float = Field(
        default=0.92,
        ge=0,
        le=1,
        description="First-position acceptance for a fully predictable prompt (reference draft).",
    )
    alpha_open: float = Field(
        default=0.32, ge=0, le=1, description="First-position acceptance for an open-ended prompt (reference draft)."
    )
    decay_tau: float = Field(default=7.0, gt=0, description="Position scale of the acceptance decay.")
    decay_gamma: float = Field(default=4.0, gt=0, description="Sharpness of the acceptance decay (1 = exponential).")
    accept_cap: float = Field(
        default=0.98, gt=0, le=1, description="Upper bound of any per-position acceptance probability."
    )
    temperature_penalty: float = Field(
        default=0.3, ge=0, description="Sampling lowers acceptance: probabilities are divided by 1 + this * T."
    )
    classes: list[AcceptanceClass] = Field(
        default_factory=list,
        description="Measured acceptance per prompt class (first match wins); prompts no class matches use the "
        "predictability rule.",
    )

    def class_for(self, prompt: str) -> AcceptanceClass | None:
        for c in self.classes:
            if c.matches(prompt):
                return c
        return None


class DraftParams(_Strict):
    """One draft's acceptance quality and costs (calibrated, or from the size rule)."""

    quality: float = Field(gt=0, le=2, description="Multiplier on acceptance relative to the reference draft.")
    run_s: float = Field(ge=0, description="Memory term of one draft pass (seconds).")
    kv_read_per_token_s: float = Field(ge=0, description="Draft memory term per context token in the batch.")
    compute_per_token_s: float = Field(ge=0, description="Draft compute term per sequence in a pass.")


class Preset(_Strict):
    """A calibration: one target on one accelerator configuration, served by one kind of server."""

    name: str = Field(min_length=1, description="Preset key.")
    description: str = Field(description="What the preset models.")
    target: str = Field(description="Target model key in the catalog.")
    profile: ProfileName = Field(
        default="neuron-fork", description="Server profile by default: a dialect's profile (spectrn.dialects)."
    )

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        check_profile_name(v)
        return v

    default_draft: str = Field(description="Draft used when none is given.")
    default_window: int = Field(ge=1, le=32, description="Window used when none is given.")
    max_num_seqs: int = Field(ge=1, description="Batch limit of the modelled service.")
    max_model_len: int = Field(ge=16, description="Context limit of the modelled service.")
    cost: CostModel = Field(default_factory=CostModel, description="Step costs.")
    acceptance: AcceptanceModel = Field(default_factory=AcceptanceModel, description="Acceptance model.")
    drafts: dict[str, DraftParams] = Field(default_factory=dict, description="Calibrated drafts (others: size rule).")
    calibration: dict[str, Any] | None = Field(
        default=None,
        description="Sidecar of a fitted preset (`spectrn twin calibrate`): the uncertainty, residuals and provenance "
        "of its values. The simulator ignores it; spectrn.twin reads it strictly.",
    )

    @model_validator(mode="after")
    def _check_models(self) -> Preset:
        named = [("target", self.target), ("default_draft", self.default_draft)]
        named += [(f"drafts.{key}", key) for key in self.drafts]
        for field, key in named:
            if key not in MODELS:
                raise ValueError(f"{field}: unknown model {key!r}; choose one of {', '.join(sorted(MODELS))}")
        return self


PRESETS: dict[str, Preset] = {
    "qwen3-32b-trn2": Preset(
        name="qwen3-32b-trn2",
        description=(
            "Qwen3-32B on trn2.48xlarge, TP 32 at LNC 2, max-num-seqs 4, max-model-len 1024, NxDI fused "
            "speculation on the 0.9.1 Neuron DLC (the published AWS experiment)"
        ),
        target="qwen3-32b",
        profile="neuron-fork",
        default_draft="qwen3-1.7b",
        default_window=7,
        max_num_seqs=4,
        max_model_len=1024,
        drafts={
            "qwen3-1.7b": DraftParams(
                quality=1.0, run_s=0.0035, kv_read_per_token_s=0.9e-8, compute_per_token_s=8.8e-6
            ),
            "qwen3-0.6b": DraftParams(
                quality=0.4, run_s=0.0032, kv_read_per_token_s=0.5e-8, compute_per_token_s=3.1e-6
            ),
        },
    ),
}


def get_preset(name: str) -> Preset:
    from spectrn.errors import SimError

    try:
        return PRESETS[name]
    except KeyError:
        raise SimError(
            f"unknown simulator preset {name!r}",
            hint=f"choose one of {', '.join(sorted(PRESETS))}, or give a whole preset with --preset-file",
        ) from None


def draft_params(preset: Preset, draft: str) -> DraftParams:
    """Calibrated values for ``draft``, or the size rule for any catalog model."""
    from spectrn.errors import SimError

    if draft in preset.drafts:
        return preset.drafts[draft]
    spec = MODELS.get(draft)
    if spec is None:
        raise SimError(f"unknown draft model {draft!r}", hint=f"choose one of {', '.join(sorted(MODELS))}")
    target = MODELS[preset.target]
    if spec.params_b >= target.params_b:
        raise SimError(
            f"draft {draft!r} ({spec.params_b}B) is not smaller than the preset's target {preset.target!r}",
            hint="pick a smaller draft such as qwen3-1.7b",
        )
    ratio = spec.params_b / REFERENCE_DRAFT_PARAMS_B
    quality = ratio**0.88 if ratio <= 1 else 1 + 0.08 * math.log2(ratio)
    size = spec.params_b / target.params_b
    c = preset.cost
    return DraftParams(
        quality=quality,  # at most 1 + 0.08 * log2(32.8 / 1.7) = 1.34: drafts are smaller than a catalog target
        run_s=c.ref_draft_run_s * math.sqrt(ratio),
        kv_read_per_token_s=c.kv_read_per_token_s * size,
        compute_per_token_s=c.compute_per_token_s * size,
    )


# ---- predictability ---------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
_STRUCTURED_CUES = re.compile(
    r"\b(count(ing)?|numbers?|sequence|list|json|keys?|python|function|def|skeleton|code|repeat(ed)?|"
    r"table|csv|yaml|alphabet|one to \w+|from \d+ to \d+)\b|[{}\[\]]|\b\d+\s*,?\s+\d+\b"
)
_OPEN_CUES = re.compile(
    r"\b(story|stories|essay|explain|describe|imagine|poem|why|opinion|creative|discuss|reflect|"
    r"brainstorm|persuade|novel|tale)\b"
)


@lru_cache(maxsize=4096)
def predictability(text: str) -> float:
    """How predictable the continuation of ``text`` is, in [0, 1] (1 = repetitive/structured)."""
    lower = text.lower()
    words = _WORD.findall(lower)
    rep = 0.0
    if len(words) >= 6:
        bigrams = list(zip(words, words[1:], strict=False))
        rep = 1.0 - len(set(bigrams)) / len(bigrams)
    rep_score = min(1.0, max(0.0, (rep - 0.1) / 0.6))
    comp_score = 0.0
    raw = lower.encode()
    if len(raw) >= 64:
        comp = 1.0 - len(zlib.compress(raw, 9)) / len(raw)
        comp_score = min(1.0, max(0.0, (comp - 0.45) / 0.35))
    cue_score = 0.9 if _STRUCTURED_CUES.search(lower) else 0.0
    score = max(rep_score, comp_score, cue_score)
    if _OPEN_CUES.search(lower):
        score *= 0.4
    return round(score, 6)


# ---- ground-truth helpers (pure; all durations already multiplied by time_scale) -----------------------


class Resolved(_Strict):
    """A preset with the draft, window, semantics and overrides resolved: what the engine actually runs."""

    preset: Preset
    speculative: bool
    draft: str
    window: int
    semantics: WindowSemantics
    draft_cost: DraftParams
    time_scale: float

    @property
    def quality(self) -> float:
        return self.draft_cost.quality

    @property
    def proposals(self) -> int:
        """Draft tokens proposed per step (0 without speculation)."""
        return proposals(self.semantics, self.window) if self.speculative else 0

    @property
    def max_tokens_per_step(self) -> int:
        return self.proposals + 1

    # ---- costs ----
    def prefill_s(self, prompt_tokens: int) -> float:
        c = self.preset.cost
        return (c.prefill_base_s + c.prefill_per_token_s * prompt_tokens) * self.time_scale

    def target_step_s(self, batch: int, context_tokens: int, positions: int) -> float:
        """One target pass over ``batch`` sequences of ``positions`` positions each (roofline)."""
        c = self.preset.cost
        memory = c.weights_read_s + c.kv_read_per_seq_s * batch + c.kv_read_per_token_s * context_tokens
        return max(memory, c.compute_per_token_s * batch * positions) * self.time_scale

    def draft_pass_s(self, batch: int, context_tokens: int) -> float:
        """One pass of the draft model over the batch (one position per sequence)."""
        d = self.draft_cost
        return max(d.run_s + d.kv_read_per_token_s * context_tokens, d.compute_per_token_s * batch) * self.time_scale

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        """A decode step without speculation."""
        return self.target_step_s(batch, context_tokens, 1)

    def spec_step_s(self, batch: int, context_tokens: int) -> float:
        """A speculative step: ``k`` draft passes, then the target verifies ``proposals + 1`` positions."""
        runs = draft_runs(self.semantics, self.window)
        verified = verified_tokens(self.semantics, self.window)
        return runs * self.draft_pass_s(batch, context_tokens) + self.target_step_s(batch, context_tokens, verified)

    def step_s(self, batch: int, context_tokens: int) -> float:
        """Duration of one engine step of the running batch (speculative or not)."""
        if not self.speculative:
            return self.decode_step_s(batch, context_tokens)
        return self.spec_step_s(batch, context_tokens)

    # ---- acceptance ----
    def alpha(self, prompt: str) -> float:
        a = self.preset.acceptance
        cls = a.class_for(prompt)
        if cls is not None:
            return cls.alpha
        return a.alpha_open + (a.alpha_structured - a.alpha_open) * predictability(prompt)

    def position_probs(self, prompt: str, temperature: float = 0.0) -> list[float]:
        """Conditional acceptance probability of each proposed position (empty without speculation)."""
        if not self.speculative:
            return []
        a = self.preset.acceptance
        scale = self.quality / (1.0 + a.temperature_penalty * temperature)
        base = self.alpha(prompt) * scale
        curve = [
            min(a.accept_cap, base * math.exp(-((i / a.decay_tau) ** a.decay_gamma))) for i in range(self.proposals)
        ]
        cls = a.class_for(prompt)
        if cls is None:
            return curve
        measured = [min(1.0, p * scale) for p in cls.position_probs[: self.proposals]]
        return measured + curve[len(measured) :]

    def expected_tokens_per_step(self, prompt: str) -> float:
        """Mean tokens emitted per decode step: 1 + sum_i prod_{j<i} a_j (1 without speculation)."""
        from spectrn.windows import expected_tokens_per_step

        return expected_tokens_per_step(self.position_probs(prompt))

    def expected_acceptance_rate(self, prompt: str) -> float:
        """Expected accepted / proposed tokens (what vLLM's counters give where they move)."""
        if not self.proposals:  # no speculation, or an NxDI window of 1
            return 0.0
        return (self.expected_tokens_per_step(prompt) - 1.0) / self.proposals

    def expected_tpot_s(
        self, prompt: str, *, batch: int = 1, prompt_tokens: int = 64, output_tokens: int = 600
    ) -> float:
        """Steady-state time per output token for ``batch`` similar requests decoding together.

        Uses the mean context over the request's life; ignores the prefills of other requests that interrupt
        decoding in a closed loop (a few percent at concurrency 4 with 600-token outputs).
        """
        mean_ctx = batch * (prompt_tokens + output_tokens / 2)
        return self.step_s(batch, int(mean_ctx)) / self.expected_tokens_per_step(prompt)

    def baseline(self) -> Resolved:
        """The same server without speculation."""
        return self.model_copy(update={"speculative": False})

    def crossover_batch(
        self, prompt: str, *, prompt_tokens: int = 64, output_tokens: int = 600, max_batch: int = 4096
    ) -> int | None:
        """The smallest concurrency at which speculation no longer beats the baseline's TPOT.

        1 means it never pays; None means it still pays at ``max_batch``. The batch limit of the preset is
        ignored: this asks what the cost model predicts for a service allowed to batch that far.
        """
        base = self.baseline()
        for b in range(1, max_batch + 1):
            spec = self.expected_tpot_s(prompt, batch=b, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
            plain = base.expected_tpot_s(prompt, batch=b, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
            if spec >= plain:
                return b
        return None


def resolve(
    preset: Preset,
    *,
    speculative: bool,
    draft: str | None,
    window: int | None,
    time_scale: float,
    semantics: WindowSemantics | None = None,
) -> Resolved:
    draft_key = draft or preset.default_draft
    return Resolved(
        preset=preset,
        speculative=speculative,
        draft=draft_key,
        window=window or preset.default_window,
        semantics=semantics or get_profile(preset.profile).window,
        draft_cost=draft_params(preset, draft_key),
        time_scale=time_scale,
    )
