"""``twin.yaml``: a simulator preset whose ``calibration`` sidecar says where every value comes from.

The file is an ordinary ``spectrn.sim.model.Preset`` (``spectrn sim serve --preset-file twin.yaml`` serves it,
validated strictly); its ``calibration`` key, which the simulator ignores by design, holds a ``Calibration``:

    calibration:
      kind: spectrn-twin, version: 1, created_at, spectrn_version
      performance: false when a source run's timing means nothing (vLLM on CPU, ...), with the reasons
      runs[]:        each source run: id, path, runtime, server profile, time scale, window, levels, verdict
      costs{}:       per cost parameter: value, standard error, status (fitted | prior | bound), note, points
      cost_covariance: names + matrix of the fitted ones (seconds^2)
      regime:        steps used, segments, compute-bound steps, steps dropped and why
      acceptance[]:  per prompt class: the measured conditional acceptance per position with standard errors and
                     counts, the class's alpha, mean accepted length, share of requests, prompt tokens, sources
      decay:         shared tau and gamma (or the prior's, when not identified), covariance of
                     [alpha_<class>..., log tau, log gamma]
      residuals:     relative residuals per step and per segment, per run / variant / level, and a sample
      workload:      output tokens, temperature, API, class shares and prompt lengths the runs used
      pricing:       instance price and share, for cost per token
      notes[]

``load_twin`` reads both halves and refuses a preset without a valid sidecar.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spectrn.errors import ConfigError
from spectrn.sim.model import Preset


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParamFit(_Strict):
    value: float
    se: float | None = Field(default=None, description="Standard error (None: not fitted).")
    status: Literal["fitted", "prior", "bound", "zero"] = Field(
        description="fitted; prior (not separable in the runs); bound (the runs bound it); zero (fitted negative)."
    )
    note: str | None = None
    points: int = Field(default=0, description="Steps whose equation involves the parameter.")


class RunSource(_Strict):
    run_id: str
    path: str
    runtime: str
    profile: str | None = None
    time_scale: float = 1.0
    draft: str | None = None
    window: int | None = None
    semantics: Literal["nxdi", "upstream"] | None = None
    levels: list[str] = Field(default_factory=list)
    performance: bool = True
    reasons: list[str] = Field(default_factory=list)
    steps: dict[str, int] = Field(default_factory=dict, description="variant -> usable steps.")
    dropped: dict[str, dict[str, int]] = Field(default_factory=dict, description="variant -> reason -> steps.")


class Covariance(_Strict):
    names: list[str] = Field(default_factory=list)
    matrix: list[list[float]] = Field(default_factory=list)


class Regime(_Strict):
    steps: int
    segments: int
    compute_bound_steps: int
    residual_scale_s: float = Field(description="Residual standard deviation of a segment's duration (real s).")


class ClassFit(_Strict):
    name: str
    position_probs: list[float]
    position_se: list[float]
    reached: list[int] = Field(description="Steps that reached each position.")
    alpha: float
    mean_accepted_length: float | None = Field(default=None, description="Tokens per step at the measured window.")
    window: int | None = None
    semantics: Literal["nxdi", "upstream"] | None = None
    share: float = Field(description="Share of the measured requests.")
    prompt_tokens: float = Field(description="Mean prompt tokens of its requests.")
    predictability: float | None = None
    prompts: int = Field(default=0, description="Distinct prompts of the class (matched by text).")
    sources: list[str] = Field(default_factory=list)


class Decay(_Strict):
    tau: float
    gamma: float
    identified: bool
    note: str | None = None
    covariance: Covariance = Field(default_factory=Covariance)


class ResidualGroup(_Strict):
    run: str
    variant: str
    level: str
    steps: int
    median_rel: float
    p90_abs_rel: float


class Residuals(_Strict):
    step_p90_abs_rel: float = Field(
        description="90th percentile of |observed - fitted| / observed per step (client read delays included)."
    )
    step_median_abs_rel: float
    segment_p90_abs_rel: float = Field(description="The same per segment of consecutive steps (delays cancelled).")
    segment_median_abs_rel: float
    groups: list[ResidualGroup] = Field(default_factory=list)
    sample: list[list[float]] = Field(
        default_factory=list,
        description="Up to 400 steps: [speculative 0/1, decode b, context C, prefill tokens, observed s, fitted s].",
    )


class Workload(_Strict):
    max_tokens: int
    temperature: float = 0.0
    api: str = "chat"
    requests: int = Field(description="Measured requests per endpoint and level in the source runs.")
    prompts: str = Field(description="The prompt set the runs sent (a packaged set's name or a file path).")
    warmup: int = 0
    seed: int = Field(default=0, description="The runs' schedule seed (the order in which classes were sent).")
    mix: dict[str, float] = Field(default_factory=dict, description="Class shares of the measured requests.")
    prompt_tokens: dict[str, float] = Field(default_factory=dict)


class Pricing(_Strict):
    instance_type: str | None = None
    hourly_usd: float
    instances_per_service: float


class Calibration(_Strict):
    kind: Literal["spectrn-twin"] = "spectrn-twin"
    version: Literal[1] = 1
    created_at: float
    spectrn_version: str
    performance: bool = Field(description="False: a source run's timing means nothing (the twin neither).")
    reasons: list[str] = Field(default_factory=list)
    draft: str
    semantics: Literal["nxdi", "upstream"]
    runs: list[RunSource]
    costs: dict[str, ParamFit]
    cost_covariance: Covariance
    regime: Regime
    acceptance: list[ClassFit]
    decay: Decay
    residuals: Residuals
    workload: Workload
    pricing: Pricing
    notes: list[str] = Field(default_factory=list)


class Twin(BaseModel):
    """A fitted preset and its calibration."""

    model_config = ConfigDict(frozen=True)

    preset: Preset
    calibration: Calibration


def load_twin(path: Path) -> Twin:
    from spectrn.configuration.origins import format_validation_error
    from spectrn.sim.settings import load_preset_file

    preset = load_preset_file(path)
    if preset.calibration is None:
        raise ConfigError(
            f"{path} is a simulator preset without a calibration sidecar",
            hint="write one with `spectrn twin calibrate RUN_DIR ... --out-file twin.yaml`",
        )
    try:
        cal = Calibration.model_validate(preset.calibration)
    except ValidationError as e:
        raise ConfigError(
            f"{path}: calibration: {format_validation_error(e)}",
            hint="re-create it with `spectrn twin calibrate` (the sidecar is not meant to be edited)",
        ) from None
    return Twin(preset=preset, calibration=cal)


def dump_twin(twin: Twin) -> str:
    import yaml

    data = twin.preset.model_dump(mode="json", exclude={"calibration"})
    data["calibration"] = twin.calibration.model_dump(mode="json")
    header = (
        "# A digital twin fitted by `spectrn twin calibrate` (docs/twin.md): serve it with\n"
        "#   spectrn sim serve --preset-file THIS_FILE [--speculative --window K]\n"
        "# `calibration` says where each value comes from; the simulator ignores it.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, width=120)


def twin_settings(path: Path) -> list[str]:
    """``--set`` items that make a run config serve the twin as it was calibrated: its batch limit, context
    limit, server profile and draft (``spectrn sweep --local --twin``; the local servers take both limits from
    the config)."""
    twin = load_twin(path)
    return [
        f"max_num_seqs={twin.preset.max_num_seqs}",
        f"max_model_len={twin.preset.max_model_len}",
        f"sim.profile={twin.preset.profile}",
        f"draft={twin.calibration.draft}",
    ]
