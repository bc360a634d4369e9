"""sweep.json: the resumable record of a sweep's cells and their runs."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError, ConfigError
from spectrn.paths import atomic_write_text
from spectrn.sweep.grid import Cell

MANIFEST = "sweep.json"


MANIFEST_VERSION = 1


@dataclass
class Manifest:
    path: Path
    data: dict[str, Any]

    @classmethod
    def open(cls, sweep_dir: Path, sweep_id: str, settings: dict[str, Any], fp: str, *, resume: bool) -> Manifest:
        path = sweep_dir / MANIFEST
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as e:
                raise AnalysisError(f"{path} is corrupt: {e}", hint="move it away to start the sweep afresh") from None
            if not resume:
                raise ConfigError(
                    f"sweep {sweep_id} already exists ({len(data.get('cells', {}))} finished cell(s))",
                    hint="pass --resume to continue it, or choose another --sweep-id",
                )
            if data.get("fingerprint") != fp:
                raise ConfigError(
                    f"sweep {sweep_id} was run with different settings (config fingerprint "
                    f"{data.get('fingerprint')} vs now {fp}); its cells would not be comparable",
                    hint="resume with the same config and flags (only --drafts/--windows/--concurrency may change), "
                    "or start a new --sweep-id",
                )
            data["settings"] = settings
            return cls(path, data)
        data = {
            "version": MANIFEST_VERSION,
            "sweep_id": sweep_id,
            "created_at": time.time(),
            "fingerprint": fp,
            "settings": settings,
            "cells": {},
        }
        m = cls(path, data)
        m.save()
        return m

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps(finite(self.data), indent=2, allow_nan=False))

    def done(self, cell: Cell) -> bool:
        return cell.key in self.data["cells"]

    def record(self, cell: Cell, entry: dict[str, Any]) -> None:
        self.data["cells"][cell.key] = entry
        self.save()

    def finished_cells(self) -> list[tuple[Cell, dict[str, Any]]]:
        out = []
        for entry in self.data["cells"].values():
            out.append((Cell(entry["draft"], int(entry["window"]), entry["level"]), entry))
        return out


def finite(o: Any) -> Any:
    """Replace NaN/Inf (e.g. a ratio over an empty class) by None, recursively, for strict JSON."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [finite(v) for v in o]
    return o
