"""summary.md: the run's comparison as Markdown (for a pull request or a wiki)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectrn.report.format import (
    GOODPUT_DEFINITION,
    class_scopes,
    correctness_lines,
    headline_lines,
    models_shown,
    not_performance_banner,
    num,
    output_lengths_text,
    provenance_line,
    slo_table,
    speedup_of,
    speedup_text,
    stat,
    usd,
    verdict_line,
)
from spectrn.run.summary import Summary

if TYPE_CHECKING:
    from spectrn.spec.config import SpectrnConfig

COLUMNS = (  # (VariantSummary field, which, Speedups field, scale, digits)
    ("tpot_s", "p50", "tpot_p50", 1e3, 1),
    ("itl_s", "p50", "itl_p50", 1e3, 1),
    ("e2e_s", "p50", "e2e_p50", 1.0, 2),
)


def _md(text: str) -> str:
    """Text from the run (prompt classes, server messages) as Markdown data: no table breaks, no markup."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("`", "'")


def summary_markdown(summary: Summary, config: SpectrnConfig | None = None, *, ignore_eos: bool | None = None) -> str:
    """A pull-request comment: provenance, verdict, per-class headline, table, acceptance, cost, warnings."""
    s = summary
    lines = [f"### spectrn run `{s.run_id}`", ""]
    if config is not None:
        c = config
        target, draft = models_shown(s, c.target, c.draft)
        lines.append(
            f"target `{target}`, draft `{draft}`, window {c.num_speculative_tokens}, mode {c.speculation_mode}, "
            f"{c.instance_type} TP{c.tensor_parallel_size}, prompts {c.bench.prompts}, max_tokens "
            f"{c.bench.max_tokens}, temperature {c.bench.temperature}"
            + (f", output lengths {output_lengths_text(ignore_eos)}" if ignore_eos is not None else "")
        )
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
        lines += [
            "| prompt class | TPOT p50 ms (base → spec) | speedup | ITL p50 ms | speedup | e2e p50 s | speedup "
            "| tok/s/req p50 | speedup | acceptance (tokens/step) | $/M tokens (base → spec) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for cls, cs in class_scopes(lv):
            b, sp_v = cs.variants.get("baseline"), cs.variants.get("speculative")
            cells = [_md("all (pooled)" if cls == "all" else cls)]
            for field, which, key, scale, digits in COLUMNS:
                cells += [
                    f"{num(stat(b, field, which), scale, digits)} → {num(stat(sp_v, field, which), scale, digits)}",
                    speedup_text(speedup_of(cs.speedup, key)),
                ]
            bt = b.output_tokens_per_s.per_request.p50 if b else None
            st = sp_v.output_tokens_per_s.per_request.p50 if sp_v else None
            cells += [f"{num(bt)} → {num(st)}", speedup_text(speedup_of(cs.speedup, "throughput"))]
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
