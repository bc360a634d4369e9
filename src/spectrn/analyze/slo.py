"""The SLO language: parse latency targets and evaluate them on per-request values (pure; owns both).

Syntax (docs/slo.md)::

    [<prompt class>/][p<N>:]<metric><=<number><unit>

    metric   ttft | tpot | itl | e2e
    unit     ms | s
    p<N>     a percentile, 0 < N <= 100 (p50, p90, p99, p99.9)

- ``p90:tpot<=50ms``: a **percentile SLO**. It is met when the p90 of TPOT over the scope's requests is at
  most 50 ms (the same percentile ``summary.json`` reports: linear interpolation over the requests' values;
  ITL: the token-weighted per-token distribution).
- ``tpot<=50ms``: a **per-request SLO**. A request meets it when its own value does; the per-request SLOs
  together define goodput.
- ``structured/p90:tpot<=40ms``: either kind, applied to the requests of one prompt class only.

A request's own value: TTFT, TPOT = (e2e - TTFT) / (tokens - 1) and e2e as ``spectrn.analyze.metrics``
defines them; its ITL is its largest per-token gap (an event carrying k tokens after a gap g gives k gaps of
g / k), so ``itl<=X`` means no token of the request waited more than X. A request without a value for the
metric (one output token has no TPOT, a single event no ITL) does not meet the SLO: goodput only counts what
was shown to meet the target.

Goodput of a scope (a load level and variant, optionally one prompt class): the completed requests that meet
every per-request SLO applying to their class, per second of the scope's wall time (requests/s), and their
output tokens per second (tokens/s). ``share_within`` is that count over the requests attempted (failed
requests count as missing the target).

API::

    parse_slo(text) -> Slo                       raises SloSyntaxError(message, fix)
    parse_slos(texts, source=...) -> tuple[Slo, ...]
    slos_of(texts, slo_ttft_s, slo_tpot_s)       the config's SLOs, legacy bench.slo_ttft_s/_tpot_s included
    evaluate(slos, RequestValues(...), wall_s=..., attempted=..., itl_quantile=...) -> SloResult
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from spectrn.names import NAME_RULE, is_safe_name

Metric = Literal["ttft", "tpot", "itl", "e2e"]
METRICS: tuple[Metric, ...] = ("ttft", "tpot", "itl", "e2e")
_METRIC_OF: dict[str, Metric] = {m: m for m in METRICS}
UNITS = {"ms": 1e-3, "s": 1.0}
EXAMPLE = "p90:tpot<=50ms"

# The whole form; each part is checked on its own afterwards for a message that names what is wrong.
_FORM = re.compile(
    r"^(?:(?P<cls>[^/]*)/)?(?:(?P<pct>[^:]*):)?(?P<metric>[^<>=]*?)\s*(?P<op><=|=<|<|=|>=|>)\s*(?P<rest>.*)$"
)
_NUMBER = re.compile(r"^(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>[A-Za-z]*)$")
_PERCENTILE = re.compile(r"^p(?P<num>[0-9]+(?:\.[0-9]+)?)$")


class SloSyntaxError(ValueError):
    """An SLO text that does not parse: ``message`` says what is wrong, ``fix`` how to write it."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


@dataclass(frozen=True)
class Slo:
    """One latency target. ``percentile`` None: a per-request SLO (defines goodput); else 0 < p <= 100."""

    metric: Metric
    percentile: float | None
    threshold_s: float
    prompt_class: str | None = None

    @property
    def per_request(self) -> bool:
        return self.percentile is None

    @property
    def text(self) -> str:
        """The canonical spelling (thresholds under a second in ms): ``structured/p90:tpot<=40ms``."""
        if self.threshold_s < 1.0:
            limit = f"{round(self.threshold_s * 1e3, 9):g}ms"
        else:
            limit = f"{round(self.threshold_s, 9):g}s"
        pct = f"p{self.percentile:g}:" if self.percentile is not None else ""
        cls = f"{self.prompt_class}/" if self.prompt_class is not None else ""
        return f"{cls}{pct}{self.metric}<={limit}"

    def applies_to(self, prompt_class: str | None) -> bool:
        """Whether the SLO binds requests of ``prompt_class`` (an unscoped SLO binds every class)."""
        return self.prompt_class is None or self.prompt_class == prompt_class


