"""A run on the Neuron fork of vLLM V0 says, wherever its results are read, that Neuron dropped that stack in
SDK 2.28 and which stack replaces it; a run on the supported plugin says nothing of the kind
(docs/neuron.md, "Where each stack stands")."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import yaml

# The facts, as the SDK documents word them (not as spectrn's code does).
NO_V0 = "Starting with Neuron 2.28 release, vLLM V0 will no longer be supported"
DRAFT_ONLY_ON_FORK = "only supported on the legacy Neuron fork of vLLM v0 architecture that is no longer supported"

FAST = ["--time-scale", "0.05", "--prompts", "structured", "--requests", "4", "--max-tokens", "40"]


def _bench(cli, tmp_path: Path, run_id: str, config: dict[str, object]) -> tuple[str, Path]:
    path = tmp_path / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    code, _, err = cli("bench", "--local", "--config", str(path), *FAST, "--run-id", run_id, "--out-dir", str(tmp_path))
    assert code == 0, err
    return err, tmp_path / run_id


def _stack_findings(run: Path) -> list[dict[str, str]]:
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    return [f for f in summary["findings"] if f["code"] == "unsupported_stack"]


def test_a_fork_run_says_it_is_out_of_support_everywhere(cli, tmp_path):
    err, run = _bench(cli, tmp_path, "fork", {"runtime": "sim", "vllm_dialect": "legacy-neuron"})
    terminal = " ".join(err.split())  # rich may wrap a long warning
    assert "UNSUPPORTED STACK" in terminal and NO_V0 in terminal and DRAFT_ONLY_ON_FORK in terminal
    (finding,) = _stack_findings(run)
    assert finding["severity"] == "warning"
    for text in (NO_V0, DRAFT_ONLY_ON_FORK, "announce-no-support-vllm-v0.rst", "vllm_dialect: vllm-neuron"):
        assert text in finding["message"], text
    markdown = re.sub(r"\\(.)", r"\1", (run / "report" / "summary.md").read_text(encoding="utf-8"))
    assert f"- {finding['message']}" in markdown  # in the Warnings list, Markdown escapes undone
    page = html.unescape((run / "report" / "index.html").read_text(encoding="utf-8"))
    assert finding["message"] in page


def test_a_v1_server_outranks_the_configs_dialect(cli, tmp_path):
    """The config names the fork, but the server registers vLLM V1's spec-decode families (the simulator's
    upstream profile): the config load still warns about the config, while the run's findings, summary.md
    and the report describe the server that ran, which is not the fork."""
    config = {"runtime": "sim", "vllm_dialect": "legacy-neuron", "sim": {"profile": "upstream"}}
    err, run = _bench(cli, tmp_path, "v1", config)
    assert "UNSUPPORTED STACK" in err  # about the config as written
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["provenance"]["servers"]["speculative"]["metrics_style"] == "v1"
    assert _stack_findings(run) == []
    assert "UNSUPPORTED STACK" not in (run / "report" / "summary.md").read_text(encoding="utf-8")
    assert "UNSUPPORTED STACK" not in (run / "report" / "index.html").read_text(encoding="utf-8")
