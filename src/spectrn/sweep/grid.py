"""The sweep grid: cells (draft x window x load level), each cell's config and fingerprint, ids and time estimates."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.origins import Origins, format_validation_error, validation_hint
from spectrn.errors import ConfigError
from spectrn.labels import setup_label, stamped_id

SWEEP_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Cell:
    draft: str
    window: int
    level: str  # c4 (closed loop, concurrency 4) or r2 (Poisson, 2 req/s)

    @property
    def key(self) -> str:
        return f"{self.config_dir}@{self.level}"

    @property
    def config_dir(self) -> str:
        return setup_label(self.draft, self.window, sep="-")

    @property
    def load(self) -> tuple[str, float]:
        return ("rate", float(self.level[1:])) if self.level.startswith("r") else ("concurrency", int(self.level[1:]))


def level_label(kind: str, value: float) -> str:
    return f"r{value:g}" if kind == "rate" else f"c{int(value)}"


def levels_of(cfg: SpectrnConfig) -> list[str]:
    if cfg.bench.request_rate is not None:
        return [level_label("rate", r) for r in cfg.bench.request_rate]
    return [level_label("concurrency", c) for c in cfg.bench.concurrency]


def grid(drafts: Sequence[str], windows: Sequence[int], levels: Sequence[str]) -> list[Cell]:
    """Cells in run order: per (draft, window) all levels, so one speculative service serves them in a row."""
    return [Cell(d, w, lv) for d in drafts for w in windows for lv in levels]


def cell_config(base: SpectrnConfig, cell: Cell) -> SpectrnConfig:
    """The run spec of one cell: the sweep's spec with this draft, window and load level."""
    data = base.model_dump(mode="json")
    data["draft"] = cell.draft
    data["num_speculative_tokens"] = cell.window
    kind, value = cell.load
    if kind == "rate":
        data["bench"]["request_rate"] = [value]
    else:
        data["bench"]["request_rate"] = None
        data["bench"]["concurrency"] = [int(value)]
    try:
        return SpectrnConfig.model_validate(data)
    except ValidationError as e:
        # Only the grid's axes differ from the validated base spec: name them by their flags.
        origins = Origins()
        origins.record(("draft",), cell.draft, "flag --drafts")
        origins.record(("num_speculative_tokens",), cell.window, "flag --windows")
        msg = format_validation_error(e, origins)
        raise ConfigError(f"{msg} (sweep cell {cell.key})", hint=validation_hint(e, origins)) from None


def fingerprint(cfg: SpectrnConfig) -> str:
    """Hash of everything a resumed sweep must keep identical (all but the grid's own axes)."""
    data = cfg.model_dump(mode="json")
    for k in ("draft", "num_speculative_tokens"):
        del data[k]
    del data["bench"]["concurrency"], data["bench"]["request_rate"]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def parse_list(text: str | None, what: str, conv: Callable[[str], Any]) -> list[Any] | None:
    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(conv(part))
        except ValueError:
            raise ConfigError(f"{what} {text!r}: {part!r} is not valid", hint=f"e.g. {what} 5,7,10") from None
    if not out:
        raise ConfigError(f"{what} is empty", hint=f"give a comma-separated list, e.g. {what} 5,7")
    if len(set(out)) != len(out):
        raise ConfigError(f"{what} {text!r} lists a value twice", hint="list each value once")
    return out


def check_sweep_id(sweep_id: str) -> str:
    if not SWEEP_ID_RE.fullmatch(sweep_id) or ".." in sweep_id:
        raise ConfigError(
            f"--sweep-id {sweep_id!r} is not a safe folder name",
            hint="use letters, digits, '.', '_' and '-' only (at most 64 characters)",
        )
    return sweep_id


def new_sweep_id() -> str:
    return stamped_id(prefix="sweep-")


CELL_OVERHEAD_S = 4.0  # analysis, metrics scrapes and warm-up per cell, measured on the local simulator


def estimate_cell_s(cfg: SpectrnConfig, cell: Cell, tpot_s: float) -> float:
    """requests x max_tokens x TPOT, divided by how many requests the service decodes at once, plus the
    per-cell overhead (analysis, scrapes)."""
    b = cfg.bench
    n = b.requests + b.warmup
    kind, value = cell.load
    parallel = min(int(value), cfg.max_num_seqs) if kind == "concurrency" else cfg.max_num_seqs  # both >= 1
    decode = math.ceil(n / parallel) * b.max_tokens * tpot_s
    if kind == "rate":
        decode = max(decode, n / value + b.max_tokens * tpot_s)
    return decode + CELL_OVERHEAD_S
