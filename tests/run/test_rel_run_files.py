"""What a run folder's files say cannot falsify, crash or bloat a command: duplicate keys, NUL padding, huge lines,
and a folder a bench is still writing (docs/reliability.md, "What a server, a file or a signal says").

Every test drives the real CLI (``spectrn.cli.main.main``) or a ``spectrn`` process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from doubles.runfactory import make_run
from spectrn.paths import folder_lock
from support import run_cli

# ---- duplicate keys ---------------------------------------------------------------------------------------


def _twice(text: str, key: str, value: object) -> str:
    """``text`` (one JSON object) with ``"key": value`` added in front of its other members: the key twice."""
    assert text.lstrip().startswith("{") and f'"{key}"' in text
    return text.replace("{", "{" + json.dumps(key) + ": " + json.dumps(value) + ", ", 1)


def _listing(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path, "dup", per_class=3)


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        ("run.json", "finished_at", None),  # read as last-wins, the run would look finished or not by chance
        ("acceptance.json", "speculative", None),  # counters or "not reported", by chance
    ],
)
def test_a_key_twice_in_a_run_file_is_refused_naming_file_and_key(capsys, run_dir: Path, name, key, value) -> None:
    path = run_dir / name
    path.write_text(_twice(path.read_text(), key, value))
    (run_dir / "summary.json").unlink()
    code, _, err = run_cli(["analyze", run_dir, "--no-report"], capsys)
    assert code == 5 and "Traceback" not in err
    line = [x for x in err.splitlines() if x.strip()][-1]
    assert line.startswith(f"AnalysisError: {path} holds the key {key!r} twice in one object")
    assert "RFC 8259" in line and f"(fix: keep one of the two {key!r} entries" in line
    assert not (run_dir / "summary.json").exists()


def test_a_key_twice_in_summary_json_is_refused_by_report(capsys, run_dir: Path) -> None:
    path = run_dir / "summary.json"
    path.write_text(_twice(path.read_text(), "run_id", "another-run"))
    code, _, err = run_cli(["report", run_dir, "--no-table"], capsys)
    assert code == 5 and "Traceback" not in err
    assert f"AnalysisError: {path} holds the key 'run_id' twice in one object" in err
    assert not (run_dir / "report").exists()


def test_a_key_twice_in_publish_json_is_refused_before_any_call(capsys, run_dir: Path, monkeypatch) -> None:
    path = run_dir / "publish.json"
    path.write_text(json.dumps({"schema_version": 2, "targets": {}}))
    path.write_text(_twice(path.read_text(), "targets", {}))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # nothing listens on port 9: a call that went out would fail differently
    code, _, err = run_cli(
        ["publish", run_dir, "--endpoint-url", "http://127.0.0.1:9", "--region", "us-east-1"], capsys
    )
    assert code == 6 and "Traceback" not in err
    assert f"PublishError: {path} holds the key 'targets' twice in one object" in err


def test_a_key_twice_in_sweep_json_is_refused_on_resume(capsys, tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "sweeps" / "schema1" / "fx"
    sweep = tmp_path / "fx"
    sweep.mkdir()
    manifest = sweep / "sweep.json"
    manifest.write_text(_twice((fixture / "sweep.json").read_text(), "fingerprint", "0" * 16))
    code, _, err = run_cli(
        ["sweep", "--local", "--resume", "--sweep-id", "fx", "--out-dir", tmp_path, "--windows", "3"], capsys
    )
    assert code == 5 and "Traceback" not in err
    assert f"AnalysisError: {manifest} holds the key 'fingerprint' twice in one object" in err


def test_a_key_twice_in_an_llmperf_file_is_refused_by_ingest(capsys, tmp_path: Path) -> None:
    row = {"error_code": None, "ttft_s": 0.1, "end_to_end_latency_s": 1.0, "inter_token_latency_s": 0.1,
           "number_output_tokens": 10}  # fmt: skip
    for variant in ("baseline", "speculative"):
        folder = tmp_path / "llmperf" / variant
        folder.mkdir(parents=True)
        text = json.dumps([row])
        if variant == "speculative":  # the second object of the list holds ttft_s twice
            text = json.dumps([row, row]).replace('}, {"error_code"', '}, {"ttft_s": 9.0, "error_code"')
        (folder / "x_individual_responses.json").write_text(text)
    code, _, err = run_cli(["ingest-llmperf", tmp_path / "llmperf", "--out-dir", tmp_path / "results"], capsys)
    assert code == 5 and "Traceback" not in err
    assert "x_individual_responses.json holds the key 'ttft_s' twice in one object" in err


def _records(run_dir: Path) -> list[str]:
    return (run_dir / "requests.jsonl").read_text().splitlines(keepends=True)


def test_a_record_with_a_key_twice_mid_file_is_a_damaged_line(capsys, run_dir: Path) -> None:
    lines = _records(run_dir)
    lines[2] = _twice(lines[2], "ttft", 9.0)  # last-wins would keep the real value; first-wins would take 9 s
    (run_dir / "requests.jsonl").write_text("".join(lines))
    code, _, err = run_cli(["analyze", run_dir, "--no-report"], capsys)
    assert code == 5 and "Traceback" not in err
    assert "requests.jsonl line 3 is not a request record: the key 'ttft' appears twice in one object" in err


def test_a_torn_last_record_with_a_key_twice_is_skipped_like_any_torn_line(capsys, run_dir: Path) -> None:
    lines = _records(run_dir)
    torn = _twice(lines[-1], "ttft", 9.0).rstrip("\n")  # a whole object, but no newline: the writer was killed
    (run_dir / "requests.jsonl").write_text("".join(lines[:-1]) + torn)
    code, _, err = run_cli(["analyze", run_dir, "--no-report", "-o", "json"], capsys)
    assert code == 0, err
    summary = json.loads((run_dir / "summary.json").read_text())
    variants = summary["levels"][0]["variants"].values()
    measured = sum(1 for line in lines[:-1] if not json.loads(line).get("warmup"))
    assert sum(v["requests"]["completed"] + v["requests"]["errors"] for v in variants) == measured
    assert any(f"skipped a torn last line (line {len(lines)}, {len(torn)} bytes" in n for n in summary["notes"])


# ---- NUL padding, torn and huge lines ---------------------------------------------------------------------


PEAK_RSS = textwrap.dedent(
    """
    import resource, subprocess, sys
    proc = subprocess.run([sys.executable, "-m", "spectrn", *sys.argv[1:]], capture_output=True, text=True)
    sys.stdout.write(proc.stderr[-4000:])
    print("\\nRC", proc.returncode, "PEAK_MIB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    """
)


