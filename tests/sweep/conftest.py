"""Fixtures for sweep tests: a fake cell runner that writes real run folders with known numbers."""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from spectrn import __version__
from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.errors import Interrupted
from spectrn.events import OnEvent
from spectrn.paths import atomic_write_text
from spectrn.run.records import RequestRecord, RunMeta, write_records
from spectrn.sweep.grid import Cell

BASE_STEP_S = 0.045


def true_speedup(cell: Cell, prompt_class: str) -> float:
    """The synthetic world: 1.7B beats 0.6B, window 7 is best on structured prompts, open prompts gain nothing."""
    if prompt_class == "open":
        return 1.0
    peak = 3.0 if cell.draft == "qwen3-1.7b" else 1.1
    return peak - 0.05 * abs(cell.window - 7)


def write_run(run_dir: Path, cfg: SpectrnConfig, cell: Cell, *, requests: int = 12, diverge_at: int | None = None,
              partial: bool = False) -> Path:  # fmt: skip
    """A run folder as the load generator writes it: run.json and requests.jsonl for both variants."""
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = RunMeta(run_id=run_dir.name, spectrn_version=__version__, started_at=time.time(), finished_at=time.time(),
                   config=cfg.model_dump(mode="json"), endpoints={"baseline": "x", "speculative": "y"})  # fmt: skip
    atomic_write_text(run_dir / "run.json", meta.model_dump_json())
    recs = []
    n_tokens = 21
    for i in range(requests):
        cls = "structured" if i % 2 == 0 else "open"
        jitter = 1.0 + 0.02 * (i % 3)
        ids = [i + j for j in range(n_tokens)]
        base_times = [0.03 + j * BASE_STEP_S * jitter for j in range(n_tokens)]
        recs.append(RequestRecord(variant="baseline", index=i, prompt_id=f"p{i}", prompt_class=cls, level=cell.level,
                                  sent_at=1000.0 + i, ttft=0.03, e2e=base_times[-1], chunk_times=base_times,
                                  chunk_tokens=[1] * n_tokens, output_token_ids=ids))  # fmt: skip
        per_chunk = 4 if cls == "structured" else 1
        gap = per_chunk * BASE_STEP_S * jitter / true_speedup(cell, cls)
        chunks = [1] + [per_chunk] * (20 // per_chunk)
        times = [0.03 + j * gap for j in range(len(chunks))]
        spec_ids = list(ids)
        if diverge_at is not None and i == 0:
            spec_ids[diverge_at] += 1
        recs.append(RequestRecord(variant="speculative", index=i, prompt_id=f"p{i}", prompt_class=cls,
                                  level=cell.level, sent_at=1000.0 + i, ttft=0.03, e2e=times[-1], chunk_times=times,
                                  chunk_tokens=chunks, output_token_ids=spec_ids))  # fmt: skip
        if partial and i == requests // 2:
            break
    write_records(run_dir / "requests.jsonl", recs)
    return run_dir


class FakeRunner:
    """A CellRunner that fabricates each cell's run folder; optionally dies on the n-th cell it runs."""

    where = "fake runtime"

    def __init__(self, *, fail_on: int | None = None, diverge: set[str] | None = None) -> None:
        self.fail_on = fail_on
        self.diverge = diverge or set()
        self.calls: list[str] = []
        self.entered = 0

    def __enter__(self) -> FakeRunner:
        self.entered += 1
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def run_id(self, cell: Cell) -> str:
        return cell.level

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, on_event: OnEvent | None, quiet: bool) -> Path:
        self.calls.append(cell.key)
        assert (cfg.draft, cfg.num_speculative_tokens) == (cell.draft, cell.window)
        run_dir = out_root / self.run_id(cell)
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            write_run(run_dir, cfg, cell, partial=True)  # half a run on disk, then the user pressed Ctrl-C
            raise Interrupted("stopped by the user")
        return write_run(run_dir, cfg, cell, diverge_at=5 if cell.key in self.diverge else None)

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        return 0.01


@pytest.fixture
def sweep_cfg() -> SpectrnConfig:
    return build_config({"runtime": "sim", "bench": {"requests": 12, "max_tokens": 21, "concurrency": [4],
                                                      "prompts": "all"}}, environ={})  # fmt: skip


@pytest.fixture
def quiet_console() -> OnEvent | None:
    """Nobody watching: the sweep's events go nowhere."""
    return None


def load(path: Path) -> Any:
    import json

    return json.loads(path.read_text(encoding="utf-8"))
