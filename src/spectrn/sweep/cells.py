"""Per-cell facts read back from the cells' run folders: their summaries and output equivalence."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError
from spectrn.run.folder import RunFolder
from spectrn.sweep.manifest import Manifest
from spectrn.sweep.recommend import CellInput


def cell_inputs(sweep_dir: Path, manifest: Manifest) -> list[CellInput]:
    out = []
    for cell, entry in manifest.finished_cells():
        try:
            summary = RunFolder.open(sweep_dir / entry.run_dir).require_summary()
        except AnalysisError as e:
            raise AnalysisError(
                f"cell {cell.key}: {e.message}",
                hint=f"remove the cell from {manifest.path} and resume the sweep to re-run it",
            ) from None
        out.append(CellInput(cell.draft, cell.window, cell.level, summary))
    return out


def aggregate_equivalence(cells: Sequence[CellInput]) -> dict[str, Any]:
    """Greedy output equivalence over every cell: match rate, and each divergence with its first token."""
    compared = matched = 0
    divergent: list[dict[str, Any]] = []
    for c in cells:
        eq = c.view.equivalence
        if eq is None:
            continue
        compared += eq.compared
        matched += eq.matched
        for d in eq.divergences:
            divergent.append({"draft": c.draft, "window": c.window, **d.model_dump()})
    return {
        "compared": compared,
        "matched": matched,
        "match_rate": matched / compared if compared else None,
        "divergences": divergent,
    }
