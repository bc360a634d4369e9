"""``SimSettings``: everything one simulated server needs, validated strictly (YAML-loadable)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spectrn.configuration.catalog import MODELS
from spectrn.errors import SimError
from spectrn.sim.faults import FaultSettings
from spectrn.sim.model import AcceptanceModel, CostModel, Preset, Resolved, get_preset, resolve
from spectrn.sim.profiles import ProfileName, ServerProfile, check_profile_name, get_profile


class SimSettings(BaseModel):
    """One simulated vLLM server. Unset values come from the preset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str = Field(default="qwen3-32b-trn2", description="Calibration preset (see `spectrn sim presets`).")
    custom_preset: Preset | None = Field(
        default=None, description="A whole preset (e.g. from --preset-file); replaces the named one."
    )
    profile: ProfileName | None = Field(
        default=None,
        description="Server imitated on the wire: a dialect's profile (neuron-fork, vllm-neuron, vllm-neuron-0.24, "
        "upstream, ...; default: the preset's).",
    )

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str | None) -> str | None:
        return check_profile_name(v)

    speculative: bool = Field(default=False, description="Serve with speculative decoding.")
    draft: str | None = Field(default=None, description="Draft model key (default: the preset's, qwen3-1.7b).")
    window: int | None = Field(
        default=None, ge=1, le=32, description="num_speculative_tokens (default: the preset's, 7)."
    )
    max_num_seqs: int | None = Field(default=None, ge=1, le=4096, description="Batch limit (default: the preset's, 4).")
    max_model_len: int | None = Field(
        default=None, ge=16, le=1_048_576, description="Context limit (default: the preset's)."
    )
    time_scale: float = Field(
        default=1.0, gt=0, le=100, description="Multiply every simulated duration (0.1 = ten times faster)."
    )
    seed: int = Field(default=0, description="Seed of output text, acceptance draws and faults.")
    served_model_name: str | None = Field(
        default=None, description="Model name clients send (default: the target's Hugging Face id)."
    )
    startup_delay_s: float = Field(
        default=0.0, ge=0, le=86400, description="Seconds /health answers 503 ('compiling') after start."
    )
    cost: dict[str, float] = Field(
        default_factory=dict, description="Overrides of the preset's cost model (see CostModel)."
    )
    acceptance: dict[str, float] = Field(
        default_factory=dict, description="Overrides of the preset's acceptance model."
    )
    text_holdback_rate: float | None = Field(
        default=None,
        ge=0,
        le=0.9,
        description="Share of tokens whose text the server's detokenizer holds back to a later chunk "
        "(default: the profile's; 0.1 on neuron-fork, 0 elsewhere).",
    )
    faults: FaultSettings = Field(default_factory=FaultSettings, description="Fault injection.")
    spin_s: float = Field(
        default=0.001, ge=0, le=0.05, description="Busy-wait this long before each step deadline for timing precision."
    )
    write_workers: int | None = Field(
        default=None,
        ge=0,
        le=16,
        description="Writer processes that write streams' chunks in parallel with the engine (default: 2 when "
        "the batch limit is 192 or more and the machine has 2 or more CPUs, else 0; see docs/simulator.md).",
    )
    request_log_size: int = Field(
        default=2000, ge=0, le=1_000_000, description="Most recent requests kept for GET /sim/requests."
    )
    identity_endpoint: bool = Field(
        default=True,
        description="Serve GET /sim/identity (the simulator naming itself). Off: the server exposes only what a "
        "real vLLM server does, for testing that spectrn identifies servers from real signals alone.",
    )
    vllm_version: str | None = Field(
        default=None, description="Version reported by /version and system_fingerprint (default: the profile's)."
    )

    @model_validator(mode="after")
    def _check(self) -> SimSettings:
        for name, over, model in (("cost", self.cost, CostModel), ("acceptance", self.acceptance, AcceptanceModel)):
            unknown = set(over) - set(model.model_fields)
            if unknown:
                raise ValueError(
                    f"{name}: unknown parameter(s) {', '.join(sorted(unknown))}; valid: {', '.join(model.model_fields)}"
                )
        if self.draft is not None and self.draft not in MODELS:
            raise ValueError(f"draft: unknown model {self.draft!r}; choose one of {', '.join(sorted(MODELS))}")
        self.resolved_preset()  # validates the preset name and the overrides' values
        window = self.window or self.base_preset().default_window
        if self.speculative and self.server_profile.window == "nxdi" and window < 2:
            raise ValueError(
                f"window: {window} proposes nothing under NxDI fused speculation (window k proposes k - 1 "
                f"tokens); use a window of at least 2 or profile upstream"
            )
        return self

    def base_preset(self) -> Preset:
        return self.custom_preset if self.custom_preset is not None else get_preset(self.preset)

    @property
    def server_profile(self) -> ServerProfile:
        return get_profile(self.profile or self.base_preset().profile)

    @property
    def writers(self) -> int:
        if self.write_workers is not None:
            return self.write_workers
        import os

        # Measured on 2 CPUs (docs/simulator.md): two writers cut the deviation at 256 streams; at 64 they lower
        # the median but raise the 99th percentile, at 128 they change nothing.
        return 2 if self.batch_limit >= 192 and (os.cpu_count() or 1) >= 2 else 0

    @property
    def holdback_rate(self) -> float:
        if self.text_holdback_rate is not None:
            return self.text_holdback_rate
        return self.server_profile.text_holdback_rate

    @property
    def version(self) -> str:
        return self.vllm_version or self.server_profile.vllm_version

    @property
    def preset_name(self) -> str:
        return self.base_preset().name

    def resolved_preset(self) -> Preset:
        preset = self.base_preset()
        if not self.cost and not self.acceptance:
            return preset
        try:
            cost = CostModel.model_validate({**preset.cost.model_dump(), **self.cost})
            acc = AcceptanceModel.model_validate({**preset.acceptance.model_dump(), **self.acceptance})
        except ValidationError as e:
            from spectrn.configuration.origins import format_validation_error

            raise ValueError(format_validation_error(e)) from None
        return preset.model_copy(update={"cost": cost, "acceptance": acc})

    def resolved(self) -> Resolved:
        return resolve(
            self.resolved_preset(),
            speculative=self.speculative,
            draft=self.draft,
            window=self.window,
            time_scale=self.time_scale,
            semantics=self.server_profile.window,
        )

    @property
    def model_name(self) -> str:
        return self.served_model_name or MODELS[self.base_preset().target].hf_id

    @property
    def batch_limit(self) -> int:
        return self.max_num_seqs or self.base_preset().max_num_seqs

    @property
    def context_limit(self) -> int:
        return self.max_model_len or self.base_preset().max_model_len

    @property
    def fingerprint(self) -> str:
        digest = hashlib.blake2b(self.model_dump_json().encode(), digest_size=4).hexdigest()
        return f"vllm-{self.version}-{digest}"


