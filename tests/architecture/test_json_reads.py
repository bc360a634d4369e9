"""JSON read back from run and sweep folders goes through ``spectrn.run.json_doc``, which refuses a key twice.

Modules under ``run/``, ``sweep/`` and ``analyze/`` (the readers of run and sweep folders) never call
``json.load``/``json.loads`` or a pydantic ``model_validate_json``/``validate_json`` themselves: a reader that did
would take the last of two equal keys without a word. The known-bad snippets show that the check catches each.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "spectrn"
OWNER = SRC / "run" / "json_doc.py"
READERS = ("run", "sweep", "analyze")
PARSERS = {"load", "loads", "model_validate_json", "validate_json"}


def _parses_json(tree: ast.AST) -> list[int]:
    """Lines that parse JSON other than through json_doc (``json.loads(...)``, ``X.model_validate_json(...)``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PARSERS:
            receiver = node.func.value
            if node.func.attr in {"load", "loads"} and not (isinstance(receiver, ast.Name) and receiver.id == "json"):
                continue  # json_doc's own loads, yaml.safe_load, ...
            lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module == "json":
            if any(a.name in {"load", "loads"} for a in node.names):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize(
    "snippet",
    [
        "import json\nx = json.loads(text)",
        "import json\nx = json.load(f)",
        "from json import loads\nx = loads(text)",
        "x = RequestRecord.model_validate_json(line)",
        "x = TypeAdapter(Any).validate_json(line)",
    ],
)
def test_the_check_catches_each_way_around_json_doc(snippet: str) -> None:
    assert _parses_json(ast.parse(snippet))


def test_run_and_sweep_folder_readers_parse_json_only_through_json_doc() -> None:
    found = []
    for folder in READERS:
        for path in sorted((SRC / folder).rglob("*.py")):
            if path == OWNER:
                continue
            for line in _parses_json(ast.parse(path.read_text(encoding="utf-8"))):
                found.append(f"{path.relative_to(SRC)}:{line}")
    assert not found, f"JSON parsed around spectrn.run.json_doc (a key twice would pass unseen): {found}"
