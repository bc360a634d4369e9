"""A run's per-level findings and its verdict: errors, incomplete levels, estimated tokens, window problems."""

from __future__ import annotations

from spectrn.analyze.acceptance import window_contradiction
from spectrn.analyze.settings import Settings
from spectrn.run.summary import Finding, LevelSummary, Provenance, Verdict

MIN_DECODE_EVENTS = 100  # fewer decode events per variant than this: timing is not a performance result
COALESCED_SHARE = 0.05  # more baseline events than this carrying several tokens: the server coalesces steps


def _level_findings(lv: str, out: LevelSummary, st: Settings, findings: list[Finding]) -> None:
    for v, vs in out.variants.items():
        rq = vs.requests
        if rq.error_rate > st.max_error_rate:
            findings.append(
                Finding(
                    code="error_rate",
                    severity="error",
                    level=lv,
                    message=f"{v} error rate {rq.error_rate:.1%} exceeds {st.max_error_rate:.0%} "
                    f"({rq.errors} failed: {rq.error_classes})",
                )
            )
        if rq.completed == 0:
            findings.append(
                Finding(code="no_success", severity="error", level=lv, message=f"{v} has no successful request")
            )
        if rq.planned is not None and rq.completed + rq.errors < rq.planned:
            findings.append(
                Finding(
                    code="incomplete",
                    severity="error",
                    level=lv,
                    message=f"{v} finished {rq.completed + rq.errors} of {rq.planned} planned requests (the run "
                    "stopped part-way)",
                )
            )
        if rq.planned is not None and rq.completed + rq.errors > rq.planned:
            findings.append(
                Finding(
                    code="duplicates",
                    severity="error",
                    level=lv,
                    message=f"{v} has {rq.completed + rq.errors} records for {rq.planned} planned requests (two runs "
                    "wrote into one folder?)",
                )
            )
        if vs.token_sources.get("text"):
            findings.append(
                Finding(
                    code="tokens_estimated",
                    severity="warning",
                    level=lv,
                    message=f"{v}: the server gave neither token ids nor cumulative usage for "
                    f"{vs.token_sources['text']} request(s): tokens per event were apportioned from text, so event "
                    "sizes (and stream acceptance) are estimates",
                )
            )
        acc = vs.acceptance
        if st.window is None and acc is not None and acc.stream is not None and acc.stream.steps:
            seen = len(acc.stream.per_position) + 1
            findings.append(
                Finding(
                    code="window_unknown",
                    severity="warning",
                    level=lv,
                    message=f"WINDOW UNKNOWN: {v}'s server did not say its speculation window and none was declared; "
                    f"its largest step carried {seen} tokens, so acceptance is read as observed (pass --draft and "
                    "--window to read it against the server's real window)",
                )
            )
        if acc is not None and acc.agreement and "DISAGREE" in acc.agreement:
            findings.append(
                Finding(code="acceptance_disagree", severity="warning", level=lv, message=f"{v}: {acc.agreement}")
            )
        if acc is not None and acc.stream is not None:
            problem = window_contradiction(acc.stream, st.window, st.semantics)
            if problem:
                findings.append(
                    Finding(code="window_mismatch", severity="warning", level=lv, message=f"WINDOW: {v}: {problem}")
                )


def _verdict(provenance: Provenance, levels: list[LevelSummary], findings: list[Finding]) -> Verdict:
    reasons: list[str] = []
    if provenance.runtime == "vllm-cpu":
        reasons.append("real vLLM on CPU with tiny models: a correctness check, not a Trainium performance result")
    for lv in levels:
        base = lv.variants.get("baseline")
        if base is not None:
            events = base.tokens_per_chunk_mean
            if events is not None and events > 1.0 + COALESCED_SHARE:
                reasons.append(
                    f"[{lv.label}] the baseline server delivers {events:.2f} tokens per event without speculation: "
                    "it coalesces steps, so event timing does not show engine steps"
                )
        for v, vs in lv.variants.items():
            decode_events = vs.chunk_latency_s.n
            if vs.requests.completed and decode_events < MIN_DECODE_EVENTS:
                reasons.append(f"[{lv.label}] {v}: only {decode_events} decode events (fewer than {MIN_DECODE_EVENTS})")
    if reasons:
        findings.append(
            Finding(
                code="not_performance", severity="warning", message="NOT A PERFORMANCE RESULT: " + "; ".join(reasons)
            )
        )
    clean = not any(f.severity == "error" for f in findings)
    return Verdict(clean=clean, performance=not reasons, reasons=reasons)
