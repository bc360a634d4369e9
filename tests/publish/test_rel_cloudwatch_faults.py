"""CloudWatch failing part-way through ``spectrn publish``: throttling, outages, then a resumed publish.

A real local CloudWatch (moto) sits behind a proxy that refuses chosen PutMetricData calls and records the
content of every call it forwards. Behaviour under test: throttling is retried by botocore's adaptive mode
(bounded by ``--max-attempts``) and, when it passes, the publish completes with every batch sent exactly once;
when it does not pass, ``spectrn publish`` exits 6 saying what was and was not sent, ``publish.json`` records
the accepted batches, and a re-run sends only the rest. Ctrl-C lets the call in flight finish and be recorded,
so the re-run never sends a batch twice; only SIGKILL can lose the record of the one call in flight.
Nothing on disk is lost either way (publishing happens after the run is saved).
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

from doubles.cwfakes import REGION, CloudWatchProxy
from doubles.relhelp import Behaviour, FaultyServer, bench_argv, run_cli

SPECTRN = Path(sys.executable).with_name("spectrn")


@pytest.fixture
def moto(moto_url: str) -> str:
    """The session's moto server, emptied, with dummy credentials (tests/publish/conftest.py)."""
    return moto_url


@pytest.fixture
def run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A real run folder from `spectrn bench` against two well-behaved local servers."""
    with FaultyServer(Behaviour(tokens=12)) as a, FaultyServer(Behaviour(tokens=12)) as b:
        argv = bench_argv({"baseline": a.url, "speculative": b.url}, tmp_path / "results", "cw")
        code, _, err = run_cli([*argv, "--requests", "24", "--prompts", "all"], capsys)
    assert code == 0, err
    return tmp_path / "results" / "cw"


def _publish(run_dir: Path, url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    argv = ["publish", str(run_dir), "--endpoint-url", url, "--region", REGION, "--batch-size", "10", *extra]
    code, _, err = run_cli(argv, capsys)
    return code, " ".join(err.split())


def _planned_calls(run_dir: Path) -> int:
    from spectrn.publish import datums
    from spectrn.run.folder import RunFolder

    return len(datums.batch_datums(datums.build_metric_datums(RunFolder.open(run_dir)).datums, max_datums=10))


def test_throttling_part_way_is_retried_and_every_batch_lands_once(moto, run_dir, capsys) -> None:
    # calls count from 0: calls 1 and 2 are the second batch twice, call 4 the third batch once. The run's batch
    # count follows its measured values (equal values merge), so the pattern must fit the smallest run: 3 batches
    throttle = {1, 2, 4}
    with CloudWatchProxy(moto, lambda n: (400, "Throttling", "Rate exceeded") if n in throttle else None) as p:
        code, err = _publish(run_dir, p.url, capsys, "--max-attempts", "4")
    assert code == 0, err
    total = _planned_calls(run_dir)
    assert total >= 3 and p.forwarded == total and p.calls == total + len(throttle)
    state = json.loads((run_dir / "publish.json").read_text())
    (target,) = state["targets"].values()
    assert len(target["sent"]) == total


def test_persistent_throttling_stops_with_exit_6_and_a_rerun_sends_only_the_rest(moto, run_dir, capsys) -> None:
    outage = {"on": True}

    def decide(n: int) -> tuple[int, str, str] | None:
        return (400, "Throttling", "Rate exceeded") if outage["on"] and n >= 2 else None

    with CloudWatchProxy(moto, decide) as p:
        code, err = _publish(run_dir, p.url, capsys, "--max-attempts", "3")
        assert code == 6, err
        assert err.startswith("PublishError:") or "PublishError:" in err
        assert "Throttling" in err and "Sent: 2/" in err and "re-run `spectrn publish" in err
        assert p.calls == 2 + 3  # the refused batch was tried --max-attempts times, then the publish stopped
        state = json.loads((run_dir / "publish.json").read_text())
        (target,) = state["targets"].values()
        assert len(target["sent"]) == 2

        outage["on"] = False
        before = p.forwarded
        code, err = _publish(run_dir, p.url, capsys, "--max-attempts", "3")
        assert code == 0, err
        assert p.forwarded - before == _planned_calls(run_dir) - 2  # only the batches not sent before
    assert (run_dir / "requests.jsonl").exists() and (run_dir / "summary.json").exists()  # the run is untouched


def test_server_errors_exhaust_retries_and_name_the_cause(moto, run_dir, capsys) -> None:
    with CloudWatchProxy(moto, lambda n: (500, "InternalFailure", "simulated outage") if n >= 1 else None) as p:
        code, err = _publish(run_dir, p.url, capsys, "--max-attempts", "2")
    assert code == 6
    assert "InternalFailure" in err and "Sent: 1/" in err and p.calls == 1 + 2


def _stop_mid_publish(run_dir: Path, p: CloudWatchProxy, sig: signal.Signals) -> tuple[int, str]:
    """`spectrn publish` in a subprocess through a slow proxy, sent ``sig`` once two calls were accepted."""

    def slow(n: int) -> None:
        time.sleep(0.4)  # a slow CloudWatch, so the signal lands while a call is in flight
        return None

    p.decide = slow
    argv = [str(SPECTRN), "publish", str(run_dir), "--endpoint-url", p.url, "--region", REGION]
    proc = subprocess.Popen(
        [*argv, "--batch-size", "10", "--no-dashboard"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 60
    while p.forwarded < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    time.sleep(1.0)  # a call in flight at the signal still reaches CloudWatch through the slow proxy
    return proc.returncode, err.decode()


def _recorded(run_dir: Path) -> int:
    state = json.loads((run_dir / "publish.json").read_text())  # whole JSON: written atomically
    (target,) = state["targets"].values()
    return len(target["sent"])


@pytest.mark.slow
def test_ctrl_c_mid_publish_then_a_rerun_never_sends_a_batch_twice(moto, run_dir, capsys) -> None:
    """SIGINT while a call is in flight: the call finishes and is recorded, the publish stops (exit 130), and
    the re-run sends exactly the batches not sent: every batch reaches CloudWatch exactly once."""
    total = _planned_calls(run_dir)
    with CloudWatchProxy(moto, lambda n: None) as p:
        code, err = _stop_mid_publish(run_dir, p, signal.SIGINT)
        first = p.forwarded
        assert 2 <= first < total, "the publish was not stopped part-way"
        assert code == 130 and "Interrupted" in err
        assert _recorded(run_dir) == first  # the call in flight at Ctrl-C was accepted and recorded

        p.decide = lambda n: None
        code, err2 = _publish(run_dir, p.url, capsys, "--no-dashboard")
        assert code == 0, err2
    assert p.forwarded == total and len(set(p.batches)) == total  # each batch exactly once, none twice
    assert _recorded(run_dir) == total


@pytest.mark.slow
def test_sigterm_mid_publish_is_exactly_once_like_ctrl_c(moto, run_dir, capsys) -> None:
    """SIGTERM (``kill``, a pod deletion) while a call is in flight: like Ctrl-C, the call finishes and is
    recorded, the publish stops (exit 143, ``Terminated``), and the re-run sends each other batch exactly once."""
    total = _planned_calls(run_dir)
    with CloudWatchProxy(moto, lambda n: None) as p:
        code, err = _stop_mid_publish(run_dir, p, signal.SIGTERM)
        first = p.forwarded
        assert 2 <= first < total, "the publish was not stopped part-way"
        assert code == 143 and err.splitlines()[-1].startswith("Terminated: stopped by SIGTERM during publish"), err
        assert _recorded(run_dir) == first  # the call in flight at SIGTERM was accepted and recorded

        p.decide = lambda n: None
        code, err2 = _publish(run_dir, p.url, capsys, "--no-dashboard")
        assert code == 0, err2
    assert p.forwarded == total and len(set(p.batches)) == total  # each batch exactly once, none twice
    assert _recorded(run_dir) == total


@pytest.mark.slow
def test_sigkill_mid_publish_loses_nothing_and_repeats_at_most_the_call_in_flight(moto, run_dir, capsys) -> None:
    """SIGKILL cannot be handled: a call CloudWatch accepted in the instant before the kill may miss its record
    (PutMetricData has no idempotency token), and the re-run sends that one batch again. Nothing else repeats
    and nothing is lost."""
    total = _planned_calls(run_dir)
    with CloudWatchProxy(moto, lambda n: None) as p:
        code, _ = _stop_mid_publish(run_dir, p, signal.SIGKILL)
        first = p.forwarded
        assert 2 <= first < total, "the publish was not stopped part-way"
        assert code == -signal.SIGKILL
        recorded = _recorded(run_dir)
        assert first - 1 <= recorded <= first  # every accepted call is recorded but the one in flight

        p.decide = lambda n: None
        code, err2 = _publish(run_dir, p.url, capsys, "--no-dashboard")
        assert code == 0, err2
        assert p.forwarded - first == total - recorded  # only what was not recorded as sent
    repeated = len(p.batches) - len(set(p.batches))
    assert len(set(p.batches)) == total  # nothing lost
    assert repeated == first - recorded  # repeated: exactly the unrecorded call in flight, if any
    assert _recorded(run_dir) == total
