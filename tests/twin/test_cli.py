"""``spectrn twin`` and ``spectrn sweep --local --twin`` as a user runs them (on the hidden simulator's run)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from spectrn.cli.main import main
from spectrn.sim.settings import load_preset_file
from spectrn.twin.model import load_twin

from .conftest import Hidden

pytestmark = pytest.mark.slow


def run(*args: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    assert e.value.code == 0


def test_calibrate_writes_a_preset_the_simulator_serves_and_a_strict_sidecar(
    hidden: Hidden, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "twin.yaml"
    run("twin", "calibrate", str(hidden.calibration_run), "--out-file", str(out), "--name", "mytwin")
    err = capsys.readouterr().err
    assert "weights_read_s" in err and "[fitted" in err and "residuals |observed - fitted|" in err
    preset = load_preset_file(out)  # --preset-file's own loader: the file is a valid preset
    assert preset.name == "mytwin" and preset.calibration is not None
    twin = load_twin(out)
    cal = twin.calibration
    run_ids = [r.run_id for r in cal.runs]
    assert run_ids == ["calibration"] and cal.runs[0].levels == ["c4", "c16"] and cal.runs[0].time_scale == 0.2
    assert all(p.points > 0 for p in cal.costs.values() if p.status == "fitted")
    assert cal.performance  # a simulator run's timing is the simulator's: a performance result of the model
    # every figure in the sidecar says where it comes from
    for c in cal.acceptance:
        assert c.sources and all("calibration/c" in s for s in c.sources)
    # the sidecar is strict: a misspelt key is refused with the field named
    data = yaml.safe_load(out.read_text())
    data["calibration"]["costs"]["weights_read_s"]["valu"] = 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit) as e:
        main(["twin", "predict", str(bad)])
    assert e.value.code == 2
    assert "calibration: costs.weights_read_s.valu" in capsys.readouterr().err


def test_predict_json_and_table(hidden: Hidden, capsys: pytest.CaptureFixture[str]) -> None:
    run("twin", "predict", str(hidden.twin_file), "--windows", "3,9,15", "--concurrency", "1,16,64",
        "--samples", "50", "-o", "json")  # fmt: skip
    p = json.loads(capsys.readouterr().out)
    cells = {(c["concurrency"], c["window"]): c for c in p["cells"]}
    assert len(cells) == 3 * 4
    for c in p["cells"]:
        lo, hi = c["tpot_s"]["mix"]["ci95"]
        assert lo <= c["tpot_s"]["mix"]["value"] <= hi and c["method"] == "engine"
    # window 15 extrapolates acceptance beyond the measured 8 positions and says so
    assert cells[(1, 15)]["extrapolated"] and not cells[(1, 9)]["extrapolated"]
    # batch limit 16: concurrency 64 queues, TPOT is that of 16 and e2e grows with the queue
    assert cells[(64, 9)]["e2e_s"]["value"] > 3 * cells[(16, 9)]["e2e_s"]["value"]
    # compute bound at a batch of 16: window 15 stops paying, window 3 does not within the batch limit
    cross = {x["window"]: x for x in p["crossover"]}
    assert cross[3]["concurrency"] is None and cross[15]["concurrency"] is not None
    assert {b["concurrency"] for b in p["best"]} == {1, 16, 64}
    # window 3 still pays at the batch limit, so no load stops every window; without the limit, the latest
    # window to stop (none, if one still pays at the end of the scan)
    assert p["no_window_pays_from"] is None
    unlimited = [x["concurrency"] for x in p["crossover_unlimited"]]
    assert p["no_window_pays_from_unlimited"] == (None if None in unlimited else max(unlimited))
    run("twin", "predict", str(hidden.twin_file), "--windows", "5,9", "--concurrency", "4", "--samples", "20",
        "--mix", "structured=1")  # fmt: skip
    out = capsys.readouterr().out
    assert "best window" in out and "crossover" in out and "speculation stops paying" in out and "method:" in out


def test_report_page(hidden: Hidden, tmp_path: Path) -> None:
    run("twin", "report", str(hidden.twin_file), "--out-dir", str(tmp_path / "rep"), "--measured",
        str(hidden.calibration_run), "--windows", "5,9,13", "--concurrency", "4,16", "--samples", "30")  # fmt: skip
    page = (tmp_path / "rep" / "index.html").read_text()
    for name in ("residuals", "acceptance", "crossover", "predicted_vs_measured"):
        assert (tmp_path / "rep" / f"{name}.png").stat().st_size > 5000
    assert page.count("data:image/png;base64,") == 4 and "http://" not in page.replace("http://127.0.0.1", "")
    assert "Predicted against measured" in page and "weights_read_s" in page
    # the page wraps long values anywhere, but a table header only between words: "speedup", never "spe|edup"
    css = page[page.index("<style>") : page.index("</style>")]
    assert "overflow-wrap:anywhere" in css and re.search(r"\bth\{[^}]*overflow-wrap:normal", css)


def test_sweep_serves_the_twin(hidden: Hidden, tmp_path: Path) -> None:
    run("sweep", "--local", "--twin", str(hidden.twin_file), "--windows", "9", "--concurrency", "4",
        "--requests", "4", "--max-tokens", "64", "--prompts", "all", "--time-scale", "0.05", "--quiet",
        "--no-report", "--sweep-id", "tw", "--out-dir", str(tmp_path))  # fmt: skip
    log = (tmp_path / "tw" / "servers" / "sim-qwen3-1.7b-k9.log").read_text()
    assert "twin-calibration" in log  # the server announced the twin preset, not qwen3-32b-trn2
    summaries = list((tmp_path / "tw" / "cells").rglob("summary.json"))
    assert len(summaries) == 1
    s = json.loads(summaries[0].read_text())
    assert s["provenance"]["profile"] == "neuron-fork"


def test_report_on_a_two_draft_sweep_compares_only_the_twins_draft(
    hidden: Hidden, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import html
    import shutil

    # a sweep folder with one cell of the twin's draft and one of another draft (the same measured requests,
    # relabelled: were it compared, its points would be the twin's own and read as a fit)
    sweep = tmp_path / "sw"
    (sweep / "sweep.json").parent.mkdir(parents=True)
    (sweep / "sweep.json").write_text("{}")
    own = sweep / "cells" / "own" / "calibration"
    other = sweep / "cells" / "other" / "calibration-06b"
    for dst in (own, other):
        shutil.copytree(hidden.calibration_run, dst)
        (dst / "summary.json").unlink()  # re-analysed with its own run.json
    meta = json.loads((other / "run.json").read_text())
    assert meta["config"]["draft"] == hidden.twin.calibration.draft != "qwen3-0.6b"
    meta["config"]["draft"] = "qwen3-0.6b"
    meta["run_id"] = "calibration-06b"
    (other / "run.json").write_text(json.dumps(meta))
    capsys.readouterr()
    run("twin", "report", str(hidden.twin_file), "--out-dir", str(tmp_path / "rep"), "--measured", str(sweep),
        "--windows", "9", "--concurrency", "4,16", "--samples", "20")  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    note = f"calibration-06b: draft qwen3-0.6b, not the twin's {hidden.twin.calibration.draft}: not compared"
    assert f"warning: {note}" in err
    page = html.unescape((tmp_path / "rep" / "index.html").read_text())
    assert note in " ".join(page.split())
    rows = page.split("<h2>Predicted against measured</h2>")[1]
    assert "calibration-06b</td>" not in rows and ">calibration</td>" in rows
