"""The published contract: a run folder's files validate against docs/schemas/ (what downstream tools rely on)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"


@cache
def _validator(name: str) -> Any:
    import jsonschema

    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def assert_valid_run_folder(run_dir: Path) -> dict[str, Any]:
    """summary.json, run.json and every line of requests.jsonl validate against the published schemas."""
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    errors = sorted(_validator("summary.schema.json").iter_errors(summary), key=str)
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    errors = sorted(_validator("run.schema.json").iter_errors(meta), key=str)
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]
    records = _validator("request-record.schema.json")
    for n, line in enumerate((run_dir / "requests.jsonl").read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            errs = list(records.iter_errors(json.loads(line)))
            assert not errs, f"requests.jsonl line {n}: {errs[0].message}"
    return summary


def assert_valid(document: Any, schema_name: str) -> None:
    """One document validates against ``docs/schemas/<schema_name>``."""
    errors = sorted(_validator(schema_name).iter_errors(document), key=str)
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]


def assert_valid_sweep_folder(sweep_dir: Path) -> dict[str, Any]:
    """sweep.json and analysis.json validate against the published schemas; returns the analysis."""
    assert_valid(json.loads((sweep_dir / "sweep.json").read_text(encoding="utf-8")), "sweep.schema.json")
    analysis: dict[str, Any] = json.loads((sweep_dir / "analysis.json").read_text(encoding="utf-8"))
    assert_valid(analysis, "analysis.schema.json")
    return analysis