def parse_slo(text: str) -> Slo:
    """One SLO from its text; ``SloSyntaxError`` names the part that is wrong and how to write it."""
    if not isinstance(text, str):
        raise SloSyntaxError(f"{text!r} is not text", f"write an SLO as text, e.g. {EXAMPLE}")
    raw = text.strip()
    if not raw:
        raise SloSyntaxError("the SLO is empty", f"write e.g. {EXAMPLE} or tpot<=50ms")
    m = _FORM.match(raw)
    if m is None:
        raise SloSyntaxError(f"SLO {text!r} has no '<=' comparison", f"write <metric><=<number><unit>, e.g. {EXAMPLE}")
    if m["op"] != "<=":
        raise SloSyntaxError(
            f"SLO {text!r} compares with {m['op']!r}; an SLO is an upper bound written '<='",
            f"write e.g. {m['metric'].strip() or 'tpot'}<=50ms",
        )
    cls = m["cls"]
    if cls is not None:
        cls = cls.strip()
        if not is_safe_name(cls):
            raise SloSyntaxError(
                f"SLO {text!r}: prompt class {cls!r} is not a prompt class name ({NAME_RULE})",
                "write <class>/<slo>, e.g. structured/p90:tpot<=40ms",
            )
    percentile: float | None = None
    if m["pct"] is not None:
        pm = _PERCENTILE.match(m["pct"].strip())
        if pm is None:
            raise SloSyntaxError(
                f"SLO {text!r}: {m['pct'].strip()!r} is not a percentile",
                "write p<N> with 0 < N <= 100 before the colon, e.g. p90:tpot<=50ms (or no prefix for a "
                "per-request SLO: tpot<=50ms)",
            )
        percentile = float(pm["num"])
        if not 0 < percentile <= 100:
            raise SloSyntaxError(
                f"SLO {text!r}: percentile p{pm['num']} is outside (0, 100]", "use e.g. p50, p90, p99 or p99.9"
            )
    metric = m["metric"].strip().lower()
    if metric not in METRICS:
        raise SloSyntaxError(
            f"SLO {text!r}: unknown metric {m['metric'].strip()!r}", f"use one of {', '.join(METRICS)}"
        )
    nm = _NUMBER.match(m["rest"].strip())
    if nm is None:
        raise SloSyntaxError(
            f"SLO {text!r}: {m['rest'].strip()!r} is not a positive number with a unit",
            f"write the limit as a number and ms or s, e.g. {metric}<=50ms",
        )
    unit = nm["unit"].lower()
    if not unit:
        raise SloSyntaxError(
            f"SLO {text!r}: the limit {nm['num']} has no unit", f"write ms or s after it, e.g. {metric}<={nm['num']}ms"
        )
    if unit not in UNITS:
        raise SloSyntaxError(f"SLO {text!r}: unknown unit {nm['unit']!r}", f"use ms or s, e.g. {metric}<={nm['num']}ms")
    threshold = float(nm["num"]) * UNITS[unit]
    if not 0 < threshold < 86400 * 7:
        raise SloSyntaxError(f"SLO {text!r}: the limit must be above 0 and below a week", f"write e.g. {metric}<=50ms")
    return Slo(metric=_METRIC_OF[metric], percentile=percentile, threshold_s=threshold, prompt_class=cls)


def parse_slos(texts: Sequence[str]) -> tuple[Slo, ...]:
    """Every SLO of ``texts`` in order (the first bad one raises ``SloSyntaxError``, with its position)."""
    out = []
    for i, text in enumerate(texts):
        try:
            out.append(parse_slo(text))
        except SloSyntaxError as e:
            where = f"item {i + 1}: " if len(texts) > 1 else ""
            raise SloSyntaxError(where + e.message, e.fix) from None
    return tuple(out)


def slos_of(texts: Sequence[str], slo_ttft_s: float | None = None, slo_tpot_s: float | None = None) -> tuple[Slo, ...]:
    """The configuration's SLOs: ``bench.slo`` plus the older ``bench.slo_ttft_s`` / ``slo_tpot_s``, which
    mean the per-request ``ttft<=X`` / ``tpot<=X``. A target given twice counts once."""
    out = list(parse_slos(texts))
    if slo_ttft_s is not None:
        out.append(Slo("ttft", None, float(slo_ttft_s)))
    if slo_tpot_s is not None:
        out.append(Slo("tpot", None, float(slo_tpot_s)))
    return tuple(dict.fromkeys(out))


# ---- evaluation ------------------------------------------------------------------------------------------

# The token-weighted per-token ITL quantile q (0 < q <= 1) over the requests of a prompt class (None: all of the
# scope's requests); None when there is no gap. Per-token values are not kept per request (a sketch holds them).
ItlQuantile = Callable[[float, str | None], float | None]


