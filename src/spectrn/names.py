"""The one rule for names that become file names, Kubernetes labels or shell words.

Endpoint (variant) names name files and folders inside a run (``metrics/<name>.<level>.prom``, llmperf
folders) and become CloudWatch dimensions; prompt classes become dimensions and report labels; run ids
name the run folder and, in a cluster, the load Job, its ConfigMap and the ``spectrn.io/run-id`` label.
A name with ``/`` or ``..`` would write outside the run folder, and one with spaces or quotes breaks a
label or a shell line, so every such name from outside (flags, files, records read back) passes here.

* ``check_name``: a Kubernetes label value (1-63 characters: letters, digits, ``.``, ``_``, ``-``,
  starting and ending with a letter or digit), never ``..``. Also a safe file name and shell word.
* ``check_run_id``: stricter, because a run id is also part of Kubernetes object names
  (``spectrn-loadgen-<run id>`` must stay a DNS label): lowercase letters, digits and ``-``, at most 40
  characters. It is the same rule for a local bench and an in-cluster one, so a run can move between them.
"""

from __future__ import annotations

import re

from spectrn.errors import ConfigError

_SAFE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_RUN_ID = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,38}[a-z0-9])?")
NAME_RULE = "1-63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit"
RUN_ID_RULE = "1-40 lowercase letters, digits or '-', starting and ending with a letter or digit"


def is_safe_name(value: object) -> bool:
    return isinstance(value, str) and _SAFE_NAME.fullmatch(value) is not None and ".." not in value


def name_problem(value: object) -> str | None:
    """Why ``value`` is not a safe name, or None (for validators that raise their own error type)."""
    if is_safe_name(value):
        return None
    return f"{_show(value)} is not a safe name ({NAME_RULE})"


def check_name(value: str, *, what: str, source: str, example: str = "baseline") -> str:
    """``value`` if it is a safe name, else a ``ConfigError`` naming the field, where it came from and the fix."""
    if is_safe_name(value):
        return value
    raise ConfigError(
        f"{what} {_show(value)} (from {source}) is not a safe name: it becomes a file name and a label",
        hint=f"use {NAME_RULE}, e.g. {example}",
    )


def check_run_id(value: str, *, source: str = "--run-id") -> str:
    """``value`` if it is usable as a run id both locally and in a cluster, else a ``ConfigError``."""
    if isinstance(value, str) and _RUN_ID.fullmatch(value):
        return value
    raise ConfigError(
        f"run id {_show(value)} (from {source}) is not usable: it names the run folder and Kubernetes objects",
        hint=f"use {RUN_ID_RULE}, e.g. 20260101-1200",
    )


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
