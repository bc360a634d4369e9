"""``VllmCpuPair``: real servers up and separate, and (with stand-in ``vllm`` scripts) every failure path of
start-up and shutdown: not installed, a server that dies, one that never becomes healthy, one that ignores
SIGTERM and leaves children behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spectrn.errors import BenchError, ConfigError, EndpointError
from spectrn.runtimes.launch import group_members
from spectrn.runtimes.vllm_cpu import STARTING_GRACE_S, VllmCpuPair, missing_parts

from .conftest import get_text, require_tier


def fake_tier(tmp_path: Path, script: str) -> tuple[Path, Path]:
    """A venv whose ``bin/vllm`` is ``script`` and a models folder with placeholder files."""
    venv, models = tmp_path / "venv", tmp_path / "models"
    (venv / "bin").mkdir(parents=True)
    (venv / ".spectrn-vllm-stamp").write_text("fake\n")
    vllm = venv / "bin" / "vllm"
    vllm.write_text("#!/usr/bin/env bash\n" + script)
    vllm.chmod(0o755)
    for name in ("target", "draft"):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text("{}")
        (models / name / "model.safetensors").write_bytes(b"")
    (models / "build-info.json").write_text(json.dumps({"served_model_name": "fake-model"}))
    return venv, models


def test_not_installed_names_the_fix(tmp_path: Path) -> None:
    assert missing_parts(tmp_path / "no-venv", tmp_path / "no-models") == [
        f"vllm-cpu venv {tmp_path / 'no-venv'}",
        f"target model {tmp_path / 'no-models' / 'target'}",
        f"draft model {tmp_path / 'no-models' / 'draft'}",
    ]
    pair = VllmCpuPair(tmp_path / "work", venv=tmp_path / "no-venv", models_dir=tmp_path / "no-models")
    with pytest.raises(BenchError) as e:
        pair.__enter__()
    assert "not installed" in str(e.value) and "make vllm-cpu" in str(e.value)
    assert not (tmp_path / "work").exists()  # nothing started, nothing written


@pytest.mark.parametrize("window", [0, 17])
def test_window_out_of_range(tmp_path: Path, window: int) -> None:
    with pytest.raises(ConfigError, match="num_speculative_tokens"):
        VllmCpuPair(tmp_path, num_speculative_tokens=window)


def test_server_dying_at_startup_shows_its_log(tmp_path: Path) -> None:
    venv, models = fake_tier(tmp_path, 'echo "ValueError: no such model architecture in $3" >&2\nexit 3\n')
    with pytest.raises(EndpointError) as e:
        with VllmCpuPair(tmp_path / "work", venv=venv, models_dir=models, startup_timeout_s=30):
            pass
    msg = str(e.value)
    assert "exited with code 3 during start-up" in msg
    assert "ValueError: no such model architecture" in msg  # the log tail, not just a pointer to it
    assert "vllm-baseline.log" in msg or "vllm-speculative.log" in msg


def test_never_healthy_times_out_and_kills_the_group(tmp_path: Path) -> None:
    # A server that starts a child, ignores SIGTERM and never answers: stop() must SIGKILL the whole group.
    venv, models = fake_tier(tmp_path, "trap '' TERM\nsleep 300 &\necho started $$\nwait\n")
    pair = VllmCpuPair(tmp_path / "work", venv=venv, models_dir=models, startup_timeout_s=2)
    assert pair.stop_grace_s >= 20
    t0 = time.monotonic()
    with pytest.raises(EndpointError, match=r"not healthy after 2s") as e:
        pair.__enter__()
    assert "started" in str(e.value)  # log tail
    assert "allow more time" in str(e.value)
    # A server that never became healthy gets the short start-up grace, not the full one.
    assert time.monotonic() - t0 < 2 + STARTING_GRACE_S + 10
    assert pair.servers == {}
    pids = [int(line.split()[1]) for p in (tmp_path / "work").glob("*.log") for line in p.read_text().splitlines()]
    assert len(pids) == 2
    for pid in pids:
        assert group_members(pid) == [], f"process group {pid} survived stop()"


def http_stand_in(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in ``vllm`` that answers /health and POSTs with 200 and prints its command line."""
    server = (
        "import http.server, sys, tempfile, uuid\n"
        "print('argv', sys.argv, flush=True)\n"
        "dist = f'{tempfile.gettempdir()}/vllm_dist_{uuid.uuid4().hex}'\n"
        "open(dist, 'w').close()\n"
        "print(f'distributed_init_method=file://{dist} backend=gloo', flush=True)\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers()\n"
        "    def do_POST(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'{}')\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n"
    )
    (tmp_path / "server.py").write_text(server)
    return fake_tier(tmp_path, f'exec python3 {tmp_path / "server.py"} "$@"\n')


