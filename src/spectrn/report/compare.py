"""Comparing two runs: configuration differences and speedups side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectrn.report.format import LATENCIES, SPEEDUPS, _get, _num, _speedup, fmt_speedup, level_views
from spectrn.report.html import run_summary
from spectrn.run.folder import RunData, load_run

if TYPE_CHECKING:
    from rich.table import Table


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    else:
        out[prefix.rstrip(".")] = d
    return out


def compare_runs(a: Path | RunData, b: Path | RunData) -> dict[str, Any]:
    """Compare run B against run A: configuration differences, p50s and speedups per class and variant.

    ``ratio`` is B / A (for latencies < 1 means B is faster); ``speedups`` lists each run's own
    baseline-vs-speculative speedup side by side. Load levels present in both runs are compared level by
    level; without a common level, each run's first level is compared (``pairs`` says which).
    """
    ra = a if isinstance(a, RunData) else load_run(Path(a))
    rb = b if isinstance(b, RunData) else load_run(Path(b))
    sa, sb = run_summary(ra), run_summary(rb)
    fa, fb = _flatten(ra.config), _flatten(rb.config)
    diffs = {k: [fa.get(k), fb.get(k)] for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}
    va_levels, vb_levels = dict(level_views(sa)), dict(level_views(sb))
    common = [lv for lv in va_levels if lv in vb_levels]
    pairs = [(lv, lv) for lv in common] or [(next(iter(va_levels)), next(iter(vb_levels)))]
    rows: list[dict[str, Any]] = []
    speed: list[dict[str, Any]] = []
    for level_a, level_b in pairs:
        view_a, view_b = va_levels[level_a], vb_levels[level_b]
        level = level_a if level_a == level_b else f"{level_a} vs {level_b}"
        classes = sorted(set(view_a.get("by_prompt_class") or {}) | set(view_b.get("by_prompt_class") or {}))
        for cls in ["all", *classes]:
            for variant in ("baseline", "speculative"):
                for key, label, scale, unit in [
                    *LATENCIES,
                    ("output_tokens_per_s.per_request", "tok/s per request", 1.0, "tok/s"),
                ]:
                    path = key.split(".")
                    where: tuple[str, ...] = (
                        ("variants", variant) if cls == "all" else ("by_prompt_class", cls, variant)
                    )
                    va = _num(_get(_get(view_a, *where, *path), "p50"))
                    vb = _num(_get(_get(view_b, *where, *path), "p50"))
                    rows.append(
                        {
                            "level": level,
                            "prompt_class": cls,
                            "variant": variant,
                            "metric": f"{label} p50",
                            "unit": unit,
                            "a": va * scale if va is not None else None,
                            "b": vb * scale if vb is not None else None,
                            "ratio": (vb / va) if va and vb is not None else None,
                        }
                    )
            for key, label in SPEEDUPS:
                sp_where: tuple[str, ...] = ("speedup",) if cls == "all" else ("speedup_by_prompt_class", cls)
                (xa, cia), (xb, cib) = _speedup(_get(view_a, *sp_where, key)), _speedup(_get(view_b, *sp_where, key))
                speed.append(
                    {"level": level, "prompt_class": cls, "metric": label, "a": xa, "a_ci95": cia, "b": xb,
                     "b_ci95": cib}
                )  # fmt: skip
    return {
        "a": {"run_id": ra.run_id, "config": ra.config_label, "clean": sa.get("clean", True)},
        "b": {"run_id": rb.run_id, "config": rb.config_label, "clean": sb.get("clean", True)},
        "pairs": [list(p) for p in pairs],
        "config_differences": diffs,
        "rows": rows,
        "speedups": speed,
    }


def compare_table(cmp: dict[str, Any]) -> Table:
    from rich.table import Table

    a, b = cmp["a"], cmp["b"]
    t = Table(title=f"speedups: A = {a['run_id']} ({a['config']})  vs  B = {b['run_id']} ({b['config']})")
    for col in ("load", "prompt class", "speedup of", "A [95% CI]", "B [95% CI]", "B - A"):
        t.add_column(col, justify="left" if col in ("load", "prompt class", "speedup of") else "right", no_wrap=True)
    last = None
    for r in cmp["speedups"]:
        diff = f"{r['b'] - r['a']:+.2f}" if r["a"] is not None and r["b"] is not None else "n/a"
        t.add_row(
            r["level"] if (r["level"], r["prompt_class"]) != last else "",
            r["prompt_class"] if (r["level"], r["prompt_class"]) != last else "",
            r["metric"],
            fmt_speedup({"value": r["a"], "ci95": r["a_ci95"]}),
            fmt_speedup({"value": r["b"], "ci95": r["b_ci95"]}),
            diff,
        )
        last = (r["level"], r["prompt_class"])
    return t


def compare_markdown(cmp: dict[str, Any]) -> str:
    a, b = cmp["a"], cmp["b"]
    lines = [
        f"### spectrn: `{b['run_id']}` ({b['config']}) vs `{a['run_id']}` ({a['config']})",
        "",
        "| load | prompt class | speedup of | A | B | B − A |",
        "|---|---|---|---|---|---|",
    ]
    for r in cmp["speedups"]:
        diff = f"{r['b'] - r['a']:+.2f}" if r["a"] is not None and r["b"] is not None else "n/a"
        lines.append(
            f"| {r['level']} | {r['prompt_class']} | {r['metric']} | "
            f"{fmt_speedup({'value': r['a'], 'ci95': r['a_ci95']})} | "
            f"{fmt_speedup({'value': r['b'], 'ci95': r['b_ci95']})} | {diff} |"
        )
    diffs = {k: v for k, v in cmp["config_differences"].items()}
    if diffs:
        lines += ["", "Configuration differences (A → B):", ""]
        lines += [f"- `{k}`: {json.dumps(v[0])} → {json.dumps(v[1])}" for k, v in list(diffs.items())[:30]]
    for side in ("a", "b"):
        if not cmp[side]["clean"]:
            lines.append(f"\n**run {cmp[side]['run_id']} is not clean**")
    return "\n".join(lines) + "\n"
