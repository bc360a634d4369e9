"""Everything kept of one (load level, variant, prompt class)'s records, in bounded memory: the ``Accumulator``.

Each record lands in the accumulator of its (load level, variant, prompt class): one number per request in
compact arrays (TTFT, TPOT, e2e, throughput, output tokens, schedule index), per-token ITL and chunk
latency in sketches (``spectrn.analyze.stats``), a fixed-size sample of requests' ITL for the bootstrap,
decode-event sizes for stream acceptance. Nothing else of a record is kept, so memory grows by about a
hundred bytes per request and a million requests fit on a laptop.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import sys
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from spectrn.analyze.acceptance import StreamCounter
from spectrn.analyze.metrics import request_metrics
from spectrn.analyze.stats import BOOT_MAX_REQUESTS, TokenDistribution
from spectrn.run.records import RequestRecord


def pair_key(rec: RequestRecord) -> int:
    """What pairs a baseline record with its speculative twin: the schedule index, and for a later turn of a
    conversation (which shares its index) a key of its own, negative so it never meets a schedule index."""
    return rec.index if not rec.turn or rec.turn == 1 else -(rec.index * MAX_TURNS + rec.turn)


MAX_TURNS = 1024  # above the prompt model's limit on turns per conversation


def _sample_key(index: int, seed: int) -> int:
    """A fixed pseudo-random rank per schedule index: the same requests are sampled in every variant."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest(), "big")


@dataclass
class Accumulator:
    """Everything kept of the records of one (level, variant, prompt class)."""

    window: int | None
    semantics: Any
    seed: int
    records: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    index: array[int] = field(default_factory=lambda: array("q"))
    ttft: array[float] = field(default_factory=lambda: array("d"))
    tpot: array[float] = field(default_factory=lambda: array("d"))  # NaN when the request had one token
    e2e: array[float] = field(default_factory=lambda: array("d"))
    thr: array[float] = field(default_factory=lambda: array("d"))
    out_tokens: array[float] = field(default_factory=lambda: array("d"))
    llmperf_itl: array[float] = field(default_factory=lambda: array("d"))
    itl_max: array[float] = field(default_factory=lambda: array("d"))  # a request's largest per-token ITL (SLOs)
    classes: list[str] = field(default_factory=list)  # each request's prompt class (interned: one string each)
    itl: TokenDistribution = field(default_factory=TokenDistribution)
    chunk: TokenDistribution = field(default_factory=TokenDistribution)
    itl_sample: list[tuple[int, int, list[float], list[int]]] = field(default_factory=list)  # heap of (-key, ...)
    decode_tokens: int = 0
    decode_chunks: int = 0
    first_send: float = math.inf
    last_end: float = -math.inf
    token_sources: Counter[str] = field(default_factory=Counter)
    token_warnings: int = 0
    token_warning_example: str | None = None
    stream: StreamCounter | None = None

    def __post_init__(self) -> None:
        self.stream = StreamCounter(self.window, self.semantics)

    def add(self, rec: RequestRecord, time_scale: float, max_tokens: int | None) -> None:
        self.records += 1
        if rec.token_warning:
            self.token_warnings += 1
            self.token_warning_example = self.token_warning_example or rec.token_warning
        if not rec.ok:
            cls = rec.error or "error"
            self.errors[cls] += 1
            self.examples.setdefault(cls, (rec.error_msg or "")[:300])
            return
        m = request_metrics(rec, time_scale)
        if m is None:
            return
        self.index.append(pair_key(rec))
        self.ttft.append(m.ttft)
        self.tpot.append(m.tpot if m.tpot is not None else math.nan)
        self.e2e.append(m.e2e)
        self.thr.append(m.throughput_tok_s)
        self.out_tokens.append(float(m.output_tokens))
        self.llmperf_itl.append(m.llmperf_itl if m.llmperf_itl is not None else math.nan)
        values, weights = m.itl_values
        self.itl_max.append(max(values) if values else math.nan)
        self.classes.append(sys.intern(rec.prompt_class))
        self.itl.add(values, weights)
        self.chunk.add(list(m.gaps))
        if values:
            item = (-_sample_key(pair_key(rec), self.seed), pair_key(rec), values, weights)
            if len(self.itl_sample) < BOOT_MAX_REQUESTS:
                heapq.heappush(self.itl_sample, item)
            elif item > self.itl_sample[0]:
                heapq.heapreplace(self.itl_sample, item)
        self.decode_tokens += m.decode_tokens
        self.decode_chunks += m.decode_chunks
        self.first_send = min(self.first_send, rec.sent_at)
        self.last_end = max(self.last_end, rec.sent_at + m.e2e * time_scale)  # wall clock, as sent
        self.token_sources[rec.token_source] += 1
        if self.stream is not None and rec.chunk_tokens:
            # the last step is cut short at max_tokens, and at EOS too (the window's tokens after it are dropped)
            cut = rec.finish_reason in ("length", "stop") or (max_tokens is not None and m.output_tokens >= max_tokens)
            self.stream.add(rec.chunk_tokens, cut_at_max_tokens=cut)

    def merge(self, other: Accumulator) -> None:
        self.records += other.records
        self.errors.update(other.errors)
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)
        for name in ("index", "ttft", "tpot", "e2e", "thr", "out_tokens", "llmperf_itl", "itl_max", "classes"):
            getattr(self, name).extend(getattr(other, name))
        self.itl.merge(other.itl)
        self.chunk.merge(other.chunk)
        for item in other.itl_sample:
            if len(self.itl_sample) < BOOT_MAX_REQUESTS:
                heapq.heappush(self.itl_sample, item)
            elif item > self.itl_sample[0]:
                heapq.heapreplace(self.itl_sample, item)
        self.decode_tokens += other.decode_tokens
        self.decode_chunks += other.decode_chunks
        self.first_send = min(self.first_send, other.first_send)
        self.last_end = max(self.last_end, other.last_end)
        self.token_sources.update(other.token_sources)
        self.token_warnings += other.token_warnings
        self.token_warning_example = self.token_warning_example or other.token_warning_example
        if self.stream is not None and other.stream is not None:
            self.stream.merge(other.stream)

    @property
    def completed(self) -> int:
        return len(self.index)

    @property
    def wall_s(self) -> float:
        return max(self.last_end - self.first_send, 0.0) if self.completed else 0.0


def _arr(a: array[float]) -> Any:
    """An accumulator's column as a numpy array (a view, not a copy)."""
    import numpy as np

    return np.frombuffer(a, dtype=float) if len(a) else np.zeros(0)
