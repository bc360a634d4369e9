"""Synthetic run folders for publish and report tests: records shaped like the load generator's.

Baseline streams one token per event; speculative streams several tokens per event (more on the
"structured" class, where a draft agrees more often), so TPOT and per-token ITL differ the way they
do on real hardware. Everything is seeded and deterministic.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta, write_records

CLASSES = ("structured", "open")


def make_records(
    *,
    per_class: int = 6,
    classes: tuple[str, ...] = CLASSES,
    start: float = 1_790_000_000.0,
    spacing_s: float = 7.0,
    tokens: int = 24,
    errors: int = 1,
    seed: int = 0,
    level: str = "c4",
) -> list[RequestRecord]:
    rng = random.Random(seed)
    recs: list[RequestRecord] = []
    index = 0
    for cls in classes:
        for _ in range(per_class):
            sent = start + index * spacing_s
            for variant in ("baseline", "speculative"):
                ttft = round(0.04 + rng.random() * 0.02, 6)
                times, toks = [ttft], [1]
                t, left = ttft, tokens - 1
                while left > 0:
                    if variant == "baseline":
                        k, gap = 1, 0.045 + rng.random() * 0.004
                    else:
                        k = min(left, rng.randint(2, 5) if cls == "structured" else rng.randint(1, 2))
                        gap = 0.05 + rng.random() * 0.005
                    t += gap
                    times.append(round(t, 6))
                    toks.append(k)
                    left -= k
                recs.append(
                    RequestRecord(
                        variant=variant,
                        index=index,
                        prompt_id=f"{cls}-{index}",
                        prompt_class=cls,
                        level=level,
                        sent_at=sent + (0.001 if variant == "speculative" else 0.0),
                        ttft=ttft,
                        e2e=round(t + 0.002, 6),
                        chunk_times=times,
                        chunk_tokens=toks,
                        completion_tokens=tokens,
                        prompt_tokens=64,
                        status=200,
                    )
                )
            index += 1
    for e in range(errors):
        recs.append(
            RequestRecord(
                variant="speculative",
                index=index + e,
                prompt_id=f"{classes[0]}-err{e}",
                prompt_class=classes[0],
                level=level,
                sent_at=start + (index + e) * spacing_s,
                status=500,
                error="http_500",
                error_msg="internal error",
            )
        )
    recs.append(  # a warm-up request: must never be published or reported
        RequestRecord(
            variant="baseline",
            index=-1,
            prompt_id="warm",
            prompt_class=classes[0],
            level=level,
            warmup=True,
            sent_at=start - 30,
            ttft=9.0,
            e2e=99.0,
            chunk_times=[9.0, 99.0],
            chunk_tokens=[1, 1],
            status=200,
        )
    )
    return recs


ACCEPTANCE = {
    "baseline": None,
    "speculative": {
        "rate": 0.62,
        "mean_accepted_length": 3.4,
        "per_position": [0.92, 0.81, 0.7, 0.61, 0.52, 0.44, 0.35],
        "drafts": 1000,
        "draft_tokens": 7000,
        "accepted_tokens": 4340,
    },
}


def make_run(
    root: Path,
    run_id: str = "run-1",
    records: list[RequestRecord] | None = None,
    *,
    summary: bool = True,
    acceptance: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Path:
    """Write results/<run_id>/ with run.json, requests.jsonl, acceptance.json and (by default) summary.json."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    recs = records if records is not None else make_records(**kwargs)
    cfg = config or SpectrnConfig().model_dump(mode="json")
    measured = [r for r in recs if not r.warmup]
    meta = RunMeta(
        run_id=run_id,
        spectrn_version="0.1.0",
        started_at=min(r.sent_at for r in measured),
        finished_at=max(r.sent_at + (r.e2e or 0) for r in measured),
        endpoints={"baseline": "http://127.0.0.1:18001/v1", "speculative": "http://127.0.0.1:18002/v1"},
        config=cfg,
    )
    (run_dir / "run.json").write_text(meta.model_dump_json(indent=2), encoding="utf-8")
    (run_dir / "requests.jsonl").unlink(missing_ok=True)
    write_records(run_dir / "requests.jsonl", recs)
    acc = ACCEPTANCE if acceptance is None else acceptance
    (run_dir / "acceptance.json").write_text(json.dumps(acc), encoding="utf-8")
    if summary:
        from spectrn.analyze.run import analyze_folder

        analyze_folder(run_dir)
    return run_dir
