"""Hand-made mutants of the capacity area (see ``hack/mutants/__init__.py``)."""

from __future__ import annotations

MANUAL: tuple[tuple[str, str, str, str, tuple[str, ...], str], ...] = ()
