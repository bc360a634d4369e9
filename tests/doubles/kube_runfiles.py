"""Result folders as a load pod would leave them (one per shard), built from real spectrn records."""

from __future__ import annotations

import json

from spectrn.run.records import RequestRecord, RunMeta

SPEC_PROM = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{{model_name="m"}} {drafts}
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{{model_name="m"}} {draft_tokens}
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {accepted}
"""


def record(variant: str, index: int, shard: int, tokens: int = 40) -> RequestRecord:
    # speculative: 4 tokens per chunk at 20 ms per chunk; baseline: 1 token per chunk at 15 ms
    per_chunk, gap = (4, 0.020) if variant == "speculative" else (1, 0.015)
    chunks = tokens // per_chunk
    ttft = 0.05 + 0.001 * (index % 3)
    times = [ttft + gap * i for i in range(chunks)]
    return RequestRecord(
        variant=variant,
        index=index,
        prompt_id=f"p{index % 4}",
        prompt_class="structured",
        level="c4",
        shard=shard,
        sent_at=1_700_000_000.0 + index,
        ttft=ttft,
        e2e=times[-1] + 0.001,
        chunk_times=times,
        chunk_tokens=[per_chunk] * chunks,
        completion_tokens=tokens,
        status=200,
    )


def shard_files(run_id: str, shard: int, shards: int, *, n: int = 12, done: bool = True) -> dict[str, bytes]:
    out = f"/results/{run_id}"
    recs = [record(v, i, shard) for i in range(n) if i % shards == shard for v in ("baseline", "speculative")]
    meta = RunMeta(
        run_id=run_id,
        spectrn_version="0.1.0",
        started_at=100.0 + shard,
        finished_at=(200.0 + shard) if done else None,
        endpoints={"baseline": "http://qwen-vllm:8000", "speculative": "http://qwen-sd-vllm:8000"},
        notes=[f"note from {shard}"],
        shard=shard,
        shards=shards,
    )
    before = SPEC_PROM.format(drafts=100 * shard, draft_tokens=700 * shard, accepted=400 * shard)
    after = SPEC_PROM.format(drafts=100 * shard + 50, draft_tokens=700 * shard + 350, accepted=400 * shard + 200)
    acc = {"speculative@c4": {"rate": 200 / 350}, "baseline@c4": None}
    return {
        f"{out}/run.json": meta.model_dump_json().encode(),
        f"{out}/requests.jsonl": "".join(r.model_dump_json(exclude_none=True) + "\n" for r in recs).encode(),
        f"{out}/acceptance.json": json.dumps(acc).encode(),
        f"{out}/metrics/speculative.c4.before.prom": before.encode(),
        f"{out}/metrics/speculative.c4.after.prom": after.encode(),
    }
