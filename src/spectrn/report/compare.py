"""Comparing two runs: configuration differences and speedups side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectrn.analyze.difference import differences, scoped
from spectrn.analyze.run import ensure_summary
from spectrn.intervals import interval_text
from spectrn.report.format import LATENCIES, SPEEDUPS, provenance_line, speedup_of, stat
from spectrn.run.folder import RunFolder
from spectrn.run.measured import config_as_run
from spectrn.run.summary import Speedup, Summary
from spectrn.sanitize import markdown, markdown_code

if TYPE_CHECKING:
    from rich.table import Table


def _provenance(s: Summary) -> dict[str, Any]:
    p = s.provenance
    out: dict[str, Any] = {
        "runtime": p.runtime,
        "server profile": p.profile,
        "time scale": p.time_scale,
        "load generator": p.engine,
        "load shape": p.load_shape,
        "performance result": s.verdict.performance,
    }
    for v, ident in sorted(p.servers.items()):
        out[f"{v} server"] = " ".join(str(x) for x in (ident.model, ident.version, ident.profile) if x) or None
    return out


def compare_runs(a: Path, b: Path) -> dict[str, Any]:
    """Compare run B against run A: provenance and configuration differences, p50s and speedups per class.

    ``ratio`` is B / A (for latencies < 1 means B is faster); ``differences`` gives B / A of TPOT p50,
    aggregate throughput and $/M per variant with a 95% bootstrap interval; ``speedups`` lists each run's own
    baseline-vs-speculative speedup side by side. Load levels present in both runs are compared level by
    level; without a common level, each run's first level is compared (``pairs`` says which). Runs of
    different runtimes, profiles or time scales are compared, but ``warnings`` says loudly that their
    numbers do not mean the same thing.
    """
    ra, rb = RunFolder.open(a), RunFolder.open(b)
    sa, sb = ensure_summary(ra), ensure_summary(rb)
    pa, pb = _provenance(sa), _provenance(sb)
    prov = {k: [pa.get(k), pb.get(k)] for k in dict.fromkeys([*pa, *pb]) if pa.get(k) != pb.get(k)}
    warnings = []
    for key in ("runtime", "server profile", "time scale", "load generator"):
        if key in prov:
            warnings.append(
                f"the runs differ in {key} ({prov[key][0]} vs {prov[key][1]}): their figures are not comparable "
                "as performance results; compare speedups within each run only"
            )
    # the configuration as each run ran it (runtime, time scale, the servers' draft and window), not as written
    fa, fb = config_as_run(ra.meta, sa.provenance), config_as_run(rb.meta, sb.provenance)
    diffs = {k: [fa.get(k), fb.get(k)] for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}
    la = {lv.label: lv for lv in sa.levels}
    lb = {lv.label: lv for lv in sb.levels}
    common = [lv for lv in la if lv in lb]
    pairs = [(lv, lv) for lv in common] or [(sa.levels[0].label, sb.levels[0].label)]
    rows: list[dict[str, Any]] = []
    speed: list[dict[str, Any]] = []
    metrics = [(k, label, scale, unit) for k, label, scale, unit, _ in LATENCIES]
    for level_a, level_b in pairs:
        view_a, view_b = dict(la[level_a].scopes()), dict(lb[level_b].scopes())
        level = level_a if level_a == level_b else f"{level_a} vs {level_b}"
        for cls in dict.fromkeys([*view_a, *view_b]):
            ca, cb = view_a.get(cls), view_b.get(cls)
            for variant in ("baseline", "speculative"):
                vsa = ca.variants.get(variant) if ca else None
                vsb = cb.variants.get(variant) if cb else None
                for key, label, scale, unit in [*metrics, ("tput", "tok/s per request", 1.0, "tok/s")]:
                    if key == "tput":
                        xa = vsa.output_tokens_per_s.per_request.p50 if vsa else None
                        xb = vsb.output_tokens_per_s.per_request.p50 if vsb else None
                    else:
                        xa, xb = stat(vsa, key), stat(vsb, key)
                    rows.append(
                        {
                            "level": level,
                            "prompt_class": cls,
                            "variant": variant,
                            "metric": f"{label} p50",
                            "unit": unit,
                            "a": xa * scale if xa is not None else None,
                            "b": xb * scale if xb is not None else None,
                            "ratio": (xb / xa) if xa and xb is not None else None,
                        }
                    )
            for key, label in SPEEDUPS:
                spa = speedup_of(ca.speedup if ca else None, key)
                spb = speedup_of(cb.speedup if cb else None, key)
                speed.append(
                    {"level": level, "prompt_class": cls, "metric": label,
                     "a": spa.value if spa else None, "a_ci95": list(spa.ci95) if spa and spa.ci95 else None,
                     "b": spb.value if spb else None, "b_ci95": list(spb.ci95) if spb and spb.ci95 else None}
                )  # fmt: skip
    # each run's requests resampled on its own: intervals on B / A (spectrn.analyze.difference)
    accs_a, accs_b = scoped(ra.records(), ra.meta), scoped(rb.records(), rb.meta)
    return {
        # each run's provenance in words: runtime, time scale (figures not in real time say so), load shape
        "a": {"run_id": sa.run_id, "config": sa.config_label, "clean": sa.clean, "provenance": provenance_line(sa)},
        "b": {"run_id": sb.run_id, "config": sb.config_label, "clean": sb.clean, "provenance": provenance_line(sb)},
        "provenance_differences": prov,
        "warnings": warnings,
        "pairs": [list(p) for p in pairs],
        "config_differences": diffs,
        "rows": rows,
        "speedups": speed,
        "differences": differences(sa, sb, accs_a, accs_b, pairs),
    }


def _sp(value: float | None, ci: list[float] | None) -> str:
    return Speedup(value=value, ci95=(ci[0], ci[1]) if ci else None).text()


def _ratio(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}x" + interval_text(ci, 3)


def differences_table(cmp: dict[str, Any]) -> Table:
    """B / A per (load, prompt class, variant): TPOT p50, aggregate throughput and $/M with 95% intervals."""
    from rich.table import Table
    from rich.text import Text

    a, b = cmp["a"], cmp["b"]
    t = Table(title=Text(f"B / A: B = {b['run_id']}  over  A = {a['run_id']} (95% CI, each run resampled)"))
    for col in ("load", "prompt class", "variant", "metric", "B / A [95% CI]"):
        t.add_column(col, justify="right" if col.startswith("B /") else "left", no_wrap=True)
    last = None
    for r in cmp["differences"]:
        key = (r["level"], r["prompt_class"], r["variant"])
        cells = [*(k if key != last else "" for k in key), r["metric"], _ratio(r["ratio"], r["ci95"])]
        t.add_row(*(Text(str(c)) for c in cells))
        last = key
    return t


def compare_table(cmp: dict[str, Any]) -> Table:
    from rich.table import Table
    from rich.text import Text

    a, b = cmp["a"], cmp["b"]
    t = Table(
        title=Text(f"speedups: A = {a['run_id']} ({a['config']})  vs  B = {b['run_id']} ({b['config']})"),
        caption=Text(f"A: {a['provenance']}\nB: {b['provenance']}"),
    )
    for col in ("load", "prompt class", "speedup of", "A [95% CI]", "B [95% CI]", "B - A"):
        t.add_column(col, justify="left" if col in ("load", "prompt class", "speedup of") else "right", no_wrap=True)
    last = None
    for r in cmp["speedups"]:
        diff = f"{r['b'] - r['a']:+.2f}" if r["a"] is not None and r["b"] is not None else "n/a"
        cells = [
            r["level"] if (r["level"], r["prompt_class"]) != last else "",
            r["prompt_class"] if (r["level"], r["prompt_class"]) != last else "",
            r["metric"],
            _sp(r["a"], r["a_ci95"]),
            _sp(r["b"], r["b_ci95"]),
            diff,
        ]
        t.add_row(*(Text(str(c)) for c in cells))
        last = (r["level"], r["prompt_class"])
    return t


def compare_markdown(cmp: dict[str, Any]) -> str:
    # text from servers and run files enters Markdown as code spans or escaped (spectrn.sanitize): a pull-request
    # comment must not carry images, links or HTML that a server chose
    code, md = markdown_code, markdown
    a, b = cmp["a"], cmp["b"]
    lines = [f"### spectrn: {code(b['run_id'])} ({code(b['config'])}) vs {code(a['run_id'])} ({code(a['config'])})", ""]
    lines += [
        f"- A {code(a['run_id'])}: {md(a['provenance'])}",
        f"- B {code(b['run_id'])}: {md(b['provenance'])}",
        "",
    ]
    lines += [f"**WARNING: {md(w)}**" for w in cmp["warnings"]]
    if cmp["provenance_differences"]:
        lines += ["", "Provenance differences (A → B):", ""]
        lines += [
            f"- {md(k)}: {code(json.dumps(v[0]))} → {code(json.dumps(v[1]))}"
            for k, v in cmp["provenance_differences"].items()
        ]
    lines += ["", "| load | prompt class | speedup of | A | B | B − A |", "|---|---|---|---|---|---|"]
    for r in cmp["speedups"]:
        diff = f"{r['b'] - r['a']:+.2f}" if r["a"] is not None and r["b"] is not None else "n/a"
        lines.append(
            f"| {md(r['level'])} | {md(r['prompt_class'])} | {r['metric']} | "
            f"{_sp(r['a'], r['a_ci95'])} | {_sp(r['b'], r['b_ci95'])} | {diff} |"
        )
    if cmp["differences"]:
        lines += ["", "B / A with 95% bootstrap intervals (each run's requests resampled on its own):", ""]
        lines += ["| load | prompt class | variant | metric | B / A [95% CI] |", "|---|---|---|---|---|"]
        for r in cmp["differences"]:
            lines.append(
                f"| {md(r['level'])} | {md(r['prompt_class'])} | {md(r['variant'])} | {r['metric']} | "
                f"{_ratio(r['ratio'], r['ci95'])} |"
            )
    diffs = cmp["config_differences"]
    if diffs:
        lines += ["", "Configuration differences (A → B):", ""]
        lines += [
            f"- {code(k)}: {code(json.dumps(v[0]))} → {code(json.dumps(v[1]))}" for k, v in list(diffs.items())[:30]
        ]
    for side in ("a", "b"):
        if not cmp[side]["clean"]:
            lines.append(f"\n**run {md(cmp[side]['run_id'])} is not clean**")
    return "\n".join(lines) + "\n"
