"""One rule for every name that becomes a file name, a Kubernetes label or a shell word.

Endpoint names, variants, prompt classes, model keys, run ids: each ends up as a folder or file name in the run
folder, a CloudWatch dimension, a Kubernetes label value or an argument in a rendered script. A name passes
when it is a valid Kubernetes label value: 1 to 63 characters, letters, digits, ``-``, ``_`` and ``.``,
starting and ending with a letter or digit (so no ``/``, no ``..`` path, no ``$``, quote or space).
"""

from __future__ import annotations

import re

from spectrn.errors import ConfigError

NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def is_name(value: str) -> bool:
    return bool(NAME_RE.fullmatch(value)) and ".." not in value


def check_name(value: str, *, what: str, source: str) -> str:
    """``value`` if it is a safe name, else a ConfigError naming the field, where it came from and the fix."""
    if isinstance(value, str) and is_name(value):
        return value
    shown = repr(value)[:80]
    raise ConfigError(
        f"{what} {shown} (from {source}) is not a valid name",
        hint="use 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    )
