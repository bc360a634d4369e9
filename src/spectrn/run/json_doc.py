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
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from spectrn.errors import SpectrnError

_ANY: TypeAdapter[Any] = TypeAdapter(Any)


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


def loads_line(text: str) -> Any:
    """``loads`` for one line of ``requests.jsonl``, at the speed of pydantic's own parser (a million lines are
    read several times per analysis, and ``object_pairs_hook`` would double the cost of reading them).

    pydantic's parser keeps the last of two equal keys, so its result is checked by counting colons: outside
    strings, a JSON text has one colon per object member, so the line's colons equal the members of the parsed
    object plus the colons inside its keys and string values exactly when the line holds one object with no key
    twice and nothing nested. A line with anything more (a nested object, a string list, a ``\\u`` escape that
    could spell a colon) is parsed again by ``loads``, which decides."""
    value = _ANY.validate_json(text)
    if type(value) is dict and "\\u" not in text:
        colons = text.count(":")
        if colons != len(value):
            colons -= "".join(value).count(":") + "".join([v for v in value.values() if type(v) is str]).count(":")
        if colons == len(value):
            return value
    loads(text)  # only to find a key twice: the value stays pydantic's, as it was before this check
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
