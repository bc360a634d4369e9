"""The one spelling of ids, time stamps, labels and intervals (spectrn.labels, spectrn.intervals), against
hand-written expectations, and a check that no other module spells them itself."""

from __future__ import annotations

import calendar
import re
from pathlib import Path

from spectrn.intervals import interval_text, with_interval
from spectrn.labels import (
    class_label,
    id_part,
    iso_utc,
    run_id,
    series_label,
    setup_label,
    stamped_id,
    utc_stamp,
    utc_text,
    window_label,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "spectrn"
# 2026-12-02 04:21:09 UTC, from its calendar fields (not from the code under test)
TS = float(calendar.timegm((2026, 12, 2, 4, 21, 9, 0, 0, 0)))


def test_time_stamps_are_utc_in_each_shape() -> None:
    assert utc_stamp(TS) == "20261202-042109"
    assert iso_utc(TS) == "2026-12-02T04:21:09Z"
    assert iso_utc(TS, millis=True) == "2026-12-02T04:21:09.000Z"
    assert utc_text(TS) == "2026-12-02 04:21:09"
    assert re.fullmatch(r"\d{8}-\d{6}", utc_stamp())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", iso_utc())


def test_ids_and_labels() -> None:
    assert run_id("qwen2.5-0.5b", 4, ts=TS) == "20261202-042109-qwen2p5-0p5b-k4"
    assert run_id("medusa", 3, prefix="demo-", ts=TS) == "demo-20261202-042109-medusa-k3"
    assert stamped_id(prefix="sweep-", ts=TS) == "sweep-20261202-042109"
    assert stamped_id("byo", ts=TS) == "20261202-042109-byo"
    assert id_part("a.b.c") == "apbpc"
    assert window_label(5) == "k5" and window_label(None) == "k?"
    assert setup_label("qwen3-1.7b", 4) == "qwen3-1.7b k4"
    assert setup_label(None, None, sep="/") == "unknown/k?"
    assert class_label("all") == "all (pooled)" and class_label("structured") == "structured"
    assert series_label("d/k4", "speculative", multi=True) == "d/k4 speculative"
    assert series_label("d/k4", "speculative", multi=False) == "speculative"


def test_intervals() -> None:
    assert interval_text((2.964, 3.115)) == " [2.96, 3.12]"
    assert interval_text(None) == ""
    assert interval_text((0.0121, 0.0134), 1, scale=1000.0) == " [12.1, 13.4]"
    assert interval_text((1.5, 2.25), prefix="$") == " [$1.50, $2.25]"
    assert interval_text((3.0, 7.0), 0, lead="") == "[3, 7]"
    assert interval_text((float("nan"), 2.0)) == " [n/a, 2.00]"
    assert with_interval(2.5, (2.0, 3.0), suffix="x") == "2.50x [2.00, 3.00]"
    assert with_interval(None, (2.0, 3.0)) == "n/a"


def test_no_module_spells_ids_stamps_or_intervals_itself() -> None:
    """A second spelling drifts from the first: every id, stamp, window label and interval goes through the two
    modules. (deploy/compile.py's stamp is inside a script that runs in a pod, where spectrn is not installed.)"""
    patterns = {
        "time stamp": re.compile(r"strftime\("),
        "window label": re.compile(r"""f["'][^"']*\bk\{"""),
        "pooled label": re.compile(r"""["']all \(pooled\)["'] if"""),
        "interval": re.compile(r"""\[\{[^}]*\[0\][^}]*\}, \{[^}]*\[1\]"""),
    }
    allowed = {"labels.py", "intervals.py", "deploy/compile.py"}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        if rel in allowed:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{rel}:{n}: {what}" for what, rx in patterns.items() if rx.search(line)]
    assert found == []
