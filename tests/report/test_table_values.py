"""The terminal comparison table checked cell by cell for its values, each computed here from the records
(medians by definition, the table's units and digits), not only for the presence of its rows and columns."""

from __future__ import annotations

import statistics
import time

import pytest

from doubles import oracle
from doubles.runfactory import make_run
from spectrn.analyze.run import ensure_summary
from spectrn.report.tables import render_table
from spectrn.run.folder import RunFolder


@pytest.fixture(scope="module")
def table_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunFolder, list[list[str]]]:
    run = RunFolder.open(make_run(tmp_path_factory.mktemp("runs"), per_class=7, start=time.time() - 3600))
    table = render_table(ensure_summary(run))
    columns = [[str(c) for c in col._cells] for col in table.columns]
    return run, [list(r) for r in zip(*columns, strict=True)]


def _expected(run: RunFolder, cls: str | None) -> dict[str, tuple[str, str]]:
    """metric label -> (baseline cell, speculative cell) from the records: p50 = the median of the per-request
    values over the completed requests of the class (None: every class)."""
    out: dict[str, list[str]] = {}
    for variant in ("baseline", "speculative"):
        ok = [r for r in run.records() if r.ok and r.variant == variant and (cls is None or r.prompt_class == cls)]
        cells = {
            "TTFT ms": f"{statistics.median(r.ttft for r in ok) * 1e3:.1f}",  # type: ignore[misc]
            "TPOT ms": f"{statistics.median(oracle.tpot(r) for r in ok) * 1e3:.1f}",  # type: ignore[misc]
            "e2e s": f"{statistics.median(r.e2e for r in ok):.2f}",  # type: ignore[misc]
            "tok/s/req": f"{statistics.median(oracle.throughput(r) for r in ok):.1f}",
        }
        for k, v in cells.items():
            out.setdefault(k, []).append(v)
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.parametrize(("label", "cls"), [("all (pooled)", None), ("open", "open"), ("structured", "structured")])
def test_every_latency_and_throughput_cell_has_the_records_value(
    table_rows: tuple[RunFolder, list[list[str]]], label: str, cls: str | None
) -> None:
    run, rows = table_rows
    start = next(i for i, r in enumerate(rows) if r[0] == label)
    end = next((i for i in range(start + 1, len(rows)) if rows[i][0]), len(rows))
    got = {r[1]: (r[2], r[3]) for r in rows[start:end]}
    expected = _expected(run, cls)
    for metric, cells in expected.items():
        assert got[metric] == cells, (label, metric, got[metric], cells)
