"""Per-cell facts read back from the cells' run folders: acceptance, summaries, equivalence."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError
from spectrn.sweep.manifest import Manifest
from spectrn.sweep.recommend import ALL, CellInput


def cell_acceptance(run_dir: Path, window: int) -> dict[str, dict[str, Any]]:
    """Per prompt class (and ``all``): per-position acceptance from the speculative variant's chunk sizes."""
    from spectrn.run.records import iter_records
    from spectrn.sweep.predict import per_position_from_chunks

    by_cls: dict[str, list[list[int]]] = {}
    for r in iter_records(run_dir / "requests.jsonl"):
        if r.variant != "speculative" or r.warmup or not r.ok or r.token_source != "token_ids":
            continue
        by_cls.setdefault(r.prompt_class, []).append(list(r.chunk_tokens))
    out: dict[str, dict[str, Any]] = {}
    everything = [t for ts in by_cls.values() for t in ts]
    for cls, chunks in [*sorted(by_cls.items()), (ALL, everything)]:
        ca = per_position_from_chunks(chunks, window)
        out[cls] = {"per_position": ca.per_position, "steps": ca.steps, "mean_length": ca.mean_length,
                    "source": "client chunk sizes"}  # fmt: skip
    return out


def _level_view(summary: dict[str, Any], level: str) -> dict[str, Any]:
    if "levels" in summary and level in summary["levels"]:
        return dict(summary["levels"][level])
    return summary


def cell_inputs(sweep_dir: Path, manifest: Manifest) -> list[CellInput]:
    out = []
    for cell, entry in manifest.finished_cells():
        path = sweep_dir / entry["run_dir"] / "summary.json"
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise AnalysisError(
                f"cell {cell.key}: {path} is unreadable ({e})",
                hint=f"remove the cell from {manifest.path} and resume the sweep to re-run it",
            ) from None
        out.append(CellInput(cell.draft, cell.window, cell.level, summary, entry.get("acceptance_by_class") or {}))
    return out


def aggregate_equivalence(cells: Sequence[CellInput]) -> dict[str, Any]:
    """Greedy output equivalence over every cell: match rate, and each divergence with its first token."""
    compared = matched = 0
    divergent: list[dict[str, Any]] = []
    for c in cells:
        eq = _level_view(c.summary, c.level).get("equivalence") or {}
        compared += int(eq.get("compared") or 0)
        matched += int(eq.get("matched") or 0)
        for d in eq.get("divergences") or []:
            divergent.append({"draft": c.draft, "window": c.window, "level": c.level, **d})
    return {
        "compared": compared,
        "matched": matched,
        "match_rate": matched / compared if compared else None,
        "divergences": divergent,
    }
