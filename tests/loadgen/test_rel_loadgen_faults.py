"""Server faults during a bench, end to end through ``spectrn bench --endpoint ...``.

Policy under test: spectrn never retries a measured request. A retry would hide a server error inside a
latency number; instead each failed request becomes a record with an error class, completed requests
are kept, summary.json counts failures by class, and above ``bench.max_error_rate`` the run is marked
``clean: false`` with a WARNING on the terminal. Endpoints that cannot serve abort before anything is
written, with EndpointError (exit 4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doubles.relhelp import (
    Behaviour,
    FaultyServer,
    assert_summary_matches_records,
    bench_argv,
    last_line,
    measured_error_classes,
    records,
    run_cli,
)

REQUESTS = 30
COMMON = ["--requests", str(REQUESTS), "--max-tokens", "16", "--concurrency", "4", "--prompts", "all"]

SIM_TIME_SCALE = 0.02  # start_sim: fast simulated servers (stall lengths below assume it)


def _bench(capsys, tmp_path: Path, endpoints: dict[str, str], run_id: str, *extra: str) -> tuple[int, str, Path]:
    code, _, err = run_cli(bench_argv(endpoints, tmp_path / "results", run_id, *COMMON, *extra), capsys)
    return code, err, tmp_path / "results" / run_id


def _every_request_has_a_record(run_dir: Path, variants: tuple[str, ...] = ("baseline", "speculative")) -> None:
    recs = records(run_dir)
    for v in variants:
        measured = [r for r in recs if r["variant"] == v and not r.get("warmup")]
        assert sorted(r["index"] for r in measured) == sorted({r["index"] for r in measured})  # no duplicates
        assert len(measured) == REQUESTS, (v, len(measured))


@pytest.mark.parametrize(
    ("faults", "error_class"),
    [
        ({"error_rate": 0.3, "error_status": 500}, "http_500"),
        ({"error_rate": 0.3, "error_status": 503}, "http_503"),
        ({"disconnect_rate": 0.3}, "disconnect"),
        ({"malformed_sse_rate": 0.3}, "malformed_sse"),
    ],
)
def test_simulator_faults_become_error_records_and_an_unclean_run(
    start_sim, capsys, tmp_path, faults, error_class
) -> None:
    base = start_sim(faults=faults, seed=7)
    spec = start_sim(speculative=True)
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": base.base_url, "speculative": spec.base_url}, "f")

    assert code == 0, err  # a run with failures still finishes and reports
    _every_request_has_a_record(run_dir)
    recs = records(run_dir)
    classes = measured_error_classes(recs, "baseline")
    assert set(classes) == {error_class} and 0 < classes[error_class] < REQUESTS
    assert measured_error_classes(recs, "speculative") == {}
    failed = [r for r in recs if r.get("error")]
    assert all(r.get("error_msg") for r in failed)  # the why, not just the class
    if error_class.startswith("http_"):
        assert all(r["status"] == int(error_class[5:]) for r in failed)

    s = assert_summary_matches_records(run_dir)
    assert s.clean is False
    assert any("NOT A CLEAN RUN: baseline error rate" in w and error_class in w for w in s.warnings())
    assert "WARNING:" in err and "NOT A CLEAN RUN" in err and error_class in err
    # completed requests still give statistics for both variants
    assert s.levels[0].variants["baseline"].tpot_s.n == REQUESTS - classes[error_class]
    assert s.levels[0].variants["speculative"].requests.completed == REQUESTS


def test_errors_below_the_threshold_are_counted_but_the_run_stays_clean(start_sim, capsys, tmp_path) -> None:
    base = start_sim(faults={"error_rate": 0.1}, seed=1)
    spec = start_sim(speculative=True)
    eps = {"baseline": base.base_url, "speculative": spec.base_url}
    code, err, run_dir = _bench(capsys, tmp_path, eps, "t", "--set", "bench.max_error_rate=0.5")
    assert code == 0
    s = assert_summary_matches_records(run_dir)
    assert s.levels[0].variants["baseline"].requests.errors > 0
    assert s.clean is True and not any("NOT A CLEAN RUN" in w for w in s.warnings())
    assert "NOT A CLEAN RUN" not in err


def test_no_silent_retries_every_server_error_is_one_record(capsys, tmp_path) -> None:
    with FaultyServer(Behaviour(status_every=3)) as a, FaultyServer(Behaviour()) as b:
        code, err, run_dir = _bench(capsys, tmp_path, {"baseline": a.url, "speculative": b.url}, "r")
        sent = a.b.counter
    assert code == 0
    recs = [r for r in records(run_dir) if r["variant"] == "baseline"]
    assert sent == len(recs)  # the server saw exactly one request per record: nothing was retried
    assert measured_error_classes(recs, "baseline") == {"http_503": sum(1 for r in recs if r.get("error"))}
    assert any(r.get("error_msg") == "overloaded" for r in recs)  # the server's own message is kept
    assert assert_summary_matches_records(run_dir).clean is False


@pytest.mark.parametrize(
    ("behaviour", "error_class", "extra"),
    [
        (Behaviour(hang_every=5), "timeout", ["--set", "bench.timeout_s=1"]),
        (Behaviour(error_event_every=4), "stream_error", []),
        (Behaviour(not_sse_every=4), "not_streaming", []),
    ],
    ids=["stall-past-timeout", "error-event-mid-stream", "json-instead-of-sse"],
)
def test_stream_faults_are_classified(capsys, tmp_path, behaviour, error_class, extra) -> None:
    with FaultyServer(behaviour) as a, FaultyServer(Behaviour()) as b:
        code, err, run_dir = _bench(capsys, tmp_path, {"baseline": a.url, "speculative": b.url}, "s", *extra)
    assert code == 0, err
    _every_request_has_a_record(run_dir)
    recs = records(run_dir)
    classes = measured_error_classes(recs, "baseline")
    assert set(classes) == {error_class}, classes
    s = assert_summary_matches_records(run_dir)
    assert s.clean is False and error_class in err
    if error_class == "timeout":
        hung = [r for r in recs if r.get("error") == "timeout"]
        assert all(r["chunk_times"] and "e2e" not in r for r in hung)  # partial stream kept, no fake e2e


def test_never_healthy_endpoint_aborts_before_the_run(start_sim, capsys, tmp_path) -> None:
    compiling = start_sim(startup_delay_s=3600)
    ok = start_sim(speculative=True)
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": compiling.base_url, "speculative": ok.base_url}, "h")
    assert code == 4
    assert last_line(err).startswith("EndpointError: endpoint baseline")
    assert "/health answered HTTP 503" in err and "(fix:" in err
    assert not run_dir.exists()  # nothing half-written


def test_unreachable_endpoint_aborts_with_exit_4_and_writes_nothing(start_sim, capsys, tmp_path) -> None:
    from spectrn.runtimes.launch import free_port

    ok = start_sim()
    dead = f"http://127.0.0.1:{free_port()}"
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": ok.base_url, "speculative": dead}, "u")
    assert code == 4
    line = last_line(err)
    assert line.startswith("EndpointError: endpoint speculative") and "unreachable" in line and "(fix:" in line
    assert not run_dir.exists()


@pytest.mark.parametrize("metrics", ["missing", "garbled", "error"])
def test_missing_or_garbled_metrics_give_acceptance_not_reported(capsys, tmp_path, metrics) -> None:
    with FaultyServer(Behaviour(metrics=metrics)) as a, FaultyServer(Behaviour(metrics=metrics)) as b:
        code, err, run_dir = _bench(capsys, tmp_path, {"baseline": a.url, "speculative": b.url}, "m")
    assert code == 0, err
    s = assert_summary_matches_records(run_dir)
    acc_s = s.levels[0].variants["speculative"].acceptance
    # no counters: never a made-up zero from them; the stream (one token per event here) is the headline
    assert acc_s is not None and acc_s.counters is None and acc_s.source == "stream"
    assert acc_s.stream is not None and acc_s.stream.steps > 0
    assert any("acceptance not reported" in n for n in s.notes)
    acc = json.loads((run_dir / "acceptance.json").read_text())
    assert all(v is None for v in acc.values())
    assert s.levels[0].variants["speculative"].requests.completed == REQUESTS


def test_well_formed_metrics_give_acceptance(capsys, tmp_path) -> None:
    """The control for the test above: the same server with a good /metrics does report acceptance."""
    with FaultyServer(Behaviour()) as a, FaultyServer(Behaviour()) as b:
        code, err, run_dir = _bench(capsys, tmp_path, {"baseline": a.url, "speculative": b.url}, "g")
    assert code == 0, err
    acc = json.loads((run_dir / "acceptance.json").read_text())
    assert acc["speculative@c4"]["rate"] == pytest.approx(6 / 9)


def test_engine_stalls_shorter_than_the_timeout_are_latency_not_errors(start_sim, capsys, tmp_path) -> None:
    base = start_sim(faults={"stall_rate": 0.05, "stall_s": 5.0}, seed=3)  # 0.1 s stalls at time scale 0.02
    spec = start_sim(speculative=True)
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": base.base_url, "speculative": spec.base_url}, "sl")
    assert code == 0, err
    s = assert_summary_matches_records(run_dir)
    assert s.clean is True and s.levels[0].variants["baseline"].requests.errors == 0
    # the stalls are in the latency numbers, where they belong
    assert s.levels[0].variants["baseline"].chunk_latency_s.p99 >= 0.09


def test_engine_stalls_past_the_timeout_are_timeouts(start_sim, capsys, tmp_path) -> None:
    base = start_sim(faults={"stall_rate": 0.1, "stall_s": 50.0}, seed=3)  # 1 s stalls at time scale 0.02
    spec = start_sim(speculative=True)
    eps = {"baseline": base.base_url, "speculative": spec.base_url}
    code, err, run_dir = _bench(capsys, tmp_path, eps, "st", "--set", "bench.timeout_s=0.4")
    assert code == 0, err
    _every_request_has_a_record(run_dir)
    classes = measured_error_classes(records(run_dir), "baseline")
    assert set(classes) == {"timeout"} and classes["timeout"] > 0
    s = assert_summary_matches_records(run_dir)
    assert s.clean is False and "timeout" in err


def test_local_servers_that_fail_to_start_abort_with_their_own_reason(capsys, tmp_path) -> None:
    argv = ["bench", "--local", "--runtime", "sim", "--set", "sim.preset=nosuch", "--out-dir", str(tmp_path)]
    argv += ["--run-id", "x"]
    code, _, err = run_cli(argv, capsys)
    assert code == 8
    assert "SimError: simulator baseline server (http://127.0.0.1:" in err
    assert "exited with code 8 during start-up" in err
    assert "unknown simulator preset 'nosuch'" in err  # the server's log tail says why
    assert not (tmp_path / "x" / "requests.jsonl").exists()
    assert (tmp_path / "x" / "servers" / "sim-baseline.log").exists()  # the logs are kept for diagnosis


def test_a_variant_where_every_request_fails_is_a_failed_command_with_everything_kept(
    start_sim, capsys, tmp_path
) -> None:
    base = start_sim(faults={"error_rate": 1.0, "error_status": 503})
    spec = start_sim(speculative=True)
    code, err, run_dir = _bench(capsys, tmp_path, {"baseline": base.base_url, "speculative": spec.base_url}, "all")
    assert code == 4
    assert last_line(err).startswith("BenchError: no successful request on baseline") and "(fix:" in last_line(err)
    assert "baseline: http_503 e.g." in err  # one example of the server's message per error class
    _every_request_has_a_record(run_dir)
    s = assert_summary_matches_records(run_dir)  # written before the command failed
    assert s.clean is False and s.levels[0].variants["baseline"].requests.error_classes == {"http_503": REQUESTS}


def test_an_unclean_run_is_flagged_by_every_command_that_reports_it(capsys, tmp_path) -> None:
    """analyze, report and publish print the WARNING; the HTML, Markdown and dashboard say NOT CLEAN too."""
    with FaultyServer(Behaviour(status_every=3)) as a, FaultyServer(Behaviour()) as b:
        code, _, run_dir = _bench(capsys, tmp_path, {"baseline": a.url, "speculative": b.url}, "uc")
    assert code == 0
    for argv in (["analyze", run_dir, "--no-report"], ["report", run_dir], ["publish", run_dir, "--dry-run"]):
        code, _, err = run_cli(argv, capsys)
        assert code == 0, err
        assert "WARNING: NOT A CLEAN RUN: baseline error rate" in " ".join(err.split()), argv[0]
    assert "NOT A CLEAN RUN" in (run_dir / "report" / "index.html").read_text()
    assert "NOT A CLEAN RUN" in (run_dir / "report" / "summary.md").read_text()
    code, out, _ = run_cli(["dashboard", run_dir, "--print"], capsys)
    assert code == 0 and "not clean" in out
