"""Greedy-output equivalence: baseline and speculative outputs of the same request compared token by token."""

from __future__ import annotations

from typing import Any

from spectrn.analyze.accumulator import pair_key
from spectrn.run.records import RequestRecord
from spectrn.run.summary import Divergence, Equivalence

MAX_PENDING_OUTPUTS = 20_000  # outputs held while waiting for the other variant's same request
MAX_DIVERGENCES = 100


class OutputComparer:
    """Greedy outputs of baseline and speculative at the same (level, index), compared token by token.

    Holds an output only until the other variant's one arrives (a run's variants finish the same request
    close together), so memory stays bounded by the requests in flight. Counts are kept per load level: each
    level's equivalence is its own, so a divergence at one level is not reported at another."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, int], tuple[str, str, Any]] = {}
        self.compared: dict[str, int] = {}
        self.matched: dict[str, int] = {}
        self.text_levels: set[str] = set()  # levels where some pair was compared by text (no token ids)
        self.divergences: list[Divergence] = []

    def add(self, rec: RequestRecord) -> None:
        if not rec.ok or rec.variant not in ("baseline", "speculative"):
            return
        out: Any = rec.output_token_ids if rec.output_token_ids is not None else rec.output_text
        if out is None:
            return
        kind = "token_ids" if rec.output_token_ids is not None else "text"
        key = (rec.level, pair_key(rec))
        other = self.pending.get(key)
        if other is None or other[0] == rec.variant:
            if len(self.pending) < MAX_PENDING_OUTPUTS:
                self.pending[key] = (rec.variant, kind, out)
            return
        del self.pending[key]
        if other[1] != kind:  # one side has no token ids: compare texts only when both have them
            return
        if kind == "text":
            self.text_levels.add(rec.level)
        self.compared[rec.level] = self.compared.get(rec.level, 0) + 1
        a, b = list(other[2]), list(out)
        if a == b:
            self.matched[rec.level] = self.matched.get(rec.level, 0) + 1
            return
        if len(self.divergences) < MAX_DIVERGENCES:
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            self.divergences.append(
                Divergence(level=rec.level, index=rec.index, prompt_id=rec.prompt_id, first_divergence=first)
            )

    def result(self, level: str) -> Equivalence | None:
        divs = [d for d in self.divergences if d.level == level]
        compared, matched = self.compared.get(level, 0), self.matched.get(level, 0)
        return Equivalence(
            compared=compared,
            matched=matched,
            match_rate=matched / compared if compared else None,
            basis="text" if level in self.text_levels else "token_ids",
            divergences=divs,
        )
