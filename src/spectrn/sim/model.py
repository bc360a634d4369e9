"""The simulator's ground truth: cost model, acceptance model and calibrated presets (pure, no I/O).

Everything the engine does with time and acceptance is computed here, so that tests and the load
generator's checks can ask the same functions what *should* happen.

Cost model (seconds, before ``time_scale``; ``b`` = running sequences, ``C`` = sum of their context tokens):

    prefill(P)        = prefill_base_s + prefill_per_token_s * P          P = prompt tokens admitted in the step
    decode_step(b, C) = step_base_s + step_per_seq_s * b + step_per_ctx_token_s * C
    draft_token(d)    = draft_per_token_s for the draft d (preset table, or size rule below)
    spec_step(b, C)   = window * draft_token(d) + decode_step(b, C) * (1 + verify_per_token * (window + 1))

A speculative step runs the draft ``window`` times, then the target verifies all ``window`` proposals in one
pass that costs slightly more than a one-token step. Prefill is the same with or without speculation (the
published experiment found TTFT unchanged).

Acceptance model. A prompt's *predictability* ``p`` in [0, 1] comes from its content only (see
``predictability``): repeated word bigrams, zlib compressibility, and cue words for structured output
(counting, lists, JSON, code) versus open-ended output (story, essay, explain...). Then

    alpha(prompt) = alpha_open + (alpha_structured - alpha_open) * p
    a_i           = min(accept_cap, alpha * quality(draft) * exp(-(i / decay_tau) ** decay_gamma)),  i = 0..window-1

``a_i`` is the probability that draft position ``i`` is accepted given that all earlier positions were
(divided by ``1 + temperature_penalty * T`` when sampling at temperature ``T`` > 0: sampled tokens agree
less often with the draft; an assumption, not a calibration).
Real acceptance decays with position (see the per-position counters); the stretched-exponential keeps the
first few positions nearly flat and falls steeply past ``decay_tau``, which is what makes window 7 beat both
5 and 15 on a structured mix. Each step draws positions in order and stops at the first rejection; the
step emits the accepted prefix plus one bonus token from the target, so

    E[tokens per step] = 1 + sum_{i=1..window} prod_{j<i} a_j

(for a constant ``a`` this is the familiar (1 - a^(k+1)) / (1 - a)). ``quality`` is 1.0 for the reference
draft (qwen3-1.7b) and 0.4 for qwen3-0.6b (the published "~60% lower acceptance"); other catalog models
follow a size rule: quality = (params / 1.7) ** 0.88 below 1.7B and 1 + 0.08 * log2(params / 1.7) above;
draft cost = ref_draft_per_token_s * sqrt(params / 1.7) (small drafts on a wide tensor-parallel group are
latency bound, so cost grows slowly with size).

Calibration of ``qwen3-32b-trn2`` (target Qwen3-32B, TP 32, LNC 2, batch limit 4; see ``expected_tpot``):
baseline ~45 ms per token at concurrency 4; 1.7B draft window 7 ~12-15 ms on structured prompts and ~47 ms
(about baseline) on open-ended ones; 0.6B draft ~baseline on structured prompts (no net gain); window 5 and
15 both slower than 7 on a structured mix.
"""

from __future__ import annotations

import math
import re
import zlib
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from spectrn.spec.catalog import MODELS

REFERENCE_DRAFT_PARAMS_B = 1.7


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CostModel(_Strict):
    """Step costs in seconds at time scale 1."""

    prefill_base_s: float = Field(default=0.030, ge=0, description="Fixed cost of a prefill (context encoding) step.")
    prefill_per_token_s: float = Field(default=0.00025, ge=0, description="Prefill cost per prompt token.")
    step_base_s: float = Field(default=0.0415, gt=0, description="Fixed cost of one decode step of the target.")
    step_per_seq_s: float = Field(default=0.0005, ge=0, description="Decode step cost per running sequence.")
    step_per_ctx_token_s: float = Field(
        default=1.0e-6, ge=0, description="Decode step cost per context token in the batch."
    )
    verify_per_token: float = Field(
        default=0.04, ge=0, description="Extra verify cost per verified token, as a fraction of a decode step."
    )
    ref_draft_per_token_s: float = Field(
        default=0.0012, ge=0, description="Draft cost per proposed token for a 1.7B draft (size rule base)."
    )


class AcceptanceModel(_Strict):
    """How often the draft's proposals are accepted."""

    alpha_structured: float = Field(
        default=0.91,
        ge=0,
        le=1,
        description="First-position acceptance for a fully predictable prompt (reference draft).",
    )
    alpha_open: float = Field(
        default=0.30, ge=0, le=1, description="First-position acceptance for an open-ended prompt (reference draft)."
    )
    decay_tau: float = Field(default=9.0, gt=0, description="Position scale of the acceptance decay.")
    decay_gamma: float = Field(default=4.0, gt=0, description="Sharpness of the acceptance decay (1 = exponential).")
    accept_cap: float = Field(
        default=0.98, gt=0, le=1, description="Upper bound of any per-position acceptance probability."
    )
    temperature_penalty: float = Field(
        default=0.3, ge=0, description="Sampling lowers acceptance: probabilities are divided by 1 + this * T."
    )


class DraftParams(_Strict):
    """Per-draft overrides of the size rule."""

    quality: float = Field(gt=0, le=2, description="Multiplier on acceptance relative to the reference draft.")
    draft_per_token_s: float = Field(ge=0, description="Draft cost per proposed token (seconds).")


