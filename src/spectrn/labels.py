"""The one spelling of spectrn's ids, time stamps and labels: run ids, UTC stamps, the speculative-setup label,
the window, variant and prompt-class labels every output shares (pure)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

# Every pooled scope is keyed "all" in a Summary (LevelSummary.scopes) and the CloudWatch dimensions.
ALL_CLASSES = "all"
POOLED = "all (pooled)"

# Ids sort by time as text: zero-padded fields, most significant first, UTC so two machines agree.
ID_STAMP = "%Y%m%d-%H%M%S"


def utc_stamp(ts: float | None = None, fmt: str = ID_STAMP) -> str:
    """``ts`` (seconds since the epoch; now when None) in UTC as ``fmt`` (default ``20261202-042100``)."""
    return time.strftime(fmt, time.gmtime(ts))


def iso_utc(ts: float | None = None, *, millis: bool = False) -> str:
    """ISO 8601 in UTC with a ``Z``: ``2026-12-02T04:21:00Z`` (``.000Z`` with ``millis``: CloudWatch dashboards)."""
    when = datetime.now(tz=UTC) if ts is None else datetime.fromtimestamp(ts, tz=UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.000Z" if millis else "%Y-%m-%dT%H:%M:%SZ")


def utc_text(ts: float) -> str:
    """``2026-12-02 04:21:00``: a time shown to a reader (UTC)."""
    return utc_stamp(ts, "%Y-%m-%d %H:%M:%S")


def window_label(window: int | str | None) -> str:
    """``k4``: a speculation window (``k?`` when unknown)."""
    return f"k{window if window is not None else '?'}"


def setup_label(draft: str | None, window: int | str | None, sep: str = " ") -> str:
    """``<draft><sep>k<window>``: one speculative setup (``qwen3-1.7b k4``; ``sep="/"`` is the run's config label,
    the CloudWatch ``Config`` dimension). An unknown draft is ``unknown``."""
    return f"{draft or 'unknown'}{sep}{window_label(window)}"


def id_part(draft: str) -> str:
    """A draft key as a part of an id: dots become ``p`` (``qwen2.5-0.5b`` -> ``qwen2p5-0p5b``)."""
    return draft.replace(".", "p")


def stamped_id(label: str = "", *, prefix: str = "", ts: float | None = None) -> str:
    """``<prefix><UTC stamp>[-<label>]``: a new run, sweep or capacity id that sorts by time."""
    stamp = utc_stamp(ts)
    return f"{prefix}{stamp}-{label}" if label else f"{prefix}{stamp}"


def run_id(draft: str, window: int, *, prefix: str = "", ts: float | None = None) -> str:
    """``<prefix><UTC stamp>-<draft>-k<window>``: the default id of a run of one speculative setup."""
    return stamped_id(setup_label(id_part(draft), window, sep="-"), prefix=prefix, ts=ts)


def class_label(prompt_class: str) -> str:
    """A scope as a table shows it: ``all (pooled)`` for all prompt classes pooled, else the class."""
    return POOLED if prompt_class == ALL_CLASSES else prompt_class


def series_label(config_label: str, variant: str, *, multi: bool) -> str:
    """Who a chart series is: the variant, prefixed with the run's config label when several configs share a
    chart (a sweep's dashboard)."""
    return f"{config_label} {variant}" if multi else variant
