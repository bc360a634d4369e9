"""The JSON Schemas of the run folder's files that other tools read, generated from the contract models.

``spectrn schemas --write docs/schemas`` (and ``make docs``) writes them; a test fails when a committed schema
differs from the models, so downstream tools can rely on ``docs/schemas/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spectrn.run.capacity import Capacity
from spectrn.run.publish_ledger import PublishLedger
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.repeats import Repeats
from spectrn.run.summary import SCHEMA_VERSION, Summary
from spectrn.run.sweep_analysis import SweepAnalysis
from spectrn.run.sweep_manifest import SweepManifest

SCHEMAS: dict[str, Any] = {
    "summary.schema.json": Summary,
    "request-record.schema.json": RequestRecord,
    "run.schema.json": RunMeta,
    "repeats.schema.json": Repeats,
    "capacity.schema.json": Capacity,
    "publish.schema.json": PublishLedger,
    "sweep.schema.json": SweepManifest,
    "analysis.schema.json": SweepAnalysis,
}


def schema_texts() -> dict[str, str]:
    """File name -> JSON Schema text (stable: sorted keys, 2-space indent, trailing newline)."""
    out = {}
    for name, model in SCHEMAS.items():
        schema = model.model_json_schema(mode="serialization")
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["$id"] = f"https://spectrn.dev/schemas/v{SCHEMA_VERSION}/{name}"
        if model is RequestRecord:
            schema["description"] = "One line of requests.jsonl (JSON Lines: one object per line)."
        out[name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def write_schemas(folder: Path) -> list[Path]:
    from spectrn.paths import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_texts().items():
        atomic_write_text(folder / name, text)
        (folder / name).chmod(0o644)
        written.append(folder / name)
    return written
