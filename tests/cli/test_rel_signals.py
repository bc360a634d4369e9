"""The CLI stopped mid-run (Ctrl-C and SIGKILL) in a real subprocess, then analyzed.

SIGINT: exit 130, every finished request is in requests.jsonl, run.json says ``interrupted``, and
``spectrn analyze`` flags the run as not clean. SIGKILL: no handler runs; requests.jsonl holds whole lines
(a torn last line at most, which analysis skips), run.json has no end time, and ``spectrn analyze`` still
works and flags the run as not clean.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from doubles.relhelp import run_cli, summary

SPECTRN = Path(sys.executable).with_name("spectrn")
pytestmark = pytest.mark.slow

SIM_TIME_SCALE = 0.02  # start_sim: fast simulated servers (stall lengths below assume it)


def _start_bench(tmp_path: Path, base: str, spec: str, run_id: str) -> subprocess.Popen[bytes]:
    argv = [
        str(SPECTRN),
        "bench",
        "--endpoint",
        f"baseline={base}",
        "--endpoint",
        f"speculative={spec}",
        "--requests",
        "400",
        "--max-tokens",
        "64",
        "--concurrency",
        "4",
        "--out-dir",
        str(tmp_path / "results"),
        "--run-id",
        run_id,
        "--no-report",
    ]
    env = {k: v for k, v in os.environ.items() if k != "SPECTRN_CONFIG"}
    return subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )


def _wait_for_records(path: Path, n: int, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if path.exists():
            lines = path.read_bytes().count(b"\n")
            if lines >= n:
                return lines
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} records after {timeout_s}s")


def _whole_lines(path: Path) -> list[dict]:
    raw = path.read_bytes()
    body, _, torn = raw.rpartition(b"\n")
    out = [json.loads(line) for line in body.split(b"\n") if line.strip()]
    if torn.strip():  # a torn last line is allowed after SIGKILL only; it must not parse as a record
        with pytest.raises(json.JSONDecodeError):
            json.loads(torn)
    return out


def test_sigint_keeps_finished_requests_and_marks_the_run_interrupted(start_sim, capsys, tmp_path) -> None:
    base, spec = start_sim(time_scale=0.2), start_sim(time_scale=0.2, speculative=True)
    proc = _start_bench(tmp_path, base.base_url, spec.base_url, "int")
    run_dir = tmp_path / "results" / "int"
    seen = _wait_for_records(run_dir / "requests.jsonl", 12, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    text = err.decode()

    assert proc.returncode == 130, text
    assert "Interrupted: stopped by the user; finished requests are kept in" in text
    assert "spectrn analyze" in text  # the fix names the next command
    recs = _whole_lines(run_dir / "requests.jsonl")
    assert seen <= len(recs) < 2 * 400 + 4
    assert not (run_dir / "requests.jsonl").read_bytes().endswith(b"}")  # the last record is whole
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["interrupted"] is True and meta["finished_at"] is not None
    assert any("interrupted" in n for n in meta["notes"])
    json.loads((run_dir / "acceptance.json").read_text())  # valid JSON (written atomically on the way out)

    code, _, err2 = run_cli(["analyze", str(run_dir), "--no-report"], capsys)
    assert code == 0, err2
    s = summary(run_dir)
    assert s.clean is False and any("interrupted" in w for w in s.warnings())
    assert "NOT A CLEAN RUN" in err2
    done = sum(v.requests.completed + v.requests.errors for v in s.levels[0].variants.values())
    assert done == sum(1 for r in recs if not r.get("warmup"))


def test_sigkill_leaves_whole_records_and_analysis_still_works(start_sim, capsys, tmp_path) -> None:
    base, spec = start_sim(time_scale=0.2), start_sim(time_scale=0.2, speculative=True)
    proc = _start_bench(tmp_path, base.base_url, spec.base_url, "kill")
    run_dir = tmp_path / "results" / "kill"
    _wait_for_records(run_dir / "requests.jsonl", 12, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    recs = _whole_lines(run_dir / "requests.jsonl")
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["finished_at"] is None  # nothing ran on the way out
    # simulate the worst case, a record torn mid-write, on top of what the kill left
    with (run_dir / "requests.jsonl").open("ab") as f:
        f.write(b'{"variant": "baseline", "index": 99, "prompt_id": "x", "prompt_cl')

    code, _, err = run_cli(["analyze", str(run_dir), "--no-report"], capsys)
    assert code == 0, err
    s = summary(run_dir)
    assert s.clean is False and any("never finished" in w for w in s.warnings())
    done = sum(v.requests.completed + v.requests.errors for v in s.levels[0].variants.values())
    assert done == sum(1 for r in recs if not r.get("warmup"))


def test_a_torn_line_in_the_middle_is_corruption_not_a_kill(capsys, tmp_path) -> None:
    """Only the LAST line may be torn; anything else means the file was damaged: exit 5, no summary."""
    run_dir = tmp_path / "bad"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"run_id": "bad", "spectrn_version": "0", "started_at": 1.0}))
    good = {"variant": "baseline", "index": 0, "prompt_id": "p", "prompt_class": "c", "sent_at": 1.0}
    (run_dir / "requests.jsonl").write_text(json.dumps(good) + "\n" + '{"variant": "bas\n' + json.dumps(good) + "\n")
    code, _, err = run_cli(["analyze", str(run_dir), "--no-report"], capsys)
    assert code == 5
    assert "line 2 is not a request record" in err
    assert not (run_dir / "summary.json").exists()


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in text:
            out.append(int(status.parent.name))
    return out


def _gone(pid: int, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return True
        if state == "Z":  # exited, not yet reaped by its new parent
            return True
        time.sleep(0.1)
    return False


def test_sigterm_stops_the_run_marks_it_interrupted_and_exits_143(start_sim, capsys, tmp_path) -> None:
    base, spec = start_sim(time_scale=0.2), start_sim(time_scale=0.2, speculative=True)
    proc = _start_bench(tmp_path, base.base_url, spec.base_url, "term")
    run_dir = tmp_path / "results" / "term"
    _wait_for_records(run_dir / "requests.jsonl", 12, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == 143, text
    lines = [line for line in text.splitlines() if line.startswith(("Terminated:", "Interrupted:", "Traceback"))]
    assert lines == [lines[-1]] and lines[-1].startswith(
        "Terminated: stopped by SIGTERM; finished requests are kept in"
    )
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["interrupted"] is True and meta["stop_reason"] == "SIGTERM" and meta["finished_at"] is not None
    _whole_lines(run_dir / "requests.jsonl")
    code, _, err2 = run_cli(["analyze", str(run_dir), "--no-report"], capsys)
    assert code == 0 and "NOT A CLEAN RUN" in err2


def test_sigterm_to_bench_local_stops_the_simulators_it_started(tmp_path) -> None:
    argv = [str(SPECTRN), "bench", "--local", "--runtime", "sim", "--time-scale", "0.2", "--requests", "400"]
    argv += ["--max-tokens", "64", "--concurrency", "4", "--out-dir", str(tmp_path / "results"), "--run-id", "lt"]
    env = {k: v for k, v in os.environ.items() if k != "SPECTRN_CONFIG"}
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    run_dir = tmp_path / "results" / "lt"
    _wait_for_records(run_dir / "requests.jsonl", 8, proc, timeout_s=120)
    servers = _children(proc.pid)
    assert len(servers) == 2, servers  # the baseline and the speculative simulator
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()
    assert err.decode().splitlines()[-1].startswith("Terminated: stopped by SIGTERM")
    assert all(_gone(pid) for pid in servers), "a simulator outlived the bench"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["interrupted"] is True and meta["stop_reason"] == "SIGTERM"


def test_sigkill_of_bench_local_takes_the_simulators_with_it(tmp_path) -> None:
    """SIGKILL leaves the CLI no chance to clean up: the servers it started still end (they are told when their
    parent dies), so nothing keeps running or holding ports after a killed bench."""
    argv = [str(SPECTRN), "bench", "--local", "--runtime", "sim", "--time-scale", "0.2", "--requests", "400"]
    argv += ["--max-tokens", "64", "--concurrency", "4", "--out-dir", str(tmp_path / "results"), "--run-id", "kl"]
    env = {k: v for k, v in os.environ.items() if k != "SPECTRN_CONFIG"}
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        _wait_for_records(tmp_path / "results" / "kl" / "requests.jsonl", 8, proc, timeout_s=120)
        servers = _children(proc.pid)
        assert len(servers) == 2, servers  # the baseline and the speculative simulator
        writers = [c for pid in servers for c in _children(pid)]  # their writer processes, if any
    finally:
        proc.kill()
        proc.wait(30)
    assert all(_gone(pid) for pid in servers + writers), "a simulator outlived the killed bench"


def test_a_second_bench_with_the_same_run_id_fails_at_once(start_sim, capsys, tmp_path) -> None:
    base, spec = start_sim(time_scale=0.2), start_sim(time_scale=0.2, speculative=True)
    proc = _start_bench(tmp_path, base.base_url, spec.base_url, "twice")
    run_dir = tmp_path / "results" / "twice"
    try:
        _wait_for_records(run_dir / "requests.jsonl", 4, proc)
        started = time.monotonic()
        eps = ["--endpoint", f"baseline={base.base_url}", "--endpoint", f"speculative={spec.base_url}"]
        code, _, err = run_cli(["bench", *eps, "--out-dir", tmp_path / "results", "--run-id", "twice"], capsys)
        assert time.monotonic() - started < 10  # at once, not after the first run
        assert code == 4 and "Traceback" not in err
        line = [x for x in err.splitlines() if x.strip()][-1]
        assert line.startswith("BenchError: run folder") and "is in use by another spectrn process" in line
        assert proc.poll() is None  # the first bench is untouched and still running
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    recs = _whole_lines(run_dir / "requests.jsonl")
    assert len({(r["variant"], r["index"], r.get("level")) for r in recs}) == len(recs)  # no interleaved duplicates
