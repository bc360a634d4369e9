"""Real vLLM error responses become clear per-request errors (spectrn's client) or a clear CLI error."""

from __future__ import annotations

import aiohttp
import pytest

from spectrn.loadgen.client import RequestParams, endpoint_url, run_request
from spectrn.run.records import RequestRecord
from spectrn.runtimes.vllm_cpu import VllmCpuPair

from .conftest import bench


async def one_request(base: str, params: RequestParams, text: str) -> RequestRecord:
    async with aiohttp.ClientSession() as session:
        return await run_request(
            session,
            endpoint_url(base, params.api),
            params,
            text,
            variant="speculative",
            index=0,
            prompt_id="p",
            prompt_class="structured",
            level="c1",
            warmup=False,
        )


def test_max_tokens_beyond_context_is_a_400_per_request(
    pair: VllmCpuPair, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run = bench(
        pair,
        tmp_path_factory.mktemp("bench"),
        "too-long",
        "--prompts",
        "structured",
        "--set",
        "bench.requests=3",
        "--set",
        "bench.max_tokens=5000",
        "--set",
        "bench.api=completions",
    )
    out = run.proc.stdout + run.proc.stderr
    recs = run.records()
    assert len(recs) == 6
    for r in recs:
        assert r["status"] == 400 and r["error"] == "http_400", r
        # vLLM's own explanation is kept, not just the status.
        assert "max_tokens=5000" in r["error_msg"] and "2048" in r["error_msg"], r["error_msg"]
        assert r["chunk_tokens"] == [] and "completion_tokens" not in r
    # The CLI says the run is unusable and why, for each variant.
    assert "NOT A CLEAN RUN" in out
    assert out.count("http_400") >= 2
    # Failed requests produce no tokens, so the counters did not move and acceptance is not invented.
    acc = run.json("acceptance.json")["speculative@c4"]
    assert acc["drafts"] == 0 and acc["rate"] is None and acc["mean_accepted_length"] is None


def test_unknown_model_is_a_clear_cli_error(pair: VllmCpuPair, tmp_path_factory: pytest.TempPathFactory) -> None:
    run = bench(
        pair,
        tmp_path_factory.mktemp("bench"),
        "unknown-model",
        "--set",
        "bench.requests=1",
        "--set",
        "bench.api=completions",
        model="no-such-model",
    )
    assert run.proc.returncode == 4, run.proc.stderr
    assert "EndpointError" in run.proc.stderr
    assert "no-such-model" in run.proc.stderr and pair.model in run.proc.stderr
    assert "--model" in run.proc.stderr  # the fix


async def test_unknown_model_request_is_a_404_record(pair: VllmCpuPair) -> None:
    rec = await one_request(
        pair.endpoints["speculative"], RequestParams(model="no-such-model", api="completions", max_tokens=8), "hello"
    )
    assert rec.status == 404 and rec.error == "http_404"
    assert rec.error_msg and "no-such-model" in rec.error_msg and "does not exist" in rec.error_msg
    assert not rec.ok and rec.chunk_tokens == [] and rec.ttft is None and rec.e2e is None


@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_streaming_request_rejected_with_json_400(pair: VllmCpuPair, api: str) -> None:
    # stream=true, but vLLM answers 400 with a JSON body (not SSE): one clear record, not a parse error.
    rec = await one_request(pair.endpoints["baseline"], RequestParams(model=pair.model, api=api, max_tokens=-1), "hi")
    assert rec.status == 400 and rec.error == "http_400", rec
    assert rec.error_msg and ("max_tokens" in rec.error_msg or "max_completion_tokens" in rec.error_msg)
    assert "{" not in (rec.error_msg or ""), "the message, not the raw JSON body"


async def test_prompt_longer_than_context_is_a_400_record(pair: VllmCpuPair) -> None:
    long_prompt = "the cat sat on the mat. " * 800  # several thousand tokens > max-model-len 2048
    rec = await one_request(
        pair.endpoints["speculative"], RequestParams(model=pair.model, api="completions", max_tokens=8), long_prompt
    )
    assert rec.status == 400 and rec.error == "http_400", rec
    assert rec.error_msg and "2048" in rec.error_msg


async def test_servers_still_serve_after_errors(pair: VllmCpuPair) -> None:
    for base in pair.endpoints.values():
        rec = await one_request(base, RequestParams(model=pair.model, api="completions", max_tokens=8), "1, 2, 3,")
        assert rec.ok and rec.completion_tokens == 8 == sum(rec.chunk_tokens)
