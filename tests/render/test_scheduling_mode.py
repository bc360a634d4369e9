"""Both services of an A/B run the same vLLM scheduling mode: on servers where ``--speculative-config`` turns
async scheduling off for the speculative service only, both are pinned with ``--no-async-scheduling``; the mode
of each service is recorded in provenance and shown with the run; left at the server default, the run says why
the A/B is not like for like (docs/neuron.md, "Scheduling mode")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from doubles.render_support import SUPPORTED
from spectrn.analyze.summary import summarize
from spectrn.bench.local import endpoint_provenance
from spectrn.configuration.config import SpectrnConfig
from spectrn.report.markdown import summary_markdown
from spectrn.run.measured import config_as_run
from spectrn.run.records import RequestRecord, RunMeta

# The plugin's own flag, as its features guide writes it (aws-neuron-sdk vllm-neuron/docs/guides/features-guide.md).
FLAG = "--no-async-scheduling"
BASE = ["--set", "s3.bucket=my-models", "--set", "spectrn_image=registry.example.com/spectrn:0.1.0"]
PLUGIN = {
    "current": "vllm-neuron-eagle3",
    "0.5": "vllm-neuron-0.5-eagle",
    "0.2": "vllm-neuron-0.2-eagle",
    "fork": "legacy-neuron-fused",
}


def _server_args(cli: Any, tmp: Path, combo: str, *extra: str) -> dict[str, list[str]]:
    """The vLLM container's arguments of each service, read from the rendered Deployments."""
    config, out = tmp / "spectrn.yaml", tmp / "out"
    config.write_text(yaml.safe_dump(SUPPORTED[combo]), encoding="utf-8")
    code, _, err = cli("render", "--config", str(config), *BASE, *extra, "-o", str(out))
    assert code == 0, err
    args: dict[str, list[str]] = {}
    for f in sorted(out.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text(encoding="utf-8")):
            if doc and doc.get("kind") == "Deployment":
                (container,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "server"]
                args["speculative" if "--speculative-config" in " ".join(container["args"]) else "baseline"] = [
                    str(a) for a in container["args"]
                ]
    assert set(args) == {"baseline", "speculative"}
    return args


@pytest.mark.parametrize("release", ["current", "0.5"])
def test_both_services_are_pinned_to_synchronous_scheduling(cli, tmp_path, release):
    args = _server_args(cli, tmp_path, PLUGIN[release])
    assert args["baseline"].count(FLAG) == 1
    assert args["speculative"].count(FLAG) == 1


@pytest.mark.parametrize("release", ["current", "0.5"])
def test_server_default_renders_no_pin(cli, tmp_path, release):
    args = _server_args(cli, tmp_path, PLUGIN[release], "--set", "scheduling=server-default")
    assert FLAG not in args["baseline"] and FLAG not in args["speculative"]


@pytest.mark.parametrize("stack", ["0.2", "fork"])
def test_servers_without_async_scheduling_get_no_flag(cli, tmp_path, stack):
    """vLLM 0.11.0 (plugin 0.2) has async scheduling off unless asked for; the V0 fork has none."""
    args = _server_args(cli, tmp_path, PLUGIN[stack])
    assert not any("async-scheduling" in a for a in args["baseline"] + args["speculative"])


def test_scheduling_refuses_an_unknown_value(cli):
    code, _, err = cli("render", "--set", "scheduling=async", *BASE)
    assert code != 0
    assert "scheduling" in err and "same" in err and "server-default" in err


def _cfg(**kw: Any) -> SpectrnConfig:
    return SpectrnConfig.model_validate({**SUPPORTED["vllm-neuron-eagle3"], **kw})


def _recs() -> list[RequestRecord]:
    out = []
    for i in range(6):
        for variant, sizes in (("baseline", [1] * 8), ("speculative", [3] * 8)):
            times = [0.1 + j * 0.04 for j in range(len(sizes) + 1)]
            out.append(RequestRecord(
                variant=variant, index=i, prompt_id=f"p{i}", prompt_class="structured", level="c4",
                sent_at=1000.0 + i, ttft=0.1, e2e=times[-1], chunk_times=times, chunk_tokens=[1, *sizes],
                completion_tokens=1 + sum(sizes), token_source="token_ids", status=200,
            ))  # fmt: skip
    return out


def _run(cfg: SpectrnConfig) -> tuple[RunMeta, Any]:
    endpoints = {"baseline": "http://b:8000", "speculative": "http://s:8000"}
    prov = endpoint_provenance(cfg, endpoints, runtime="cluster", started=True)
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=cfg, provenance=prov,
                   endpoints=endpoints)  # fmt: skip
    return meta, summarize(_recs(), meta)


def test_provenance_records_each_services_scheduling_mode():
    meta, summary = _run(_cfg())
    servers = summary.provenance.servers
    assert servers["baseline"].scheduling == f"sync ({FLAG})"
    assert servers["speculative"].scheduling == f"sync ({FLAG})"
    assert "scheduling_differs" not in [f.code for f in summary.findings]
    flat = config_as_run(meta, summary.provenance)
    assert flat["scheduling.baseline"] == flat["scheduling.speculative"] == f"sync ({FLAG})"
    md = re.sub(r"\\(.)", r"\1", summary_markdown(summary, meta.config))
    assert f"scheduling: baseline sync ({FLAG}), speculative sync ({FLAG})" in md


def test_server_default_on_the_current_plugin_is_reported_as_not_like_for_like():
    cfg = _cfg(scheduling="server-default")
    meta, summary = _run(cfg)
    servers = summary.provenance.servers
    # the plugin's documented defaults: async on, and off where --speculative-config is set
    assert servers["baseline"].scheduling == "async (server default)"
    assert servers["speculative"].scheduling == "sync (server default)"
    (finding,) = [f for f in summary.findings if f.code == "scheduling_differs"]
    assert finding.severity == "warning" and "scheduling: same" in finding.message
    assert any("scheduling: server-default" in w and "async" in w for w in cfg.warnings())
    md = re.sub(r"\\(.)", r"\1", summary_markdown(summary, cfg))
    assert finding.message in md


def test_simulated_and_local_runs_record_no_scheduling_mode():
    """A simulator or CPU vLLM is not the rendered Neuron command line: nothing to record."""
    endpoints = {"baseline": "http://b:8000", "speculative": "http://s:8000"}
    for runtime in ("sim", "vllm-cpu"):
        prov = endpoint_provenance(_cfg(), endpoints, runtime=runtime, started=True)
        assert all(s.scheduling is None for s in prov.servers.values())