class Preset(_Strict):
    """A calibration: one target on one accelerator configuration."""

    name: str = Field(description="Preset key.")
    description: str = Field(description="What the preset models.")
    target: str = Field(description="Target model key in the catalog.")
    default_draft: str = Field(description="Draft used when none is given.")
    default_window: int = Field(ge=1, le=32, description="Window used when none is given.")
    max_num_seqs: int = Field(ge=1, description="Batch limit of the modelled service.")
    max_model_len: int = Field(ge=16, description="Context limit of the modelled service.")
    cost: CostModel = Field(default_factory=CostModel, description="Step costs.")
    acceptance: AcceptanceModel = Field(default_factory=AcceptanceModel, description="Acceptance model.")
    drafts: dict[str, DraftParams] = Field(default_factory=dict, description="Calibrated drafts (others: size rule).")


PRESETS: dict[str, Preset] = {
    "qwen3-32b-trn2": Preset(
        name="qwen3-32b-trn2",
        description=(
            "Qwen3-32B on trn2.48xlarge, TP 32 at LNC 2, max-num-seqs 4, max-model-len 1024, NxDI fused "
            "speculation (the published AWS experiment)"
        ),
        target="qwen3-32b",
        default_draft="qwen3-1.7b",
        default_window=7,
        max_num_seqs=4,
        max_model_len=1024,
        drafts={
            "qwen3-1.7b": DraftParams(quality=1.0, draft_per_token_s=0.0012),
            "qwen3-0.6b": DraftParams(quality=0.4, draft_per_token_s=0.0010),
        },
    ),
}


def get_preset(name: str) -> Preset:
    from spectrn.errors import SimError

    try:
        return PRESETS[name]
    except KeyError:
        raise SimError(
            f"unknown simulator preset {name!r}", hint=f"choose one of {', '.join(sorted(PRESETS))}"
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
    return DraftParams(
        quality=min(quality, 2.0), draft_per_token_s=preset.cost.ref_draft_per_token_s * math.sqrt(ratio)
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
    """A preset with the draft, window and overrides resolved: what the engine actually runs."""

    preset: Preset
    speculative: bool
    draft: str
    window: int
    quality: float
    draft_per_token_s: float
    time_scale: float

    # ---- costs ----
    def prefill_s(self, prompt_tokens: int) -> float:
        c = self.preset.cost
        return (c.prefill_base_s + c.prefill_per_token_s * prompt_tokens) * self.time_scale

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        c = self.preset.cost
        return (c.step_base_s + c.step_per_seq_s * batch + c.step_per_ctx_token_s * context_tokens) * self.time_scale

    def step_s(self, batch: int, context_tokens: int) -> float:
        """Duration of one engine step of the running batch (speculative or not)."""
        base = self.decode_step_s(batch, context_tokens)
        if not self.speculative:
            return base
        c = self.preset.cost
        verify = base * (1.0 + c.verify_per_token * (self.window + 1))
        return self.window * self.draft_per_token_s * self.time_scale + verify

    # ---- acceptance ----
    def alpha(self, prompt: str) -> float:
        a = self.preset.acceptance
        return a.alpha_open + (a.alpha_structured - a.alpha_open) * predictability(prompt)

    def position_probs(self, prompt: str, temperature: float = 0.0) -> list[float]:
        """Conditional acceptance probability of each draft position (empty without speculation)."""
        if not self.speculative:
            return []
        a = self.preset.acceptance
        base = self.alpha(prompt) * self.quality / (1.0 + a.temperature_penalty * temperature)
        return [min(a.accept_cap, base * math.exp(-((i / a.decay_tau) ** a.decay_gamma))) for i in range(self.window)]

    def expected_tokens_per_step(self, prompt: str) -> float:
        """Mean tokens emitted per decode step: 1 + sum_i prod_{j<i} a_j (1 without speculation)."""
        total, run = 1.0, 1.0
        for p in self.position_probs(prompt):
            run *= p
            total += run
        return total

    def expected_acceptance_rate(self, prompt: str) -> float:
        """Expected accepted / drafted tokens (what vLLM's counters give)."""
        if not self.speculative:
            return 0.0
        return (self.expected_tokens_per_step(prompt) - 1.0) / self.window

    def expected_tpot_s(
        self, prompt: str, *, batch: int = 1, prompt_tokens: int = 64, output_tokens: int = 600
    ) -> float:
        """Steady-state time per output token for ``batch`` similar requests decoding together.

        Uses the mean context over the request's life; ignores the prefills of other requests that interrupt
        decoding in a closed loop (a few percent at concurrency 4 with 600-token outputs).
        """
        mean_ctx = batch * (prompt_tokens + output_tokens / 2)
        return self.step_s(batch, int(mean_ctx)) / self.expected_tokens_per_step(prompt)


def resolve(
    preset: Preset,
    *,
    speculative: bool,
    draft: str | None,
    window: int | None,
    time_scale: float,
) -> Resolved:
    draft_key = draft or preset.default_draft
    params = draft_params(preset, draft_key)
    return Resolved(
        preset=preset,
        speculative=speculative,
        draft=draft_key,
        window=window or preset.default_window,
        quality=params.quality,
        draft_per_token_s=params.draft_per_token_s,
        time_scale=time_scale,
    )