def test_set_window_restarts_only_the_speculative_server(tmp_path: Path) -> None:
    venv, models = http_stand_in(tmp_path)
    with VllmCpuPair(tmp_path / "work", num_speculative_tokens=4, venv=venv, models_dir=models) as pair:
        base_pid, spec_pid = pair.servers["baseline"].pgid, pair.servers["speculative"].pgid
        base_url, old_url = pair.endpoints["baseline"], pair.endpoints["speculative"]
        assert pair.set_window(4) == old_url and pair.servers["speculative"].pgid == spec_pid  # same window: no-op
        new_url = pair.set_window(7)
        assert new_url == pair.endpoints["speculative"] != old_url
        assert pair.servers["baseline"].pgid == base_pid and pair.endpoints["baseline"] == base_url
        assert pair.servers["speculative"].pgid != spec_pid
        assert group_members(spec_pid) == []  # the old speculative server is gone
        assert get_text(f"{new_url}/health") == ""
        log = (tmp_path / "work" / "vllm-speculative.log").read_text()
        assert '"num_speculative_tokens": 4' in log and '"num_speculative_tokens": 7' in log  # appended
        with pytest.raises(ConfigError):
            pair.set_window(0)
        pgids = [s.pgid for s in pair.servers.values()]
    for pgid in pgids:
        assert group_members(pgid) == []


def test_exception_inside_the_block_stops_the_servers(tmp_path: Path) -> None:
    # A stand-in server that answers /health; the pair must stop it when the with-block raises.
    venv, models = http_stand_in(tmp_path)
    pgids: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        with VllmCpuPair(tmp_path / "work", venv=venv, models_dir=models, startup_timeout_s=30) as pair:
            assert pair.model == "fake-model"
            assert set(pair.endpoints) == {"baseline", "speculative"}
            assert all(get_text(f"{u}/health") == "" for u in pair.endpoints.values())
            pgids = [s.pgid for s in pair.servers.values()]
            raise KeyboardInterrupt  # what Ctrl-C does inside `spectrn demo`
    assert len(pgids) == 2
    for pgid in pgids:
        assert group_members(pgid) == []
    # The rendezvous files the (stand-in) engines announced in their logs are gone.
    logs = "".join(p.read_text() for p in (tmp_path / "work").glob("*.log"))
    dist = [line.split("file://")[1].split()[0] for line in logs.splitlines() if "file://" in line]
    assert len(dist) == 2 and not [p for p in dist if Path(p).exists()]


def test_real_pair_is_up_and_separate(pair: VllmCpuPair) -> None:
    assert set(pair.endpoints) == {"baseline", "speculative"}
    for url in pair.endpoints.values():
        assert url.startswith("http://127.0.0.1:")
        models = json.loads(get_text(f"{url}/v1/models"))
        assert [m["id"] for m in models["data"]] == [pair.model]
    spec = get_text(f"{pair.endpoints['speculative']}/metrics")
    base = get_text(f"{pair.endpoints['baseline']}/metrics")
    assert "vllm:spec_decode_num_drafts_total" in spec
    assert "vllm:spec_decode" not in base  # a plain server has no spec-decode families at all
    assert all(pair.startup_s[v] > 0 for v in ("baseline", "speculative"))
    mem = pair.memory_bytes()
    assert all(mem[v]["rss"] > 200 * 2**20 for v in ("baseline", "speculative"))
    # Each server is pinned to its own core when there are two or more, never both to core 0.
    binds = {v: pair.environment(v)["VLLM_CPU_OMP_THREADS_BIND"] for v in ("baseline", "speculative")}
    if len(os.sched_getaffinity(0)) >= 2:
        assert binds["baseline"] != binds["speculative"]


def _servers_started_in(work: Path) -> dict[str, int]:
    """Process-group leaders whose working folder is one of the pair's server folders."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            cwd = (entry / "cwd").resolve()
            leader = os.getpgid(pid) == pid
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if leader and cwd.parent == work.resolve() and cwd.name.startswith("vllm-"):
            found[cwd.name] = pid
    return found


@pytest.mark.own_servers
def test_ctrl_c_during_real_startup_stops_everything_quickly(tmp_path: Path) -> None:
    """Ctrl-C while real vLLM servers start: a starting vLLM ignores SIGTERM for a long time, so the pair must
    fall back to SIGKILL after the short start-up grace and leave no process behind."""
    require_tier()
    code = (
        "import sys\nfrom pathlib import Path\nfrom spectrn.runtimes.vllm_cpu import VllmCpuPair\n"
        "with VllmCpuPair(Path(sys.argv[1])):\n    pass\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        leaders: dict[str, int] = {}
        while time.monotonic() < deadline and len(leaders) < 2:
            time.sleep(0.5)
            leaders = _servers_started_in(tmp_path)
        assert len(leaders) == 2, "the two servers did not start"
        time.sleep(8)  # well into vLLM's start-up (it takes about a minute)
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "KeyboardInterrupt" in err and proc.returncode != 0
    assert elapsed < STARTING_GRACE_S + 20, f"stopping took {elapsed:.1f}s"
    for pgid in leaders.values():
        assert group_members(pgid) == [], f"process group {pgid} survived Ctrl-C"


def test_relative_paths_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The servers run in their own working folders: relative venv / models / work paths must not break them.
    http_stand_in(tmp_path)
    monkeypatch.chdir(tmp_path)
    with VllmCpuPair(Path("work"), venv=Path("venv"), models_dir=Path("models"), startup_timeout_s=30) as pair:
        assert get_text(f"{pair.endpoints['speculative']}/health") == ""
        log = (tmp_path / "work" / "vllm-speculative.log").read_text()
        assert str(tmp_path / "models" / "target") in log and str(tmp_path / "models" / "draft") in log