def load_settings(path: Path | None = None, **overrides: Any) -> SimSettings:
    """Settings from an optional YAML file, then explicit overrides (None values ignored)."""
    from spectrn.configuration.origins import format_validation_error
    from spectrn.configuration.sources import deep_merge, load_yaml

    data: dict[str, Any] = {}
    if path is not None:
        loaded = load_yaml(path, what="simulator config file")
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise SimError(
                f"simulator config file {path}: top level must be a mapping, got {type(loaded).__name__}",
                hint="write keys such as `speculative: true` and `cost: {step_base_s: 0.04}`",
            )
        data = loaded
    data = deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
    try:
        return SimSettings.model_validate(data)
    except ValidationError as e:
        where = f"{path}: " if path is not None else ""
        raise SimError(f"{where}{format_validation_error(e)}", hint="see `spectrn sim serve --help`") from None


def load_preset_file(path: Path) -> Preset:
    """A whole preset from YAML, validated strictly; errors name the file and the field."""
    from spectrn.configuration.origins import format_validation_error
    from spectrn.configuration.sources import load_yaml

    data = load_yaml(path, what="simulator preset file")
    if not isinstance(data, dict):
        raise SimError(
            f"simulator preset file {path}: top level must be a mapping, got {type(data).__name__}",
            hint="start from `spectrn sim presets --yaml` and edit the values",
        )
    try:
        return Preset.model_validate(data)
    except ValidationError as e:
        raise SimError(
            f"simulator preset file {path}: {format_validation_error(e)}",
            hint="compare with `spectrn sim presets --yaml`; every field is described in docs/simulator.md",
        ) from None
