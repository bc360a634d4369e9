"""The strict base of every spec model and the value patterns the models share (quantities, regions, names)."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

QUANTITY = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+|[numkMGTPE]i?|Ki)?")
AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,499}")


def quantity(v: str) -> str:
    if not QUANTITY.fullmatch(v):
        raise ValueError(f"{v!r} is not a Kubernetes quantity (e.g. 90, 500m, 600Gi)")
    return v


class Strict(BaseModel):
    # allow_inf_nan=False: no setting means anything at infinity or NaN (an infinite price used to become the
    # catalog's, since JSON has no infinity and the value was written to run.json as null)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=(), allow_inf_nan=False)


def one_of(value: str, choices: tuple[str, ...] | list[str]) -> str:
    """A choice from a registry, refused in the words of pydantic's ``Literal`` error, so a list that grows at run
    time (``spectrn.dialects``) reads like one written in the model."""
    if value in choices:
        return value
    quoted = [repr(c) for c in choices]
    expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    raise ValueError(f"Input should be {expected}")


def json_value(value: Any, where: str) -> None:
    """Refuse what JSON cannot carry as it is, naming where it sits (``a.b[0]``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not text (quote it)")
            json_value(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            json_value(item, f"{where}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value} is not a finite number")
    elif value is not None and not isinstance(value, str | int | float):  # a bool is an int
        raise ValueError(f"{where}: {value} is a {type(value).__name__}, not text or a number (quote it)")


def has_registry(image: str) -> bool:
    """Docker's rule: the first path component is a registry host when it has a '.' or ':' or is localhost."""
    first, sep, _ = image.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")
