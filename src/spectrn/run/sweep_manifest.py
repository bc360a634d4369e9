"""``sweep.json``: the typed record of a sweep's settings and finished cells (``SweepManifest``), read leniently.

One per sweep folder ``<out-dir>/<sweep-id>/``, rewritten atomically after every finished cell, so an interrupted
sweep resumes with exactly the cells it recorded. Its JSON Schema is published in
``docs/schemas/sweep.schema.json``.

Versions: 1 spelled its version ``version`` (spectrn 0.1.0 before this model); 2 is ``schema_version``. A
version-1 file is read as version 2 (the cells are the same); a file from a newer spectrn is an error.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from spectrn.errors import AnalysisError, one_line
from spectrn.run.summary import Contract
from spectrn.run.versions import versioned_document

SWEEP_SCHEMA_VERSION = 2


class SweepSettings(Contract):
    """What the sweep was asked to measure (the flags and config that shape its grid)."""

    drafts: list[str] = Field(default_factory=list, description="Draft models of the grid.")
    windows: list[int] = Field(default_factory=list, description="Speculation windows of the grid.")
    levels: list[str] = Field(default_factory=list, description="Load levels (c4, r2.5, ...) in load order.")
    prompts: str | None = Field(default=None, description="The prompt set or class selection (bench.prompts).")
    requests: int | None = Field(default=None, description="Measured requests per endpoint and cell.")
    max_tokens: int | None = Field(default=None, description="Output tokens asked of each request.")
    predict: bool = Field(default=False, description="The sweep ran --predict (largest window, then a confirmation).")
    target: str | None = Field(default=None, description="The target model.")
    runtime: str | None = Field(default=None, description="Where the cells ran: sim, vllm-cpu or neuron.")


class CellEquivalence(Contract):
    """Greedy outputs compared token by token between baseline and speculative in one cell."""

    compared: int = Field(default=0, description="Request pairs whose outputs were compared.")
    matched: int = Field(default=0, description="Pairs whose outputs were identical.")
    match_rate: float | None = Field(default=None, description="matched / compared (None: nothing compared).")


class SweepCell(Contract):
    """One finished cell: a (draft, window, load level) configuration and the run folder it produced."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")
    level: str = Field(description="Load level label.")
    run_dir: str = Field(description="The cell's run folder, relative to the sweep folder.")
    started_at: float | None = Field(default=None, description="Unix time the cell started.")
    finished_at: float | None = Field(default=None, description="Unix time the cell finished.")
    duration_s: float | None = Field(default=None, description="Wall-clock seconds the cell took.")
    clean: bool | None = Field(default=None, description="The cell's run was clean (summary verdict).")
    equivalence: CellEquivalence = Field(
        default_factory=CellEquivalence, description="Output equivalence at the cell's load level."
    )


class SweepManifest(Contract):
    """``sweep.json``: the sweep's identity, settings, config fingerprint and finished cells."""

    schema_version: int = Field(
        default=SWEEP_SCHEMA_VERSION, description="Version of sweep.json's layout (version 1 spelled it 'version')."
    )
    sweep_id: str = Field(description="The sweep's id (its folder name).")
    created_at: float = Field(description="Unix time the sweep was started.")
    fingerprint: str = Field(
        description="Fingerprint of the config a resume must match (drafts, windows and levels may change)."
    )
    settings: SweepSettings = Field(default_factory=SweepSettings, description="The latest run's settings.")
    cells: dict[str, SweepCell] = Field(
        default_factory=dict, description="Finished cells by key (draft-kWINDOW@level), in the order they finished."
    )


def read_sweep_manifest(raw: Any, where: str) -> SweepManifest:
    """A ``sweep.json`` document of any version up to this spectrn's; AnalysisError naming the problem otherwise."""
    hint = "restore sweep.json from the sweep folder, or move it away to start the sweep afresh"
    data = versioned_document(
        raw, where, newest=SWEEP_SCHEMA_VERSION, schema="sweep", error=AnalysisError, hint=hint,
        upgrade="resume this sweep", legacy_key="version",
    )  # fmt: skip
    try:
        return SweepManifest.model_validate(data)
    except ValidationError as e:
        raise AnalysisError(f"{where} is not a sweep record: {one_line(e)}", hint=hint) from None
