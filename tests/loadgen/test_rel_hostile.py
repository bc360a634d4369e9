"""Hostile and broken servers, and limits of the machine the client runs on, end to end through the CLI.

Each test runs ``spectrn bench`` against ``tests/hostile.py`` servers (or under a lowered resource limit in a
child process) and checks the documented outcome: a classified error record per request and a finished run,
or one ``Type: cause (fix: ...)`` line with its exit code; never a traceback, and never a secret on disk.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from doubles.relhelp import (
    assert_summary_matches_records,
    bench_argv,
    last_line,
    measured_error_classes,
    records,
    run_cli,
)
from hostile import PLANTED, TERMINAL_ESCAPES, HostileServer

REQUESTS = 8
COMMON = ["--requests", str(REQUESTS), "--max-tokens", "12", "--concurrency", "2", "--prompts", "all"]


def _bench(capsys, tmp_path: Path, endpoints: dict[str, str], run_id: str, *extra: str) -> tuple[int, str, Path]:
    code, _, err = run_cli(bench_argv(endpoints, tmp_path / "results", run_id, *COMMON, *extra), capsys)
    return code, err, tmp_path / "results" / run_id


@pytest.mark.parametrize(
    ("mode", "error_class"),
    [
        ("tokens_string", "bad_response"),
        ("tokens_nan", "bad_response"),
        ("usage_list", "bad_response"),
        ("tokens_going_down", "bad_response"),
        ("event_not_object", "malformed_sse"),
        ("gzip", "bad_response"),
        ("redirect_other_host", "redirect"),
        ("no_separators", "response_too_large"),
        ("bad_http", "client_error"),
    ],
)
def test_hostile_responses_are_classified_records_in_a_finished_run(
    hostile, capsys, tmp_path, mode, error_class
) -> None:
    bad, good = hostile(mode), hostile("token_ids")
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": bad.url, "speculative": good.url}, "h")
    assert code == 4, err  # every baseline request failed: a failed command, with everything written
    assert "Traceback" not in err
    assert last_line(err).startswith("BenchError: no successful request on baseline")
    recs = records(run_dir)
    assert measured_error_classes(recs, "baseline") == {error_class: REQUESTS}
    assert measured_error_classes(recs, "speculative") == {}
    assert_summary_matches_records(run_dir)
    assert PLANTED not in (run_dir / "requests.jsonl").read_text()


def test_terminal_escapes_in_server_text_are_shown_as_data(hostile, capsys, tmp_path) -> None:
    """A 500 whose message would clear the screen, retitle the window, plant a hyperlink and feed Rich markup:
    through the real CLI and HTTP, the terminal gets none of those bytes, the error is one line, the message
    is kept as data in the record."""
    bad, good = hostile("terminal_escapes"), hostile("token_ids")
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": bad.url, "speculative": good.url}, "esc")
    assert code == 4 and "Traceback" not in err and "MarkupError" not in err, err
    assert "\x1b" not in err and "\x07" not in err and "\x9b" not in err  # no escape, bell or CSI reached the terminal
    assert "baseline: http_500 e.g. \\x1b[2J\\x1b]0;owned\\x07" in err  # shown, escaped, as text
    assert "[/] [bold red]x" in err  # markup printed as written, not interpreted
    assert last_line(err).startswith("BenchError: no successful request on baseline")
    recs = [r for r in records(run_dir) if r["variant"] == "baseline" and not r.get("warmup")]
    assert measured_error_classes(recs, "baseline") == {"http_500": REQUESTS}
    assert all("owned" in r["error_msg"] for r in recs)  # the server's words are kept, as data
    assert TERMINAL_ESCAPES not in (run_dir / "requests.jsonl").read_text()  # JSON escapes the control bytes


def test_counting_sources_are_in_the_records_and_in_run_json(hostile, capsys, tmp_path) -> None:
    fork, plain = hostile("continuous_usage"), hostile("final_usage_only")
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": fork.url, "speculative": plain.url}, "src")
    assert code == 0, err
    recs = [r for r in records(run_dir) if not r.get("warmup")]
    assert {r["token_source"] for r in recs if r["variant"] == "baseline"} == {"usage"}
    assert {r["token_source"] for r in recs if r["variant"] == "speculative"} == {"text"}
    run = json.loads((run_dir / "run.json").read_text())
    assert run["token_sources"] == {"baseline": {"usage": REQUESTS + 2}, "speculative": {"text": REQUESTS + 2}}
    assert any("speculative: 10 of 10 records counted tokens from text length" in n for n in run["notes"])


def test_token_ids_disagreeing_with_usage_is_a_warning_on_the_record_and_in_run_json(hostile, capsys, tmp_path) -> None:
    odd, good = hostile("ids_disagree"), hostile("token_ids")
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": odd.url, "speculative": good.url}, "dis")
    assert code == 0, err
    assert all("token_warning" in r for r in records(run_dir) if r["variant"] == "baseline")
    notes = json.loads((run_dir / "run.json").read_text())["notes"]
    assert any("baseline: 10 record(s) where token_ids and usage.completion_tokens disagree" in n for n in notes)


def test_a_models_answer_that_is_not_an_object_is_an_endpoint_error(hostile, capsys, tmp_path) -> None:
    bad, good = hostile("models_not_object"), hostile("token_ids")
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": bad.url, "speculative": good.url}, "mo")
    assert code == 4 and "Traceback" not in err
    line = last_line(err)
    assert line.startswith("EndpointError: endpoint baseline") and "not a model list" in line and "(fix:" in line
    assert not run_dir.exists()


def test_a_tokenize_answer_that_is_not_an_object_gives_an_estimated_length_note(hostile, capsys, tmp_path) -> None:
    bad = hostile("tokenize_not_object")
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": bad.url}, "tk", "--input-tokens", "20")
    assert code == 0, err
    notes = json.loads((run_dir / "run.json").read_text())["notes"]
    assert any("ESTIMATED at 4 characters/token" in n and "/tokenize answer unusable" in n for n in notes)


def _child_bench(
    tmp_path: Path, url: str, run_id: str, limit: tuple[int, int, int], *extra: str
) -> subprocess.CompletedProcess[str]:
    res, soft, hard = limit

    def lower() -> None:
        resource.setrlimit(res, (soft, hard))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the size limit fails with EFBIG instead

    argv = [sys.executable, "-m", "spectrn", *bench_argv({"baseline": url}, tmp_path / "results", run_id, *extra)]
    env = {k: v for k, v in os.environ.items() if k != "SPECTRN_CONFIG"}
    return subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=lower, env=env, check=False
    )


@pytest.mark.slow
def test_too_few_file_descriptors_for_the_concurrency_is_refused_before_the_run(tmp_path) -> None:
    with HostileServer("token_ids") as s:
        out = _child_bench(tmp_path, s.url, "fd", (resource.RLIMIT_NOFILE, 60, 60), "--concurrency", "200")
    assert out.returncode == 4, out.stderr
    line = last_line(out.stderr)
    assert line.startswith("BenchError: this run needs about 264 open files") and "ulimit -n" in line
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "results" / "fd").exists()


@pytest.mark.slow
def test_a_results_file_that_cannot_grow_is_a_bench_error_naming_it_and_the_run_is_interrupted(tmp_path) -> None:
    """The file-size limit (``ulimit -f``) stands in for a full disk: the write fails the same way (an
    OSError on write), with EFBIG instead of ENOSPC."""
    with HostileServer("token_ids") as s:
        out = _child_bench(
            tmp_path, s.url, "big", (resource.RLIMIT_FSIZE, 40_000, resource.RLIM_INFINITY), "--requests", "400"
        )
    assert out.returncode == 4, out.stderr
    line = last_line(out.stderr)
    assert line.startswith("BenchError: cannot write ") and "requests.jsonl: File too large" in line, line
    assert "Traceback" not in out.stderr
    run = json.loads((tmp_path / "results" / "big" / "run.json").read_text())
    assert run["interrupted"] is True and "File too large" in run["stop_reason"]


def test_credentials_in_urls_never_reach_disk_or_the_terminal(hostile, capsys, tmp_path) -> None:
    """An endpoint URL with user:password@, a server that echoes a URL with credentials in its error, and one
    that redirects to a URL with credentials: none of it is stored or shown."""
    echo, redirect = hostile("error_echoes_credentials"), hostile("redirect_other_host")
    base = echo.url.replace("http://", f"http://bench:{PLANTED}@") + "/v1"
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": base, "speculative": redirect.url}, "sec")
    assert code == 4, err
    assert PLANTED not in err
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"run.json", "requests.jsonl", "summary.json"} <= {p.name for p in files}
    for p in files:
        assert PLANTED not in p.read_text(encoding="utf-8", errors="replace"), p.name
    run = json.loads((run_dir / "run.json").read_text())
    assert run["endpoints"]["baseline"].startswith("http://bench:***@127.0.0.1:")
    recs = records(run_dir)
    assert any("http://admin:***@10.0.0.1:9000" in (r.get("error_msg") or "") for r in recs)
    assert any("http://admin:***@elsewhere.invalid:8000" in (r.get("error_msg") or "") for r in recs)
