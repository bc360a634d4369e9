"""The version check every versioned run-folder document shares: an object, a version number, not newer than ours."""

from __future__ import annotations

from typing import Any

from spectrn.errors import SpectrnError


def versioned_document(
    raw: Any,
    where: str,
    *,
    newest: int,
    schema: str,
    error: type[SpectrnError],
    hint: str,
    upgrade: str,
    legacy_key: str | None = None,
) -> dict[str, Any]:
    """``raw`` as a dict stamped with ``newest`` (an older version is read as today's layout), or ``error``: not an
    object, a version that is no number, or one written by a newer spectrn (``upgrade`` says what to do then).
    ``legacy_key``: the key an earlier layout kept its version under."""
    if not isinstance(raw, dict):
        raise error(f"{where} is not a JSON object", hint=hint)
    data = dict(raw)
    version = data.pop("schema_version", data.pop(legacy_key, 1) if legacy_key else 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise error(f"{where}: schema_version {version!r} is not a version number", hint=hint)
    if version > newest:
        raise error(
            f"{where} was written by a newer spectrn ({schema} schema {version}; this spectrn reads up to {newest})",
            hint=f"upgrade spectrn (pip install -U spectrn) to {upgrade}",
        )
    return {**data, "schema_version": newest}
