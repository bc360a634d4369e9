"""Runs against endpoints spectrn did not start are labelled with what the servers say, not config defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectrn.cli.main import main
from spectrn.run.folder import RunFolder
from spectrn.sim import SimSettings, run_in_thread


@pytest.fixture(scope="module")
def servers():
    base = run_in_thread(SimSettings(time_scale=0.02, profile="upstream"))
    spec = run_in_thread(
        SimSettings(time_scale=0.02, speculative=True, draft="qwen3-0.6b", window=3, profile="upstream")
    )
    yield base.base_url, spec.base_url
    base.stop()
    spec.stop()


def _bench(tmp_path: Path, servers: tuple[str, str], *extra: str) -> RunFolder:
    base, spec = servers
    argv = ["bench", "--endpoint", f"baseline={base}", "--endpoint", f"speculative={spec}", "--requests", "4",
            "--max-tokens", "40", "--prompts", "structured", "--out-dir", str(tmp_path), "--no-report",
            *extra]  # fmt: skip
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return RunFolder.open(run)


def test_undeclared_endpoints_are_named_from_the_servers(tmp_path: Path, servers: tuple[str, str]) -> None:
    folder = _bench(tmp_path, servers)
    assert folder.path.name.endswith("-endpoints")  # never named after config defaults (qwen3-1p7b-k7)
    spec = folder.meta.provenance.servers["speculative"]
    assert spec.source == "server" and spec.window == 3 and spec.draft == "qwen3-0.6b"  # the simulator says so
    s = folder.require_summary()
    assert s.config_label.endswith("/k3")
    assert not s.provenance.started_by_spectrn and s.provenance.runtime == "endpoints"


def test_declared_draft_and_window_label_the_run(tmp_path: Path, servers: tuple[str, str]) -> None:
    folder = _bench(tmp_path, servers, "--draft", "qwen3-0.6b", "--window", "3")
    assert "qwen3-0p6b-k3" in folder.path.name
    spec = folder.meta.provenance.servers["speculative"]
    assert spec.source == "declared" and spec.draft == "qwen3-0.6b" and spec.window == 3


def test_a_real_servers_window_comes_from_its_counter_labels() -> None:
    """vLLM V1 registers one per-position counter label per configured speculative token (a real server has no
    /sim/identity): the labels give the window."""
    import urllib.request

    from spectrn.loadgen.identity import _positions

    spec = run_in_thread(SimSettings(time_scale=0.02, speculative=True, window=5, profile="upstream"))
    fork = run_in_thread(SimSettings(time_scale=0.02, speculative=True, window=5, profile="neuron-fork"))
    try:
        assert _positions(urllib.request.urlopen(spec.base_url + "/metrics").read().decode()) == 5
        assert _positions(urllib.request.urlopen(fork.base_url + "/metrics").read().decode()) is None  # V0 fork
    finally:
        spec.stop()
        fork.stop()
