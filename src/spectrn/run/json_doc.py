"""JSON read back from run and sweep folders: one parser, which refuses an object holding the same key twice.

RFC 8259 section 4 says the names in an object SHOULD be unique and that, when they are not, what a parser
reports is unpredictable (Python's ``json`` keeps the last value, others the first). A hand-edited or merged
``run.json`` with ``"pricing"`` twice would then give a cost that depends on the reader: spectrn refuses it, naming
the file and the key. Every reader of ``run.json``, ``summary.json``, ``acceptance.json``, ``publish.json``,
``sweep.json``, ``analysis.json``, the lines of ``requests.jsonl`` and llmperf's files parses through here
(``tests/architecture/test_json_reads.py`` fails when a module under ``run/``, ``sweep/`` or ``analyze/`` parses
JSON another way).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from spectrn.errors import SpectrnError

M = TypeVar("M", bound=BaseModel)


class DuplicateKeyError(ValueError):
    """An object holds ``key`` twice (a ``ValueError``, so a caller that treats bad JSON as damage does here too)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"the key {key!r} appears twice in one object")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # the common case costs one length comparison
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return obj


def loads(text: str | bytes) -> Any:
    """``text`` parsed as JSON; ``DuplicateKeyError`` for an object with a key twice, ``ValueError`` for bad JSON."""
    return json.loads(text, object_pairs_hook=_unique)


def refuse_twice(text: bytes, keys: Collection[str], strings: Iterable[object]) -> None:
    """``DuplicateKeyError`` when ``text``, one JSON object already parsed by a parser that keeps the last of two
    equal keys, holds a key twice: ``keys`` are the parsed object's keys, ``strings`` its values (only the strings
    count). For ``requests.jsonl``, read at pydantic's speed (a million lines, several times per analysis:
    ``object_pairs_hook`` on every line would double the cost of reading them).

    Outside strings a JSON text has one colon per object member, so the line's colons equal the parsed members
    plus the colons inside their keys and string values exactly when the line is one object with no key twice
    and nothing nested. A line with anything more (a nested object, a string list, a key the model ignores, a
    ``\\u`` escape that could spell a colon) is parsed again by ``loads``, which decides."""
    if b"\\u" not in text:
        extra = text.count(b":") - len(keys)
        if extra == 0:
            return
        if extra == "".join(keys).count(":") + "".join([v for v in strings if type(v) is str]).count(":"):
            return
    loads(text)


def validate_line(model: type[M], text: bytes) -> M:
    """One JSON line as ``model`` (pydantic's parse, as fast as ever), refusing a key twice (``refuse_twice``).

    For a model whose fields have no aliases and whose validators keep strings as read (``RequestRecord``): its
    set fields are then the line's keys, and its string values the line's."""
    value = model.model_validate_json(text)
    refuse_twice(text, value.model_fields_set, value.__dict__.values())
    return value


def load_json(path: Path, *, error: type[SpectrnError]) -> Any:
    """The JSON document at ``path``; ``error`` naming the file and the key when an object holds a key twice.

    ``OSError`` (a missing or unreadable file) and ``ValueError`` (not JSON) reach the caller, which names the
    document and its fix in its own words."""
    text = path.read_text(encoding="utf-8")
    try:
        return loads(text)
    except DuplicateKeyError as e:
        raise error(
            f"{path} holds the key {e.key!r} twice in one object, so which value counts is undefined "
            "(RFC 8259 section 4)",
            hint=f"keep one of the two {e.key!r} entries (or restore the file from the original run)",
        ) from None