@dataclass(frozen=True)
class RequestValues:
    """One scope's completed requests, aligned by position, in seconds of real time. NaN: no value (TPOT of a
    one-token request, ITL of a single-event request). ``prompt_class``: each request's class (None: class-scoped
    SLOs bind no request of this scope)."""

    ttft_s: Sequence[float] | Any
    tpot_s: Sequence[float] | Any
    e2e_s: Sequence[float] | Any
    itl_max_s: Sequence[float] | Any
    output_tokens: Sequence[float] | Any
    prompt_class: Sequence[str] | None = None

    def column(self, metric: Metric) -> Any:
        import numpy as np

        source = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2e": self.e2e_s, "itl": self.itl_max_s}[metric]
        return np.asarray(source, dtype=float)

    def __len__(self) -> int:
        return len(self.ttft_s)


@dataclass(frozen=True)
class PercentileOutcome:
    """A percentile SLO judged: the observed percentile (None: no value to judge) and whether it is met."""

    slo: Slo
    observed_s: float | None
    met: bool | None
    n: int


@dataclass(frozen=True)
class SloResult:
    """Percentile SLOs judged, and goodput (None without a per-request SLO, or without wall time)."""

    percentiles: tuple[PercentileOutcome, ...]
    per_request: tuple[Slo, ...]
    requests_within: int | None
    share_within: float | None
    goodput_requests_per_s: float | None
    goodput_tokens_per_s: float | None

    @property
    def met(self) -> bool | None:
        """Every percentile SLO met (None: there is none, or one could not be judged and none failed)."""
        verdicts = [p.met for p in self.percentiles]
        if any(v is False for v in verdicts):
            return False
        if not verdicts or any(v is None for v in verdicts):
            return None
        return True


def _class_mask(values: RequestValues, slo: Slo) -> Any:
    import numpy as np

    n = len(values)
    if slo.prompt_class is None:
        return np.ones(n, dtype=bool)
    if values.prompt_class is None:
        return np.zeros(n, dtype=bool)
    return np.asarray([c == slo.prompt_class for c in values.prompt_class], dtype=bool)


def evaluate(
    slos: Sequence[Slo],
    values: RequestValues,
    *,
    wall_s: float,
    attempted: int | None = None,
    itl_quantile: ItlQuantile | None = None,
) -> SloResult:
    """Judge ``slos`` on one scope's requests.

    Percentile SLOs: the percentile of the metric over the requests of the SLO's class (finite values, linear
    interpolation); ITL percentiles come from ``itl_quantile`` (required when there is an ITL percentile SLO).
    Goodput: requests meeting every per-request SLO that applies to their class, and their output tokens, over
    ``wall_s``; ``share_within`` over ``attempted`` (default: the completed requests given)."""
    import numpy as np

    outcomes = []
    for slo in slos:
        if slo.percentile is None:
            continue
        mask = _class_mask(values, slo)
        if slo.metric == "itl":
            if itl_quantile is None:
                raise ValueError(f"{slo.text}: an ITL percentile SLO needs the per-token ITL quantiles (itl_quantile)")
            n = int(mask.sum())
            observed = itl_quantile(slo.percentile / 100.0, slo.prompt_class) if n else None
        else:
            col = values.column(slo.metric)[mask]
            col = col[np.isfinite(col)]
            n = int(col.size)
            observed = float(np.percentile(col, slo.percentile)) if n else None
        if observed is not None and not math.isfinite(observed):
            observed = None
        met = None if observed is None else observed <= slo.threshold_s
        outcomes.append(PercentileOutcome(slo=slo, observed_s=observed, met=met, n=n))
    per_request = tuple(s for s in slos if s.percentile is None)
    if not per_request:
        return SloResult(tuple(outcomes), per_request, None, None, None, None)
    ok = np.ones(len(values), dtype=bool)
    for slo in per_request:
        col = np.nan_to_num(values.column(slo.metric), nan=math.inf)  # no value: not shown to meet it
        ok &= ~_class_mask(values, slo) | (col <= slo.threshold_s)
    within = int(ok.sum())
    tokens = float(np.asarray(values.output_tokens, dtype=float)[ok].sum())
    total = len(values) if attempted is None else attempted
    return SloResult(
        percentiles=tuple(outcomes),
        per_request=per_request,
        requests_within=within,
        share_within=within / total if total else None,
        goodput_requests_per_s=within / wall_s if wall_s > 0 else None,
        goodput_tokens_per_s=tokens / wall_s if wall_s > 0 else None,
    )
