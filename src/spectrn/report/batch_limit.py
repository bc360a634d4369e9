"""The load levels a run drove above the server's batch limit (``max_num_seqs``), said in words for every view."""

from __future__ import annotations

from spectrn.run.summary import Summary


def batch_limit_lines(summary: Summary, max_num_seqs: int | None) -> list[str]:
    """One line per closed-loop level whose streams outnumber ``max_num_seqs``: the extra requests wait in the
    server's queue, so TTFT and e2e there include queueing and throughput is capped by the batch, not the load."""
    if not max_num_seqs:
        return []
    out = []
    for lv in summary.levels:
        n = lv.load.concurrency
        if lv.load.kind == "closed" and n is not None and n > max_num_seqs:
            out.append(
                f"{lv.label} is above the batch limit (max_num_seqs {max_num_seqs}): {n} streams, at most "
                f"{max_num_seqs} decoded at once; the other {n - max_num_seqs} wait in the server's queue, so TTFT "
                "and e2e at this load include queueing and throughput is capped by the batch"
            )
    return out
