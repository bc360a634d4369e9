"""sweep.json: the resumable record of a sweep's cells and their runs (the ``SweepManifest`` contract)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError, ConfigError
from spectrn.paths import atomic_write_text
from spectrn.run.json_doc import load_json
from spectrn.run.sweep_manifest import SweepCell, SweepManifest, SweepSettings, read_sweep_manifest
from spectrn.sweep.grid import Cell

MANIFEST = "sweep.json"


def read_manifest(sweep_dir: Path) -> SweepManifest:
    """``<sweep_dir>/sweep.json`` as a ``SweepManifest``; AnalysisError naming the problem otherwise."""
    path = sweep_dir / MANIFEST
    try:
        raw = load_json(path, error=AnalysisError)
    except FileNotFoundError:
        raise AnalysisError(f"{path} is missing", hint="pass a sweep folder written by `spectrn sweep`") from None
    except (OSError, ValueError) as e:
        raise AnalysisError(f"{path} is corrupt: {e}", hint="move it away to start the sweep afresh") from None
    return read_sweep_manifest(raw, str(path))


@dataclass
class Manifest:
    path: Path
    model: SweepManifest

    @classmethod
    def open(cls, sweep_dir: Path, sweep_id: str, settings: SweepSettings, fp: str, *, resume: bool) -> Manifest:
        path = sweep_dir / MANIFEST
        if path.exists():
            model = read_manifest(sweep_dir)
            if not resume:
                raise ConfigError(
                    f"sweep {sweep_id} already exists ({len(model.cells)} finished cell(s))",
                    hint="pass --resume to continue it, or choose another --sweep-id",
                )
            if model.fingerprint != fp:
                raise ConfigError(
                    f"sweep {sweep_id} was run with different settings (config fingerprint "
                    f"{model.fingerprint} vs now {fp}); its cells would not be comparable",
                    hint="resume with the same config and flags (only --drafts/--windows/--concurrency may change), "
                    "or start a new --sweep-id",
                )
            model.settings = settings
            return cls(path, model)
        m = cls(path, SweepManifest(sweep_id=sweep_id, created_at=time.time(), fingerprint=fp, settings=settings))
        m.save()
        return m

    def save(self) -> None:
        data = finite(self.model.model_dump(mode="json"))
        atomic_write_text(self.path, json.dumps(data, indent=2, allow_nan=False) + "\n")

    def done(self, cell: Cell) -> bool:
        return cell.key in self.model.cells

    def record(self, cell: Cell, entry: SweepCell) -> None:
        self.model.cells[cell.key] = entry
        self.save()

    def finished_cells(self) -> list[tuple[Cell, SweepCell]]:
        return [(Cell(e.draft, e.window, e.level), e) for e in self.model.cells.values()]


def finite(o: Any) -> Any:
    """Replace NaN/Inf (e.g. a ratio over an empty class) by None, recursively, for strict JSON."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [finite(v) for v in o]
    return o
