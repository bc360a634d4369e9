"""An interval whose bounds print alike is not shown as if precise ("89.3 [89.3, 89.3]"): every output says why
it has no spread instead (one sample or one repeat, or samples all alike)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from doubles.runfactory import make_records, make_run
from spectrn.intervals import NO_SPREAD

Run = Callable[..., tuple[int, str, str]]
SAME_BOUNDS = re.compile(r"\[\$?(\d+\.\d+), \$?\1\]")  # "[89.3, 89.3]", "[$1.20, $1.20]"


def test_identical_requests_show_no_spread_instead_of_a_zero_width_interval(cli: Run, tmp_path: Path) -> None:
    recs = make_records(per_class=5, classes=("structured",), errors=0)
    first = {r.variant: r for r in reversed(recs)}
    # every request of a variant timed exactly like its first one: each resample gives the same rates and ratios
    for r in recs:
        f = first[r.variant]
        r.ttft, r.e2e, r.chunk_times, r.chunk_tokens = f.ttft, f.e2e, list(f.chunk_times), list(f.chunk_tokens)
    run = make_run(tmp_path, "same", records=recs, summary=False)
    code, out, err = cli("analyze", str(run))
    assert code == 0, err
    shown = {
        "terminal": out + err,
        "summary.md": (run / "report" / "summary.md").read_text(),
        "index.html": (run / "report" / "index.html").read_text(),
    }
    for where, text in shown.items():
        flat = " ".join(text.split())
        assert not SAME_BOUNDS.search(flat), (where, SAME_BOUNDS.search(flat))
    assert NO_SPREAD in " ".join(shown["index.html"].split())  # the aggregate tok/s and $/M cells
    assert "no spread" in " ".join(shown["terminal"].split())  # the speedups of identical pairs
