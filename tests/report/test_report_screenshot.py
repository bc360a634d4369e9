"""The run report in a real browser: headless Chromium lays out report/index.html at 1280 px, every plot loads
and nothing makes the page scroll sideways; a screenshot is kept for a person to look at.

Skipped (saying so) when Chromium is not installed, unless SPECTRN_REQUIRE_CHROMIUM is set; Debian:
``apt-get install -y chromium``. ``make report-screenshot`` runs this with Chromium required and keeps the PNGs
in results/screenshots/ (or $SPECTRN_SCREENSHOT_DIR).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_report import png_size

from doubles.runfactory import make_records, make_run
from spectrn.report.html import build_report

WIDTH, HEIGHT = 1280, 2400

# Injected into a copy of the page only (the report itself has no script): measures the laid-out page.
PROBE = """<script>window.addEventListener("load", function () {
  var d = document.documentElement, imgs = [].slice.call(document.images), wide = [];
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.getBoundingClientRect().right > d.clientWidth + 1 || e.scrollWidth > e.clientWidth + 1)
      wide.push(e.tagName + "." + e.className + " " + e.scrollWidth + ">" + e.clientWidth);
  });
  var figures = [].slice.call(document.querySelectorAll("figure")).map(function (f) {
    var img = f.querySelector("img"), cap = f.querySelector("figcaption");
    return {alt: img ? img.alt : "", caption: cap ? cap.textContent : "",
            width: img ? img.getBoundingClientRect().width : 0};
  });
  var h1 = document.querySelector("h1"), first = document.body.firstElementChild;
  document.body.setAttribute("data-probe", JSON.stringify({scrollWidth: d.scrollWidth, clientWidth: d.clientWidth,
    images: imgs.length, loaded: imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
    wide: wide, figures: figures, h1_first: first === h1}));
});</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("SPECTRN_REQUIRE_CHROMIUM"):
        pytest.fail("SPECTRN_REQUIRE_CHROMIUM is set but chromium is not installed (apt-get install -y chromium)")
    pytest.skip(
        "*** chromium is NOT INSTALLED: the report screenshot check did NOT run (apt-get install -y chromium) ***"
    )


def run_chromium(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def cpu_like(root: Path) -> Path:
    """A run whose verdict is not a performance result (vLLM on CPU): the banner and correctness headline."""
    run_dir = make_run(root, "cpu-run", per_class=12, summary=False, start=time.time() - 600)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["provenance"] = {"runtime": "vllm-cpu", "started_by_spectrn": True}
    (run_dir / "run.json").write_text(json.dumps(meta))
    return run_dir


def three_levels(root: Path) -> Path:
    """Three load levels x two prompt classes (open, structured)."""
    recs = []
    for n, level in enumerate(("c1", "c4", "c16")):
        recs += make_records(per_class=12, level=level, errors=0, seed=n, start=time.time() - 3600 + 900 * n)
    return make_run(root, "three-levels", recs)


def sweep_page(root: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A two-window sweep on the simulator, through the CLI as a user runs it."""
    from support import run_cli

    args = ["sweep", "--local", "--windows", "3,5", "--time-scale", "0.05", "--requests", "4", "--max-tokens", "12",
            "--prompts", "all", "--out-dir", str(root / "s"), "--sweep-id", "sw"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    (page,) = re.findall(r"^report: (.+)$", err, re.M)
    return Path(page)


def probe_page(exe: str, index: Path, tmp_path: Path) -> dict[str, Any]:
    page = index.read_text(encoding="utf-8")
    assert "<script" not in page
    probe = index.parent / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = run_chromium(exe, tmp_path / "profile", "--dump-dom", probe.as_uri())
    probe.unlink()
    m = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert m is not None, dom.stderr[-2000:]
    layout: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    return layout


def screenshot(exe: str, index: Path, tmp_path: Path, kind: str) -> Path:
    shot = tmp_path / f"report-{kind}.png"
    done = run_chromium(exe, tmp_path / "profile", f"--screenshot={shot}", index.as_uri())
    assert shot.exists(), done.stderr[-2000:]
    assert png_size(shot) == (WIDTH, HEIGHT) and shot.stat().st_size > 50_000  # a rendered page, not a blank one
    keep = os.environ.get("SPECTRN_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(keep) / shot.name)
    return shot


@pytest.mark.parametrize("kind", ["demo", "vllm-cpu", "three-levels", "sweep"])
def test_report_fits_1280px_and_every_plot_loads(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    exe = chromium()
    if kind == "demo":
        index = build_report(make_run(tmp_path, "demo-run", per_class=12, errors=0, start=time.time() - 600))
    elif kind == "vllm-cpu":
        index = build_report(cpu_like(tmp_path))
    elif kind == "three-levels":
        index = build_report(three_levels(tmp_path))
    else:
        monkeypatch.chdir(tmp_path)
        index = sweep_page(tmp_path, capsys)
    pngs = sorted(index.parent.glob("*.png"))
    layout = probe_page(exe, index, tmp_path)
    assert layout["scrollWidth"] <= layout["clientWidth"], f"the page scrolls sideways at {WIDTH} px: {layout}"
    assert layout["wide"] == [], layout  # no element wider than the window or than its own box
    assert layout["h1_first"], "the page title is the first thing on the page"
    assert layout["images"] == layout["loaded"] >= 1, layout
    if kind != "sweep":
        assert layout["images"] == len(pngs) >= 5, layout
    for fig in layout["figures"]:  # every plot has a caption saying what it shows, and is shown at a readable size
        assert fig["alt"] and fig["caption"].startswith(fig["alt"]) and len(fig["caption"]) > len(fig["alt"]) + 20
        assert fig["width"] >= 400, fig
    if kind == "three-levels":
        figures = layout["figures"]
        per_level = [f for f in figures if " at load " in f["alt"]]
        for level in ("c1", "c4", "c16"):  # every per-level plot, for every level, names it
            mine = [f for f in per_level if f["alt"].split(" at load ")[1].split(",")[0] == level]
            assert len(mine) == 5, (level, [f["alt"] for f in figures])
            assert all(f" at load {level}" in f["caption"] for f in mine)
        # every plot says which prompt classes it shows: per class, or all classes pooled (labelled so)
        for f in figures:
            assert "per prompt class" in f["alt"] or "all prompt classes pooled" in f["alt"], f["alt"]
        rest = [f["alt"] for f in figures if f not in per_level]
        assert rest == ["Across load levels, per prompt class",
                        "Throughput per instance vs speed per user, all prompt classes pooled"]  # fmt: skip
    screenshot(exe, index, tmp_path, kind)
