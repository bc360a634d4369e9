"""`spectrn publish` and `spectrn dashboard` from the command line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import support
from doubles.cwfakes import REGION
from doubles.runfactory import make_run
from spectrn.publish import dashboard, datums, publisher
from spectrn.run.folder import RunFolder


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code, out, err = support.run_cli(argv, capsys)
    return code, out, " ".join(err.split())  # messages wrap: compare them as one line


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path, per_class=2, start=time.time() - 3600, summary=False)


def test_without_credentials_publish_explains_and_points_to_emf(
    run_dir: Path, no_aws_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["publish", str(run_dir)], capsys)
    assert code == 6
    assert "PublishError: cannot publish to CloudWatch: no AWS credentials found" in err
    assert f"spectrn publish --emf {run_dir}" in err and "metrics.emf.jsonl" in err
    assert not (run_dir / "publish.json").exists()

    code, out, _ = run_cli(["publish", str(run_dir), "--emf"], capsys)
    assert code == 0 and f"wrote {run_dir / 'metrics.emf.jsonl'}" in out
    code, _, err = run_cli(["publish", str(run_dir)], capsys)
    assert code == 6 and f"the same metrics are in {run_dir / 'metrics.emf.jsonl'}" in err


def test_without_region_publish_says_how_to_set_one(
    run_dir: Path, no_aws_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code, _, err = run_cli(["publish", str(run_dir)], capsys)
    assert code == 6 and "no AWS region configured" in err and "--region" in err


def test_dry_run_sends_nothing(run_dir: Path, no_aws_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["publish", str(run_dir), "--dry-run", "--batch-size", "7"], capsys)
    plan = datums.build_metric_datums(RunFolder.open(run_dir))
    calls = len(datums.batch_datums(plan.datums, max_datums=7))
    assert code == 0
    assert f"would send {calls} PutMetricData calls to namespace Spectrn: {len(plan.datums)} datums" in out
    assert not (run_dir / "publish.json").exists()


def test_dashboard_print_is_a_valid_body(run_dir: Path, no_aws_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["dashboard", str(run_dir), "--print", "--region", "eu-west-1"], capsys)
    assert code == 0
    body = dashboard.validate_dashboard(json.loads(out))
    assert body["widgets"][1]["properties"]["region"] == "eu-west-1"


def test_dashboard_command_puts_it(
    run_dir: Path, moto_url: str, cw_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["dashboard", str(run_dir), "--endpoint-url", moto_url, "--prefix", "team"], capsys)
    assert code == 0 and f"dashboard team-run-1 in {REGION}" in out
    dashboard.validate_dashboard(cw_client.get_dashboard(DashboardName="team-run-1")["DashboardBody"])


def test_missing_run_folder_is_an_analysis_error(
    tmp_path: Path, aws_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["publish", str(tmp_path / "nope"), "--endpoint-url", "http://127.0.0.1:9"], capsys)
    assert code == 5 and "does not exist" in err


def test_sweep_cells_share_one_dashboard(
    tmp_path: Path, moto_url: str, cw_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from spectrn.configuration.config import SpectrnConfig

    cells = []
    for draft, window in (("qwen3-0.6b", 5), ("qwen3-1.7b", 7)):
        cfg = SpectrnConfig(draft=draft, num_speculative_tokens=window).model_dump(mode="json")
        cell = make_run(
            tmp_path / f"{draft}-k{window}",
            f"cell-{window}",
            per_class=2,
            config=cfg,
            summary=False,
            start=time.time() - 3600,
        )
        cells.append(cell)
        code, _, err = run_cli(
            ["publish", str(cell), "--endpoint-url", moto_url, "--run-id", "sweep-1", "--no-dashboard"], capsys
        )
        assert code == 0, err
    code, out, _ = run_cli(["dashboard", *map(str, cells), "--endpoint-url", moto_url, "--run-id", "sweep-1"], capsys)
    assert code == 0 and "dashboard spectrn-sweep-1" in out
    body = dashboard.validate_dashboard(cw_client.get_dashboard(DashboardName="spectrn-sweep-1")["DashboardBody"])
    tpot = next(w for w in body["widgets"] if w["properties"].get("title") == "all · c4 · TPOT (s)")
    labels = {m[-1]["label"] for m in tpot["properties"]["metrics"]}
    assert {"qwen3-0.6b/k5 speculative p50", "qwen3-1.7b/k7 speculative p50", "qwen3-1.7b/k7 baseline p50"} <= labels
    pages = cw_client.get_paginator("list_metrics").paginate(Namespace="Spectrn")
    existing = {
        (m["MetricName"], tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"])))
        for page in pages
        for m in page["Metrics"]
    }
    for w in body["widgets"][1:]:
        for entry in w["properties"]["metrics"]:
            if isinstance(entry[0], dict):
                continue
            parts = entry[:-1]
            assert (parts[1], tuple(sorted(zip(parts[2::2], parts[3::2], strict=True)))) in existing, entry


def test_publish_run_without_a_sink_checks_credentials_first(run_dir: Path, no_aws_env: None) -> None:
    """The path `spectrn bench --publish` takes: publish_run(run_dir, console=...) with no sink."""
    from spectrn.errors import PublishError

    with pytest.raises(PublishError) as e:
        publisher.publish_run(run_dir)
    assert "no AWS credentials found" in str(e.value) and str(run_dir / "metrics.emf.jsonl") in str(e.value)
    assert not (run_dir / "publish.json").exists()
