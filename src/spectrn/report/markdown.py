"""summary.md: the run's comparison as Markdown (for a pull request or a wiki)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spectrn.report.format import _fmt, _get, _num, _speedup, fmt_speedup, level_views
from spectrn.run.folder import config_section

if TYPE_CHECKING:
    pass


def summary_markdown(summary: dict[str, Any], config: dict[str, Any] | None = None) -> str:
    """A pull-request comment: verdict, config line, per-class table, acceptance, warnings."""
    cfg = config or {}
    lines = [f"### spectrn run `{summary.get('run_id', '?')}`", ""]
    if cfg:
        bench = config_section(cfg, "bench")
        lines.append(
            f"target `{cfg.get('target')}`, draft `{cfg.get('draft')}`, window {cfg.get('num_speculative_tokens')}, "
            f"mode {cfg.get('speculation_mode')}, {cfg.get('instance_type')} TP{cfg.get('tensor_parallel_size')}, "
            f"prompts {bench.get('prompts')}, max_tokens {bench.get('max_tokens')}, "
            f"temperature {bench.get('temperature')}"
        )
        lines.append("")
    verdict = "clean run" if summary.get("clean", True) else "**NOT A CLEAN RUN**"
    value, ci = _speedup(_get(summary, "speedup", "tpot_p50"))
    if value is not None:
        sig = ""
        if ci:
            sig = " (significant)" if ci[0] > 1 or ci[1] < 1 else " (not significant: the CI includes 1.0)"
        lines.append(f"**TPOT p50 speedup {fmt_speedup(_get(summary, 'speedup', 'tpot_p50'))}**{sig}; {verdict}")
    else:
        lines.append(verdict)
    lines.append("")
    for level, view in level_views(summary):
        if len(level_views(summary)) > 1:
            lines += [f"#### load {level}", ""]
        lines += [
            "| prompt class | TPOT p50 ms (base → spec) | speedup | ITL p50 ms | speedup | e2e p50 s | speedup "
            "| tok/s/req p50 | speedup |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        groups = [("all", view.get("variants") or {}, view.get("speedup") or {})]
        for cls, per in sorted((view.get("by_prompt_class") or {}).items()):
            groups.append((cls, per, (view.get("speedup_by_prompt_class") or {}).get(cls) or {}))
        for cls, per, sp in groups:
            cells = [cls]
            for key, spk, scale, digits in (
                (("tpot_s", "p50"), "tpot_p50", 1e3, 1),
                (("itl_s", "p50"), "itl_p50", 1e3, 1),
                (("e2e_s", "p50"), "e2e_p50", 1.0, 2),
                (("output_tokens_per_s", "per_request", "p50"), "throughput", 1.0, 1),
            ):
                b = _fmt(_get(per, "baseline", *key), scale, digits)
                s = _fmt(_get(per, "speculative", *key), scale, digits)
                cells += [f"{b} → {s}", fmt_speedup(sp.get(spk))]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        acc = _get(view, "variants", "speculative", "acceptance")
        if isinstance(acc, dict) and _num(acc.get("rate")) is not None:
            length = _num(acc.get("mean_accepted_length"))
            lines.append(
                f"acceptance rate {100 * acc['rate']:.1f} %"
                + (f", mean acceptance length {length:.2f}" if length is not None else "")
            )
        else:
            tpc = _num(_get(view, "variants", "speculative", "tokens_per_chunk_mean"))
            lines.append(
                "acceptance: not reported by the server"
                + (f" (tokens per decode chunk {tpc:.2f})" if tpc is not None else "")
            )
        cost = view.get("cost") or {}
        cb = _num(_get(cost, "baseline", "usd_per_million_output_tokens"))
        cs = _num(_get(cost, "speculative", "usd_per_million_output_tokens"))
        if cb is not None and cs is not None:
            lines.append(f"cost per million output tokens: ${cb:.2f} → ${cs:.2f}")
        lines.append("")
    warnings = summary.get("warnings") or []
    if warnings:
        lines.append("**Warnings**")
        lines += [f"- {w}" for w in warnings]
        lines.append("")
    lines.append(
        "_TPOT = (e2e − TTFT)/(tokens − 1); per-token ITL splits multi-token chunks; speedup = baseline / "
        "speculative (throughput: speculative / baseline); 95 % bootstrap CIs._"
    )
    return "\n".join(lines) + "\n"
