"""The capacity search's views: one table of rows shared by the terminal, Markdown and HTML (pure text)."""

from __future__ import annotations

import html
from pathlib import Path

from spectrn.run.capacity import Capacity, Estimate, Ratio
from spectrn.run.summary import interval_text


def _n(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _est(e: Estimate, digits: int = 1, prefix: str = "") -> str:
    if e.value is None:
        return "n/a"
    text = f"{prefix}{e.value:.{digits}f}"
    if e.ci95 is not None:
        text += interval_text(e.ci95, lambda x: f"{prefix}{x:.{digits}f}")
    return text


def _ratio(r: Ratio) -> str:
    if r.value is None:
        return "n/a"
    text = f"{r.value:.2f}x"
    if r.ci95 is not None:
        text += interval_text(r.ci95, lambda x: f"{x:.2f}")
    return text


def load_unit(c: Capacity) -> str:
    return "concurrent requests" if c.load_kind == "concurrency" else "req/s"


def _cap(c: Capacity, v: str) -> str:
    vc = c.variants[v]
    if vc.capacity is None:
        return f"below {c.start:g}"
    return f"{'>= ' if vc.reached_max else ''}{vc.capacity:g}"


def capacity_rows(c: Capacity) -> tuple[list[str], list[list[str]]]:
    """Header and rows: per variant, then speculative / baseline where both exist."""
    variants = list(c.variants)
    header = ["", *variants] + (["speculative / baseline"] if len(variants) == 2 else [])
    per_inst = 1.0 / c.price.instances_per_service
    rows = [
        [f"capacity ({load_unit(c)} per service)", *(_cap(c, v) for v in variants), _ratio(c.capacity_ratio)],
        [f"capacity per instance (x{per_inst:g})",
         *(_n(c.variants[v].capacity_per_instance, 1) for v in variants), ""],
        ["first failing load", *(_n(c.variants[v].first_fail, 3).rstrip("0").rstrip(".") if
                                 c.variants[v].first_fail is not None else "none" for v in variants), ""],
        ["output tok/s per instance at capacity",
         *(_est(c.variants[v].output_tokens_per_s_per_instance) for v in variants), _ratio(c.throughput_ratio)],
        ["$/M output tokens at capacity",
         *(_est(c.variants[v].usd_per_million_output_tokens, 2, "$") for v in variants), _ratio(c.cost_ratio)],
        ["TPOT p50 at capacity (ms)",
         *(_n(x * 1e3 if (x := c.variants[v].tpot_p50_s) is not None else None) for v in variants), ""],
        ["TTFT p50 at capacity (ms)",
         *(_n(x * 1e3 if (x := c.variants[v].ttft_p50_s) is not None else None) for v in variants), ""],
        ["probes", *(str(c.variants[v].probes) for v in variants), ""],
    ]  # fmt: skip
    if len(variants) != 2:
        rows = [r[:-1] for r in rows]
    return header, rows


def stops_paying_text(c: Capacity) -> str:
    sp = c.stops_paying
    if not sp.compared:
        return "speculation stops paying: not measured (no load was probed with both variants)"
    top = max(x.load for x in sp.compared)
    cost = (f"from {sp.cost_from:g} {load_unit(c)}" if sp.cost_from is not None
            else f"not within the searched range (up to {top:g})")  # fmt: skip
    tpot = f"from {sp.tpot_from:g}" if sp.tpot_from is not None else f"not within the searched range (up to {top:g})"
    return f"speculation stops paying: $/M {cost}; TPOT {tpot}"


def summary_lines(c: Capacity) -> list[str]:
    """The sentences under the table: SLOs, precision, requests rule, price and its source, notes."""
    return [
        f"SLOs: {', '.join(c.slos)}; search over {c.load_kind} from {c.start:g} (doubling, then bisection; "
        f"precision: {c.precision_rule}; maximum {c.maximum:g})",
        f"requests per probe: {c.requests_rule}",
        f"price: ${c.price.instance_hourly_usd:.2f}/h per {c.price.instance_type} ({c.price.source}), "
        f"one service uses {c.price.instances_per_service:g} of an instance",
        stops_paying_text(c),
        *([twin_text(c)] if c.twin is not None else []),
        *c.notes,
    ]


def twin_text(c: Capacity) -> str:
    """The twin's predicted capacity per window next to the measured one, where the window was measured."""
    assert c.twin is not None
    parts = []
    for key, cap in c.twin.windows.items():
        measured = None
        if key == "baseline":
            measured = c.variants.get("baseline")
        elif c.speculative_window is not None and key == f"k{c.speculative_window}":
            measured = c.variants.get("speculative")
        text = f"{key}: {'below the start' if cap is None else cap}"
        if measured is not None:
            text += f" (measured {'below the start' if measured.capacity is None else f'{measured.capacity:g}'})"
        parts.append(text)
    return f"twin {c.twin.twin} predicts capacity (concurrency): {'; '.join(parts)} ({c.twin.note})"


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("`", "'")


def capacity_markdown(c: Capacity) -> str:
    header, rows = capacity_rows(c)
    out = [f"## Capacity at the SLO: {_md(c.capacity_id)}", ""]
    out.append("| " + " | ".join(_md(h) for h in header) + " |")
    out.append("|" + "---|" * len(header))
    out += ["| " + " | ".join(_md(x) for x in r) + " |" for r in rows]
    out.append("")
    out += [f"- {_md(line)}" for line in summary_lines(c)]
    out += ["", "### Probes", "", "| load | phase | variant | verdict | run folder |", "|---|---|---|---|---|"]
    for p in c.probes:
        for v, vd in p.verdicts.items():
            verdict = "meets the SLOs" if vd.passed else "MISSES: " + "; ".join(vd.reasons)
            out.append(f"| {p.load:g} | {p.phase} | {_md(v)} | {_md(verdict)} | {_md(p.run_dir)} |")
    return "\n".join(out) + "\n"


def capacity_html(c: Capacity) -> str:
    """A self-contained page: every value from the run is escaped."""
    e = html.escape
    header, rows = capacity_rows(c)
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>" for r in rows)
    notes = "".join(f"<li>{e(line)}</li>" for line in summary_lines(c))
    probes = "".join(
        f"<tr><td>{p.load:g}</td><td>{e(p.phase)}</td><td>{e(v)}</td>"
        f"<td>{e('meets the SLOs' if vd.passed else 'MISSES: ' + '; '.join(vd.reasons))}</td>"
        f"<td><a href=\"{e(p.run_dir)}/summary.json\">{e(p.run_dir)}</a></td></tr>"
        for p in c.probes for v, vd in p.verdicts.items()
    )  # fmt: skip
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>spectrn capacity</title>'
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>"
        f'<section id="capacity"><h2>Capacity at the SLO: {e(c.capacity_id)}</h2>'
        f"<table><tr>{head}</tr>{body}</table><ul>{notes}</ul>"
        "<h3>Probes</h3><table><tr><th>load</th><th>phase</th><th>variant</th><th>verdict</th><th>run folder</th>"
        f"</tr>{probes}</table></section></body></html>\n"
    )


def write_capacity_report(folder: Path, c: Capacity) -> list[Path]:
    """``capacity.md`` and ``capacity.html`` next to ``capacity.json``."""
    from spectrn.paths import atomic_write_text

    md, page = folder / "capacity.md", folder / "capacity.html"
    atomic_write_text(md, capacity_markdown(c))
    atomic_write_text(page, capacity_html(c))
    return [md, page]
