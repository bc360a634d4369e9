"""docs/schemas/ is generated from the contract models, and what spectrn writes validates against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract import SCHEMAS, assert_valid_run_folder
from spectrn.run.schemas import schema_texts


def test_published_schemas_are_current() -> None:
    for name, text in schema_texts().items():
        path = SCHEMAS / name
        assert path.exists() and path.read_text(encoding="utf-8") == text, (
            f"docs/schemas/{name} is stale: run `spectrn schemas --write docs/schemas` (make docs)"
        )


def test_summary_schema_carries_its_version_and_rejects_unknown_fields(tmp_path: Path) -> None:
    import jsonschema

    schema = json.loads((SCHEMAS / "summary.schema.json").read_text())
    assert schema["properties"]["schema_version"]["const"] == 2
    assert schema["additionalProperties"] is False
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema_version": 2, "run_id": "r", "verdict": {}, "levels": [], "x": 1}, schema)


def test_a_local_bench_writes_files_that_validate(tmp_path: Path) -> None:
    from doubles.runfactory import make_run

    assert_valid_run_folder(make_run(tmp_path, per_class=3))
