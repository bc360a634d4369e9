"""A sweep's decision by the user's objective: $/M at the SLO, capacity at the SLO, TPOT p50, or e2e (pure).

Objectives (``spectrn sweep --objective``; default ``cost`` when the runs judged percentile SLOs, else ``tpot``):

- ``cost``: per load level, the configuration with the lowest speculative $/M output tokens among the cells
  whose speculative variant meets every percentile SLO there (cells that miss are not eligible, and are named);
  recommended over serving without speculation only when cheaper than the baseline at that level, when the
  baseline meets the SLOs too. Across levels: the cheapest operating point within the SLOs of each.
- ``capacity``: per configuration, the highest measured load level at which its speculative variant meets
  every percentile SLO; the largest wins (against the baseline's own highest level meeting them).
- ``tpot``: the TPOT p50 speedup (baseline / speculative), as ``spectrn.sweep.recommend`` ranks it.
- ``e2e`` (``e2e:p50|p90|p95|p99``, default p90): per level, the lowest speculative e2e at that percentile
  among the eligible cells, against the baseline's.

Ties: a cost within the best's 95% interval is a tie, won by the cheaper configuration (smaller window, then
smaller draft). Every recommendation also says when time to first token regresses: the speculative TTFT p50
is worse than the baseline's beyond its interval (baseline / speculative TTFT CI entirely below 1).
Rows are the analysis's dicts (``Row.to_dict()``), class ``all`` (the whole traffic: cost and SLOs are the
service's, not a prompt class's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spectrn.errors import ConfigError
from spectrn.intervals import interval_text
from spectrn.labels import setup_label
from spectrn.run.summary import Load

OBJECTIVES = ("cost", "capacity", "tpot", "e2e")
E2E_PERCENTILES = ("p50", "p90", "p95", "p99")
RULES = {
    "cost": "lowest $/M output tokens (speculative) among cells meeting every percentile SLO",
    "capacity": "highest load level at which the speculative variant meets every percentile SLO",
    "tpot": "largest TPOT p50 speedup (baseline / speculative) with its CI above 1",
    "e2e": "lowest speculative e2e latency at the percentile among cells meeting every percentile SLO",
}
Row = Mapping[str, Any]


def parse_objective(text: str | None) -> tuple[str, str] | None:
    """``cost`` / ``capacity`` / ``tpot`` / ``e2e`` / ``e2e:p99`` -> (name, e2e percentile); None: not given."""
    if text is None:
        return None
    name, _, pct = text.strip().lower().partition(":")
    if name not in OBJECTIVES or (pct and (name != "e2e" or pct not in E2E_PERCENTILES)):
        raise ConfigError(
            f"--objective {text!r} is not an objective",
            hint="use cost, capacity, tpot, e2e or e2e:p50|p90|p95|p99 (docs/sweeps.md)",
        )
    return name, pct or "p90"


def _key(level: str) -> tuple[int, float, str]:
    return Load.parse(level).sort_key()


def _name(r: Row) -> str:
    return setup_label(r["draft"], r["window"])


def _usd(x: float) -> str:
    return f"${x:.2f}/M"


def ttft_note(r: Row | None) -> str | None:
    """``TTFT regresses ...`` when the speculative TTFT p50 is worse than the baseline's beyond its interval."""
    if r is None or not r.get("ttft_speedup_ci95"):
        return None
    lo, hi = r["ttft_speedup_ci95"]
    if hi >= 1.0:
        return None
    spec, base = r.get("ttft_spec_s"), r.get("ttft_base_s")
    times = f" ({spec * 1e3:.1f} ms vs {base * 1e3:.1f} ms)" if spec is not None and base is not None else ""
    return (f"TTFT regresses: speculative TTFT p50 is worse than the baseline's{times}, baseline / speculative "
            f"{r['ttft_speedup']:.2f}x, CI{interval_text((lo, hi))} below 1")  # fmt: skip


def _eligible(rows: Sequence[Row], slos: bool) -> tuple[list[Row], list[dict[str, Any]]]:
    if not slos:
        return list(rows), []
    ok = [r for r in rows if r.get("slo_spec") is True]
    out = [
        {
            "draft": r["draft"],
            "window": r["window"],
            "level": r["level"],
            "missed": r.get("slo_missed") or ["not judged"],
        }
        for r in rows
        if r.get("slo_spec") is not True
    ]
    return ok, out


