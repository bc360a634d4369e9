"""What a server dialect is: the image and release keys that select it, its window semantics, the speculation
methods it runs and their rules, the vLLM flags it renders, and the simulator profile that plays it.

A dialect never sees ``SpectrnConfig`` (the spec imports the dialects, not the other way): it reads a ``Setup``,
the few settings of a run that its rules and flags depend on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from spectrn.configuration.catalog import ModelSpec
from spectrn.configuration.origins import FieldError
from spectrn.windows import WindowSemantics

# What a refusal's hint appends when it points to the legacy fork, so nobody switches to it unawares.
LEGACY_CONSEQUENCE = " (the V0 fork, out of support since Neuron SDK 2.28)"

# Deep Learning Container repository (aws-neuron/deep-learning-containers README; docs/neuron.md).
DLC = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"

MetricsStyle = Literal["v0", "v1"]
ErrorStyle = Literal["v0", "v1"]


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """How the simulator plays a dialect's server on the wire and in ``/metrics`` (docs/simulator.md)."""

    name: str
    description: str
    window: WindowSemantics  # what num_speculative_tokens = k means
    vllm_version: str  # GET /version and system_fingerprint
    token_ids: bool  # honours return_token_ids (token_ids / prompt_token_ids in responses)
    continuous_usage: bool  # honours stream_options.continuous_usage_stats
    metrics: MetricsStyle  # which metric families /metrics exposes
    spec_counters_move: bool  # whether the spec-decode metrics count anything
    errors: ErrorStyle  # error body layout
    text_holdback_rate: float  # share of tokens whose text the detokenizer holds back (ends mid-character)


class Setup(Protocol):
    """The settings of a run a dialect's rules and flags read (``SpectrnConfig`` has them all)."""

    @property
    def speculation_mode(self) -> str: ...
    @property
    def num_speculative_tokens(self) -> int: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def target(self) -> str: ...
    @property
    def draft(self) -> str: ...
    @property
    def target_spec(self) -> ModelSpec: ...
    @property
    def draft_spec(self) -> ModelSpec: ...
    @property
    def neuron_config(self) -> dict[str, Any]: ...
    @property
    def scheduling(self) -> str: ...


def flag_json(value: Any) -> str:
    """A JSON flag value as the manifests write it (``", "`` and ``": "`` separators)."""
    return json.dumps(value, separators=(", ", ": "))


@dataclass(frozen=True, slots=True)
class Refusal:
    """A speculation mode a dialect refuses with its own reason (the fact with its source) and fix."""

    message: str
    fix: str


