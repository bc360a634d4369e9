"""What reaches stdout and stderr through the real CLI: -o json/yaml documents alone on stdout, tables and
sentences never cut when the output is not a terminal, progress with a time left."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from spectrn.cli.main import main
from spectrn.run.summary import Summary

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "publish"))
from doubles.runfactory import make_run  # noqa: E402

Run = Callable[..., tuple[int, str, str]]
FAST = ["--time-scale", "0.05", "--requests", "4", "--max-tokens", "12", "--prompts", "all"]


@pytest.fixture(autouse=True)
def _not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # no width given: the output is not a terminal


@pytest.fixture(scope="module")
def bench_json(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One local bench on the simulator with -o json (stdout and stderr captured by hand: module scope)."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("bench")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        main(["bench", "--local", *FAST, "--run-id", "j1", "--out-dir", str(root), "-o", "json"])
    assert e.value.code == 0, err.getvalue()
    return root / "j1", out.getvalue(), err.getvalue()


def test_bench_json_is_the_summary_alone_on_stdout(bench_json: tuple[Path, str, str]) -> None:
    run_dir, out, err = bench_json
    summary = Summary.model_validate(json.loads(out))  # stdout is exactly one document: the Summary
    assert summary.run_id == "j1" and summary.model_dump(mode="json") == json.loads(
        (run_dir / "summary.json").read_text()
    )
    assert f"results: {run_dir}" in err and "speculative: " in err  # progress and file locations on stderr
    assert "TPOT ms" not in out + err  # no table in json mode


def test_analyze_yaml_and_table_output(bench_json: tuple[Path, str, str], cli: Run) -> None:
    run_dir = bench_json[0]
    code, out, err = cli("analyze", str(run_dir), "--no-report", "-o", "yaml")
    assert code == 0
    assert Summary.model_validate(yaml.safe_load(out)).run_id == "j1"
    code, out, err = cli("analyze", str(run_dir), "--no-report")
    # The table is the result: on stdout (`spectrn analyze R > table.txt` keeps it); the folder on stderr.
    assert code == 0 and "TPOT ms" in out and "speedup [95% CI]" in out and "output equivalence" in out
    assert "TPOT ms" not in err and "speedup [95% CI]" not in err and f"results: {run_dir}" in err
    assert "…" not in out  # not a terminal: no column, header or value cut
    title = next(line for line in out.splitlines() if line.startswith("spectrn j1"))
    assert title.endswith("(p50; speedup with 95% CI)")  # the title is one whole line


def test_compare_outputs(bench_json: tuple[Path, str, str], cli: Run, tmp_path: Path) -> None:
    a = bench_json[0]
    b = make_run(tmp_path, "other-run", per_class=4)
    code, out, _ = cli("compare", str(a), str(b), "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["a"]["run_id"] == "j1" and doc["b"]["run_id"] == "other-run"
    code, alias, _ = cli("compare", str(a), str(b), "--json")
    assert code == 0 and json.loads(alias) == doc  # --json stays as an alias of -o json
    code, out, _ = cli("compare", str(a), str(b), "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == doc
    code, out, err = cli("compare", str(a), str(b))
    assert code == 0 and "B - A" in out and "…" not in out + err
    assert any(line.startswith("WARNING: the runs differ in runtime") for line in out.splitlines())


def test_bench_at_real_time_shows_time_left(cli: Run, tmp_path: Path) -> None:
    code, out, err = cli(
        "bench", "--local", "--time-scale", "1.0", "--requests", "3", "--max-tokens", "6", "--prompts", "structured",
        "--run-id", "eta", "--out-dir", str(tmp_path / "r"), "--no-report",
    )  # fmt: skip
    assert code == 0, err
    assert "…" not in out and "TPOT ms" in out and "TPOT ms" not in err  # the table, whole, on stdout
    for variant in ("baseline", "speculative"):
        lines = [line for line in err.splitlines() if line.startswith(f"{variant}: ")]
        assert any(re.search(r"\d+/5 requests \(\d+%\), elapsed \S+, about \S+ left$", line) for line in lines), err
        assert lines[-1].startswith(f"{variant}: 5/5 requests (100%)") and lines[-1].endswith("done")


def test_sweep_prints_whole_sentences_and_a_json_document(cli: Run, tmp_path: Path) -> None:
    root = tmp_path / "s"
    args = ["sweep", "--local", "--windows", "3,5", *FAST, "--out-dir", str(root), "--sweep-id", "sw", "--no-report"]
    code, out, err = cli(*args, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["sweep_id"] == "sw" and doc["recommendations"]
    assert "[1/2] qwen3-1.7b window 3 at c4" in err and "[2/2] qwen3-1.7b window 5 at c4" in err  # each cell
    code, out, err = cli(*args, "--resume")  # nothing left to run: the table view of the same analysis
    assert code == 0 and "ran 0 cell(s)" in err and "ran 0 cell(s)" not in out  # progress on stderr
    assert "…" not in out
    lines = out.splitlines()  # the tables and recommendations are the result: stdout
    for rec in doc["recommendations"]:  # every recommendation on one line, whole
        assert f"  {rec['text']}" in lines, rec["text"]


def test_machine_readable_elsewhere(cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = make_run(tmp_path, "pub", per_class=3)
    code, out, err = cli("publish", str(run_dir), "--dry-run", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["calls"] >= 1 and doc["run_id"] == "pub"
    code, out, _ = cli("sim", "expect", "--prompt", "1, 2, 3, 4, 5, 6", "-o", "yaml")
    assert code == 0 and 0 < yaml.safe_load(out)["expected_acceptance_rate"] <= 1
    code, out, _ = cli("sim", "expect", "--prompt", "1, 2, 3, 4, 5, 6")
    assert code == 0 and "speedup" in json.loads(out)  # json stays sim expect's default
    code, out, _ = cli("sim", "expect", "--prompt", "1, 2, 3, 4, 5, 6", "-o", "table")
    assert code == 0 and "expected_tokens_per_step" in out

    from doubles.kube_fake import FakeKube

    fake = FakeKube(context="kind-spectrn")
    monkeypatch.setattr("spectrn.kube.client.connect", lambda **kw: fake)
    code, out, err = cli("status", "--set", "runtime=sim", "--set", "resources_mode=device-plugin", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["namespace"] == "spectrn" and [s["phase"] for s in doc["services"]] == ["Absent", "Absent"]


def test_loadgen_writes_where_it_is_told(cli: Run, tmp_path: Path, hostile: Callable[[str], object]) -> None:
    server = hostile("token_ids")
    ep = f"baseline={server.url}"  # type: ignore[attr-defined]
    small = ["--set", "bench.requests=2", "--set", "bench.warmup=0", "--set", "bench.concurrency=[1]"]
    code, out, err = cli("loadgen", "--endpoint", ep, *small, "--run-id", "r1", "--out", str(tmp_path / "x" / "any"))
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["out"] == str(tmp_path / "x" / "any")  # --out need not end in the run id
    assert json.loads((tmp_path / "x" / "any" / "run.json").read_text())["run_id"] == "r1"
    code, out, err = cli("loadgen", "--endpoint", ep, *small, "--out", str(tmp_path / "y" / "r2"))
    assert code == 0 and (tmp_path / "y" / "r2" / "requests.jsonl").exists()  # run id: the folder's name
    code, out, err = cli("loadgen", "--endpoint", ep, *small, "--run-id", "r3", "--out-dir", str(tmp_path / "z"))
    assert code == 0 and (tmp_path / "z" / "r3" / "requests.jsonl").exists()
    assert "baseline: 2/2 requests (100%)" in err  # plain progress lines off a terminal


def test_deploy_wait_shows_readiness_with_time_left(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kube"))
    from doubles.kube_fake import FakeKube
    from doubles.kubehelp import add_slices

    fake = FakeKube(context="kind-spectrn")
    add_slices(fake)
    monkeypatch.setattr("spectrn.kube.client.connect", lambda **kw: fake)
    code, _, err = cli("deploy", "--set", "runtime=sim", "--set", "resources_mode=device-plugin")
    assert code == 0, err
    ready = [line for line in err.splitlines() if line.startswith("ready: ")]
    d = r"[\d.]+(s| min| h)"
    assert re.fullmatch(rf"ready: 0/2 services, elapsed {d}, about {d} left of the {d} startup budget", ready[0])
    assert re.fullmatch(rf"ready: 2/2 services, elapsed {d}, done", ready[-1]), ready