def _with_ttft(text: str, r: Row | None) -> tuple[str, str | None]:
    note = ttft_note(r)
    return (f"{text}; {note}" if note else text), note


def _lowest(
    cand: Sequence[Row], value: Callable[[Row], float | None], ci: Callable[[Row], Any], cheaper: Callable[[Row], Any]
) -> tuple[Row, list[Row]]:
    """The lowest ``value``; ties (a value within the best's CI) go to the cheaper configuration."""
    best = min(cand, key=lambda r: (value(r), cheaper(r)))
    lo_hi = ci(best)
    top = lo_hi[1] if lo_hi else value(best)
    ties = sorted([r for r in cand if (v := value(r)) is not None and top is not None and v <= top], key=cheaper)
    return best, ties


def _per_level(
    rows: Sequence[Row], levels: Sequence[str], slos: bool, cheaper: Callable[[Row], Any], name: str, pct: str
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for lv in levels:
        at = [r for r in rows if r["level"] == lv]
        ok, missed = _eligible(at, slos)
        if name == "cost":
            ok = [r for r in ok if r.get("usd_spec") is not None]

            def value(r: Row) -> float:
                return float(r["usd_spec"])

            def ci(r: Row) -> Any:
                return r.get("usd_spec_ci95")

            base_rows = [r for r in at if r.get("usd_base") is not None and (not slos or r.get("slo_base") is True)]
            base = min((r["usd_base"] for r in base_rows), default=None)
            show = _usd
            label = "$/M output tokens at the SLO" if slos else "$/M output tokens"
        else:
            ok = [r for r in ok if (r.get("e2e_spec_s") or {}).get(pct) is not None]

            def value(r: Row) -> float:
                return float(r["e2e_spec_s"][pct])

            def ci(r: Row) -> Any:
                return None

            base_vals = [(r.get("e2e_base_s") or {}).get(pct) for r in at if not slos or r.get("slo_base") is True]
            base = min((v for v in base_vals if v is not None), default=None)

            def show(x: float) -> str:
                return f"{x:.2f} s"

            label = f"e2e {pct}"
        head = f"@ {lv}, by {label}: "
        names = ", ".join(_name(m) for m in missed)
        skipped = f" (not eligible, missing the SLOs: {names})" if missed else ""
        if not ok:
            text = head + "no configuration meets the SLOs" + skipped
            if base is not None:
                text += f"; the baseline does ({show(base)}): serve without speculation"
            out.append({"level": lv, "chosen": None, "text": text, "ineligible": missed, "ttft_regression": None})
            continue
        best, ties = _lowest(ok, value, ci, cheaper)
        chosen = ties[0] if ties else best
        v = value(chosen)
        if base is not None and v is not None and base <= v:
            text = (f"{head}serve without speculation: the baseline's {show(base)} is no worse than the best "
                    f"configuration, {_name(chosen)} at {show(v)}{skipped}")  # fmt: skip
            out.append({"level": lv, "chosen": None, "text": text, "ineligible": missed, "ttft_regression": None})
            continue
        text = f"{head}{_name(chosen)} at {show(v)}"
        if chosen is not best:
            text += f" (ties with the best, {_name(best)} at {show(value(best))}: the cheaper configuration wins)"
        if base is not None:
            text += f"; baseline {show(base)}"
        elif slos:
            text += "; the baseline misses the SLOs"
        text, note = _with_ttft(text + skipped, chosen)
        out.append({"level": lv, "chosen": {"draft": chosen["draft"], "window": chosen["window"]}, "value": v,
                    "text": text, "ineligible": missed, "ttft_regression": note})  # fmt: skip
    return out


def _capacity(rows: Sequence[Row], slos: bool, cheaper: Callable[[Row], Any]) -> list[dict[str, Any]]:
    if not slos:
        text = "by capacity at the SLO: no percentile SLO was judged, so no capacity (set --slo)"
        return [{"level": None, "chosen": None, "ineligible": [], "ttft_regression": None, "text": text}]
    configs: dict[tuple[str, int], list[Row]] = {}
    for r in rows:
        configs.setdefault((r["draft"], r["window"]), []).append(r)
    caps = []
    for rs in configs.values():
        met = [r for r in rs if r.get("slo_spec") is True]
        top = max(met, key=lambda r: _key(r["level"])) if met else None
        caps.append((top, rs[0]))
    base_met = [r["level"] for r in rows if r.get("slo_base") is True]
    base_top = max(base_met, key=_key) if base_met else None
    ranked = sorted((t for t, _ in caps if t is not None), key=lambda r: (tuple(-x for x in _key(r["level"])[:2]),
                                                                         cheaper(r)))  # fmt: skip
    none = [f"{_name(first)}" for top, first in caps if top is None]
    tail = f" (meets the SLOs at no measured level: {', '.join(none)})" if none else ""
    base_text = f"baseline up to {base_top}" if base_top else "the baseline meets them at no measured level"
    if not ranked:
        text = f"by capacity at the SLO: no configuration meets the SLOs at any measured level; {base_text}{tail}"
        return [{"level": None, "chosen": None, "text": text, "ineligible": [], "ttft_regression": None}]
    best = ranked[0]
    if base_top is not None and _key(base_top) >= _key(best["level"]):
        text = (f"by capacity at the SLO: serve without speculation: {base_text}, no configuration higher (best "
                f"{_name(best)} up to {best['level']}){tail}")  # fmt: skip
        return [{"level": best["level"], "chosen": None, "text": text, "ineligible": [], "ttft_regression": None}]
    text = f"by capacity at the SLO: {_name(best)} meets the SLOs up to {best['level']}; {base_text}{tail}"
    text, note = _with_ttft(text, best)
    return [{"level": best["level"], "chosen": {"draft": best["draft"], "window": best["window"]},
             "text": text, "ineligible": [], "ttft_regression": note}]  # fmt: skip


def _overall_cost(recs: Sequence[dict[str, Any]], rows: Sequence[Row], slos: bool) -> str | None:
    chosen = [r for r in recs if r["chosen"] is not None]
    base = [r for r in rows if r.get("usd_base") is not None and (not slos or r.get("slo_base") is True)]
    if not chosen and not base:
        return None
    parts = []
    if chosen:
        c = min(chosen, key=lambda r: r["value"])
        setup = setup_label(c["chosen"]["draft"], c["chosen"]["window"])
        parts.append(f"cheapest within the SLOs: {setup} at {c['level']}, {_usd(c['value'])}")
    if base:
        b = min(base, key=lambda r: r["usd_base"])
        parts.append(f"baseline's cheapest: {_usd(b['usd_base'])} at {b['level']}")
    return "; ".join(parts)


def decide(
    rows: Sequence[Row],
    objective: tuple[str, str] | None,
    levels: Sequence[str],
    *,
    recs: Sequence[Mapping[str, Any]],
    cheaper: Callable[[Row], Any],
) -> dict[str, Any]:
    """The objective, its rule, and its recommendations (``recs``: the TPOT recommendations, for ``tpot``)."""
    pooled = [r for r in rows if r["prompt_class"] == "all"]
    slos = any(r.get("slo_spec") is not None or r.get("slo_base") is not None for r in pooled)
    name, pct = objective or (("cost", "p90") if slos else ("tpot", "p90"))
    why = "given" if objective else ("default: SLOs are set" if slos else "default: no percentile SLO is set")
    out: dict[str, Any] = {"name": name, "percentile": pct if name == "e2e" else None, "chosen_by": why,
                           "rule": RULES[name].replace("the percentile", pct), "slos": slos}  # fmt: skip
    if name == "tpot":
        out["recommendations"] = []
        for r in recs:
            text, note = _with_ttft(f"by TPOT p50 speedup: {r['text']}", r.get("chosen"))
            out["recommendations"].append({"level": r["level"], "scope": r["scope"], "text": text,
                                           "chosen": r.get("chosen") and {"draft": r["chosen"]["draft"],
                                                                          "window": r["chosen"]["window"]},
                                           "ineligible": [], "ttft_regression": note})  # fmt: skip
    elif name == "capacity":
        out["recommendations"] = _capacity(pooled, slos, cheaper)
    else:
        out["recommendations"] = _per_level(pooled, levels, slos, cheaper, name, pct)
        if name == "cost":
            out["overall"] = _overall_cost(out["recommendations"], pooled, slos)
    return out