@dataclass(frozen=True)
class Dialect:
    """One kind of vLLM server on Neuron. Subclasses override the flag hooks where their server differs."""

    key: str  # the registry key: "legacy-neuron", "vllm-neuron-0.2", ...
    vllm_dialect: str  # the config's vllm_dialect value that selects it
    releases: tuple[str, ...]  # the config's plugin_release values that select it (empty: every value)
    label: str  # how messages name it
    image: str  # default vLLM image
    window: WindowSemantics
    modes: tuple[str, ...]  # speculation_mode values it runs at all (the method's own rules still apply)
    modes_source: str  # where ``modes`` comes from, cited when a mode is refused
    profile: ServerProfile  # the simulator's imitation of this server
    # the simulator profile a simulated run plays for this dialect; None: the sim preset's own
    sim_profile: str | None = None
    eagle_method: str = "eagle"  # the speculative-config ``method`` of speculation_mode eagle
    # model families allowed with speculation_mode eagle: on the target and draft (NxDI EAGLE), on the draft only
    eagle_architectures: tuple[str, ...] = ()
    eagle_draft_only: bool = False
    eagle_rule_source: str = ""
    eagle_rule: str = ""  # what this server's EAGLE path is, in the words of a refusal
    eagle_rule_note: str = ""
    eagle_fix: str = ""
    # target families whose model recipes list EAGLE3 (None: no recipe warning applies)
    eagle_recipe_architectures: tuple[str, ...] | None = None
    selectable: bool = True  # a config may name it (vllm_dialect); else the simulator and local runs only
    out_of_support: bool = False  # Neuron no longer supports this stack (the unsupported_stack notice)
    refusals: dict[str, Refusal] = field(default_factory=dict)  # modes refused with a reason of their own
    counter_families: tuple[str, ...] = ()  # spec-decode metric families its /metrics registers
    # the environment variables that carry the compile and execute timeouts (neuron_timeout_s); empty: none known
    timeout_env: tuple[str, ...] = ()
    # The flag that pins vLLM's scheduling to synchronous (None: spectrn renders none for this server), and what
    # each service (baseline, speculative) runs at the server's default (None: not documented for this server);
    # docs/neuron.md, "Scheduling mode".
    sync_scheduling_flag: str | None = None
    default_scheduling: tuple[str, str] | None = None
    scheduling_source: str = ""

    # ---- rules ---------------------------------------------------------------------------------------
    def check_mode(self, mode: str, fix_elsewhere: str) -> None:
        """Refuse a speculation mode this server cannot run: its own refusal first, then the mode list."""
        refusal = self.refusals.get(mode)
        if refusal is not None:
            raise FieldError(refusal.message, fields=("speculation_mode", "vllm_dialect"), fix=refusal.fix)
        if mode not in self.modes:
            raise FieldError(
                f"speculation_mode: {mode!r} is not supported by vllm_dialect {self.vllm_dialect!r} (supports: "
                f"{', '.join(self.modes)}): {self.modes_source}",
                fields=("speculation_mode", "vllm_dialect"),
                fix=fix_elsewhere,
            )

    def check_eagle(self, setup: Setup) -> None:
        """The model families this server's EAGLE path accepts."""
        if self.eagle_draft_only:
            draft = setup.draft_spec
            if draft.architecture not in self.eagle_architectures:
                raise FieldError(
                    f"draft: speculation_mode 'eagle' on {self.label} runs {self.eagle_method}, whose draft class "
                    f"is Eagle3LlamaForCausalLM; draft {setup.draft!r} is architecture "
                    f"{draft.architecture or 'undeclared'!r} [{self.eagle_rule_source}]",
                    fields=("draft", "speculation_mode", "plugin_release"),
                    fix="use an EAGLE3 draft with a Llama-style config (custom_models: architecture: llama, "
                    "eagle_draft: true)",
                )
            return
        for role, key, spec in (("target", setup.target, setup.target_spec), ("draft", setup.draft, setup.draft_spec)):
            if spec.architecture not in self.eagle_architectures:
                raise FieldError(
                    f"{role}: speculation_mode 'eagle' on {self.label} runs {self.eagle_rule}; {role} {key!r} is "
                    f"architecture {spec.architecture or 'undeclared'!r}{self.eagle_rule_note} "
                    f"[{self.eagle_rule_source}]",
                    fields=(role, "speculation_mode", "vllm_dialect"),
                    fix=self.eagle_fix,
                )

    # ---- the vLLM command line ------------------------------------------------------------------------
    def neuron_overrides(self, setup: Setup, speculative: bool) -> dict[str, Any]:
        """NxDI neuron config keys this server takes; plugin servers derive the speculation keys themselves
        from ``--speculative-config``, so only the base keys."""
        return {"save_sharded_checkpoint": True, **setup.neuron_config}

    def config_flags(self, setup: Setup, speculative: bool) -> list[str]:
        """The flags that carry the Neuron config (and anything else this server needs on both services)."""
        raise NotImplementedError

    def speculative_config(self, setup: Setup, draft_path: str, method: str | None) -> dict[str, Any]:
        """``--speculative-config`` for a draft at ``draft_path`` (``method`` from the speculation method)."""
        spec: dict[str, Any] = {}
        if method is not None:
            spec["method"] = method
        spec.update(model=draft_path, num_speculative_tokens=setup.num_speculative_tokens)
        spec["max_model_len"] = setup.max_model_len
        return spec

    def scheduling_flags(self, setup: Setup) -> list[str]:
        """The same scheduling mode on both services (``scheduling: same``): the speculative service's is fixed
        by its server, so both are pinned to it explicitly rather than trusting an implicit switch-off."""
        if setup.scheduling == "same" and self.sync_scheduling_flag is not None:
            return [self.sync_scheduling_flag]
        return []

    def scheduling_mode(self, setup: Setup, speculative: bool) -> str | None:
        """The scheduling mode a service runs with, as recorded in provenance (None: not known for this server)."""
        if self.scheduling_flags(setup):
            return f"sync ({self.sync_scheduling_flag})"
        if self.default_scheduling is None:
            return None
        return f"{self.default_scheduling[1 if speculative else 0]} (server default)"

    def scheduling_unfair(self, setup: Setup) -> str | None:
        """Why the A/B is not like for like when the services are left at a server default that differs."""
        if self.scheduling_flags(setup) or self.default_scheduling is None:
            return None
        base, spec = self.default_scheduling
        if base == spec:
            return None
        return (
            f"scheduling: server-default on {self.label}: the baseline runs {base} scheduling and the speculative "
            f"service {spec} ({self.scheduling_source}), so the A/B compares scheduling modes as well as "
            f"speculation; set scheduling: same to pin both to {self.sync_scheduling_flag}"
        )

    def env(self) -> list[tuple[str, str]]:
        """Container environment this server needs beyond the model ids and artifact paths."""
        return []