def _analyze_measured(run_dir: Path) -> tuple[int, float, str]:
    """``spectrn analyze RUN`` in a child process: exit code, the child's peak RSS in MiB, its stderr."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "COLUMNS": "200"}
    out = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, "analyze", str(run_dir), "--no-report"],
        capture_output=True, text=True, env=env, timeout=600, check=True,
    ).stdout  # fmt: skip
    tail = out.rsplit("\nRC ", 1)[1].split()
    return int(tail[0]), float(tail[2]), out


def test_a_400_mb_nul_tail_is_skipped_in_bounded_memory_and_said(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "nul", per_class=3, summary=False)
    path = run_dir / "requests.jsonl"
    lines = _records(run_dir)
    measured = sum(1 for line in lines if not json.loads(line).get("warmup"))
    size = path.stat().st_size
    pad = 400 << 20
    with path.open("r+b") as f:
        f.truncate(size + pad)  # a sparse file: 400 MB of NUL bytes that take no disk
    code, peak_mib, err = _analyze_measured(run_dir)
    assert code == 0, err
    assert peak_mib < 300, f"peak RSS {peak_mib:.0f} MiB: the NUL tail was read whole"
    summary = json.loads((run_dir / "summary.json").read_text())
    lv = summary["levels"][0]
    assert sum(v["requests"]["completed"] + v["requests"]["errors"] for v in lv["variants"].values()) == measured
    note = f"requests.jsonl: skipped {pad} bytes of NUL padding after the last record (line {len(lines) + 1} on"
    assert any(n.startswith(note) for n in summary["notes"])
    assert note in err  # and on the terminal, as a warning
    # the run finished (run.json has its end): the padding is a warning, and the verdict is the one the same
    # folder without padding gets
    assert [f["severity"] for f in summary["findings"] if f["code"] == "records_skipped"] == ["warning"]
    with path.open("r+b") as f:
        f.truncate(size)
    _analyze_measured(run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["verdict"] == summary["verdict"]


def test_a_torn_last_line_ending_in_nul_bytes_is_skipped_and_said(capsys, tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "tornnul", per_class=3, summary=False)
    lines = _records(run_dir)
    torn = lines[-1][:40].encode() + b"\0" * 5000  # the start of a record, then the blocks a crash zeroed
    (run_dir / "requests.jsonl").write_bytes("".join(lines[:-1]).encode() + torn)
    code, _, err = run_cli(["analyze", run_dir, "--no-report"], capsys)
    assert code == 0, err
    notes = json.loads((run_dir / "summary.json").read_text())["notes"]
    assert (
        f"requests.jsonl: skipped a torn last line (line {len(lines)}, {len(torn)} bytes, 5000 of them NUL bytes"
        in (" ".join(notes))
    )


def test_nul_bytes_followed_by_records_are_damage_not_padding(capsys, tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "nulmid", per_class=3, summary=False)
    lines = _records(run_dir)
    (run_dir / "requests.jsonl").write_bytes(("".join(lines[:2])).encode() + b"\0" * 100 + b"\n" + lines[2].encode())
    code, _, err = run_cli(["analyze", run_dir, "--no-report"], capsys)
    assert code == 5 and "Traceback" not in err
    assert "requests.jsonl line 3 starts 101 bytes of NUL padding, yet records follow at line 4" in err
    assert not (run_dir / "summary.json").exists()


def test_a_line_over_the_cap_mid_file_is_a_damaged_line_read_in_bounded_memory(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "long", per_class=3, summary=False)
    lines = _records(run_dir)
    with (run_dir / "requests.jsonl").open("w") as f:
        f.write(lines[0])
        f.write('{"variant": "baseline", "output_text": "')
        chunk = "x" * (1 << 20)
        for _ in range(200):  # a 200 MiB line, then a newline and more records
            f.write(chunk)
        f.write('"}\n')
        f.writelines(lines[1:])
    code, peak_mib, err = _analyze_measured(run_dir)
    assert code == 5, err
    assert peak_mib < 300, f"peak RSS {peak_mib:.0f} MiB: the long line was read whole"
    assert "requests.jsonl line 2 is not a request record: it is" in err and "over the 64 MiB a record may take" in err


# ---- a folder a bench is still writing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "code", "error"),
    [
        (["analyze", "{run}", "--no-report"], 5, "AnalysisError"),
        (["report", "{run}", "--no-table"], 5, "AnalysisError"),
        (["publish", "{run}", "--emf"], 6, "PublishError"),
        (["publish", "{run}", "--endpoint-url", "http://127.0.0.1:9", "--region", "us-east-1"], 6, "PublishError"),
    ],
    ids=["analyze", "report", "publish-emf", "publish"],
)
def test_a_command_that_writes_a_run_folder_a_bench_holds_fails_at_once(
    capsys, tmp_path: Path, monkeypatch, argv, code, error
) -> None:
    run_dir = make_run(tmp_path, "busy", per_class=3)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    before = _listing(run_dir)
    # the bench's lock (bench/local.py claim_run_dir takes the same flock on the folder)
    with folder_lock(run_dir, lambda: AssertionError("the test could not take the lock")):  # type: ignore[arg-type]
        got, _, err = run_cli([a.replace("{run}", str(run_dir)) for a in argv], capsys)
    assert got == code and "Traceback" not in err
    line = [x for x in err.splitlines() if x.strip()][-1]
    assert line.startswith(f"{error}: run folder {run_dir} is in use by another spectrn process right now")
    assert "(fix: wait for it to finish" in line
    assert _listing(run_dir) == before  # nothing written
