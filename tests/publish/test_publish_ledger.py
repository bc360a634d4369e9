"""publish.json is a typed contract: what a publish writes validates against docs/schemas/publish.schema.json, and
a ledger of the untyped layout (tests/fixtures/publish/) is read and resumed from."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from contract import assert_valid
from doubles.cwfakes import FakeSink
from doubles.runfactory import make_run
from spectrn.errors import PublishError
from spectrn.publish import publisher
from spectrn.run.folder import RunFolder
from spectrn.run.publish_ledger import LEDGER_SCHEMA_VERSION, read_publish_ledger

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "publish" / "schema1" / "publish.json"


def test_a_publish_writes_a_ledger_that_validates(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=4, start=time.time() - 3600, summary=False)
    with pytest.raises(PublishError):  # a part-way failure records last_error: the schema covers it too
        publisher.publish_run(run_dir, FakeSink(fail_calls={2}), max_datums_per_call=10)
    failed = json.loads((run_dir / "publish.json").read_text())
    assert_valid(failed, "publish.schema.json")
    assert failed["targets"]["Spectrn@us-east-1@fake"]["last_error"]["batch"] == 1
    res = publisher.publish_run(run_dir, FakeSink(), max_datums_per_call=10)
    ledger = json.loads((run_dir / "publish.json").read_text())
    assert_valid(ledger, "publish.schema.json")
    assert ledger["schema_version"] == LEDGER_SCHEMA_VERSION
    target = ledger["targets"]["Spectrn@us-east-1@fake"]
    assert len(target["sent"]) == res.batches and target["last_error"] is None
    assert sorted(c["index"] for c in target["sent"].values()) == list(range(res.batches))


def test_a_ledger_of_the_untyped_layout_is_read() -> None:
    raw = json.loads(FIXTURE.read_text())
    assert raw["version"] == 1 and "schema_version" not in raw  # the old layout, as written
    ledger = read_publish_ledger(raw, str(FIXTURE))
    (key,) = raw["targets"]
    target = ledger.targets[key]
    assert (target.namespace, target.target) == (raw["targets"][key]["namespace"], raw["targets"][key]["target"])
    assert set(target.sent) == set(raw["targets"][key]["sent"])
    assert target.time_shift_s == raw["targets"][key]["time_shift_s"]
    assert target.dashboard is not None and target.dashboard.name == raw["targets"][key]["dashboard"]["name"]


def test_the_recorded_shift_of_an_untyped_ledger_is_kept(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=2, start=time.time() - 3600, summary=False)
    shutil.copyfile(FIXTURE, run_dir / "publish.json")
    raw = json.loads(FIXTURE.read_text())
    (t,) = raw["targets"].values()
    assert publisher.recorded_time_shift(run_dir, t["namespace"], t["target"]) == t["time_shift_s"]
    assert publisher.recorded_time_shift(run_dir, "Other") == 0.0
    assert RunFolder(run_dir).publish_ledger().targets.keys() == raw["targets"].keys()


def test_a_ledger_from_a_newer_spectrn_or_of_another_shape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PublishError, match="written by a newer spectrn"):
        read_publish_ledger({"schema_version": LEDGER_SCHEMA_VERSION + 1, "targets": {}}, "publish.json")
    with pytest.raises(PublishError, match="unknown layout"):
        read_publish_ledger({"version": 1, "targets": {"x": {"namespace": "N", "target": "t", "sent": []}}}, "p")
