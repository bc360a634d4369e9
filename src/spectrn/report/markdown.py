"""summary.md: the run's comparison as Markdown (for a pull request or a wiki)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectrn.analyze.metric_table import displayed
from spectrn.labels import class_label
from spectrn.report.format import (
    GOODPUT_DEFINITION,
    class_scopes,
    correctness_lines,
    headline_lines,
    metric_speedup,
    metric_text,
    models_shown,
    not_performance_banner,
    output_lengths_text,
    price_line,
    provenance_line,
    slo_table,
    usd,
    verdict_line,
)
from spectrn.run.measured import measured, scheduling_text
from spectrn.run.summary import Summary

if TYPE_CHECKING:
    from spectrn.configuration.config import SpectrnConfig


def _md(text: str) -> str:
    """Text from the run (prompt classes, server messages) as Markdown data: no table breaks, no markup."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("`", "'")


def _origin(source: str) -> str:
    """`` (from the server)`` after a value the server gave; nothing after the config's own."""
    return {"server": " (from the server)", "unknown": " (the server did not say)"}.get(source, "")


def summary_markdown(summary: Summary, config: SpectrnConfig | None = None, *, ignore_eos: bool | None = None) -> str:
    """A pull-request comment: provenance, verdict, per-class headline, table, acceptance, cost, warnings."""
    s = summary
    lines = [f"### spectrn run `{s.run_id}`", ""]
    if config is not None:
        c = config
        ran = measured(c, s.provenance)  # the servers' own draft and window where spectrn learnt them
        target, draft = models_shown(s, c.target, ran.draft or "unknown")
        window = ran.window if ran.window is not None else "unknown"
        lines.append(
            f"target `{target}`, draft `{draft}`{_origin(ran.draft_from)}, window {window}{_origin(ran.window_from)}, "
            f"mode {c.speculation_mode}, "
            f"{c.instance_type} TP{c.tensor_parallel_size}, prompts {c.bench.prompts}, max_tokens "
            f"{c.bench.max_tokens}, temperature {c.bench.temperature}"
            + (f", output lengths {output_lengths_text(ignore_eos)}" if ignore_eos is not None else "")
        )
        scheduling = scheduling_text(s.provenance)
        if scheduling:
            lines.append(f"scheduling: {_md(scheduling)}")
    if not s.verdict.performance:
        lines += [f"**{_md(not_performance_banner(s))}**", ""]
    lines += [provenance_line(s), "", f"**{verdict_line(s)}**", ""]
    if s.verdict.performance:
        lines += [f"- {_md(h)}" for h in headline_lines(s)]
    else:
        lines += ["Correctness (the timings below are not performance figures):", ""]
        lines += [f"- {_md(c)}" for c in correctness_lines(s)]
    lines.append("")
    for lv in s.levels:
        if len(s.levels) > 1:
            lines += [f"#### load {lv.label}", ""]
        # two columns per metric the metric table shows in Markdown: p50 (base → spec) and the speedup
        shown = [m for m in displayed("markdown") if m.display is not None]
        heads = [f"{m.display.short_header('p50')}{' (base → spec)' if i == 0 else ''} | speedup"
                 for i, m in enumerate(shown) if m.display is not None]  # fmt: skip
        lines += [
            "| prompt class | " + " | ".join(heads) + " | acceptance (tokens/step) | $/M tokens (base → spec) |",
            "|---|" + "---|---|" * len(shown) + "---|---|",
        ]
        for cls, cs in class_scopes(lv):
            b, sp_v = cs.variants.get("baseline"), cs.variants.get("speculative")
            cells = [_md(class_label(cls))]
            for m in shown:
                cells += [f"{metric_text(b, m)} → {metric_text(sp_v, m)}", metric_speedup(cs.speedup, m)]
            acc = sp_v.acceptance if sp_v else None
            if acc is not None and acc.mean_accepted_length is not None:
                cells.append(f"{acc.mean_accepted_length:.2f} ({acc.source})")
            else:
                cells.append("not reported")
            bc = b.cost.usd_per_million_output_tokens if b and b.cost else None
            sc = sp_v.cost.usd_per_million_output_tokens if sp_v and sp_v.cost else None
            cells.append(f"{usd(bc)} → {usd(sc)}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        slos = slo_table(lv)
        if slos is not None:
            header, rows = slos
            lines += [
                "**SLOs and goodput**",
                "",
                "| " + " | ".join(_md(h) for h in header) + " |",
                "|" + "---|" * len(header),
                *("| " + " | ".join(_md(c) for c in row) + " |" for row in rows),
                "",
                f"_{_md(GOODPUT_DEFINITION)}._",
                "",
            ]
        price = price_line(s)
        if price is not None:
            lines += [_md(price), ""]
        spec = lv.variants.get("speculative")
        acc = spec.acceptance if spec else None
        if acc is not None and acc.agreement:
            lines += [f"acceptance: {acc.agreement}", ""]
    warnings = s.warnings()
    if warnings:
        lines.append("**Warnings**")
        lines += [f"- {_md(w)}" for w in warnings]
        lines.append("")
    lines.append(
        "_TPOT = (e2e − TTFT)/(tokens − 1); per-token ITL splits multi-token chunks; speedup = baseline / "
        "speculative (throughput: speculative / baseline); 95 % bootstrap CIs; 'all (pooled)' mixes prompt "
        "classes and is not a headline._"
    )
    return "\n".join(lines) + "\n"
