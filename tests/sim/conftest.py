"""Fixtures for the simulator tests: servers started in background threads and stopped afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-real"
STRUCTURED = "counting numbers from 1 " * 6
OPEN = "Tell me a story about a lighthouse keeper who finds a letter, and explain why it matters to her."


def sse_events(raw: bytes | str) -> list[Any]:
    """Parse an SSE body into JSON payloads (and the string "[DONE]")."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    out: list[Any] = []
    for block in text.split("\n\n"):
        block = block.strip()
        if not block:
            continue
        assert block.startswith("data: "), block
        data = block[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def fixture_request(variant: str, name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / variant / f"{name}.request.json").read_text())  # type: ignore[no-any-return]


def fixture_headers(variant: str, name: str) -> dict[str, str]:
    lines = (FIXTURES / variant / f"{name}.headers.txt").read_text().splitlines()[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line.strip())}
