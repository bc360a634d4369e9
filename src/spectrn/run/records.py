"""The records that cross stage boundaries: one per request (``requests.jsonl``) and the run metadata.

A ``RequestRecord`` is everything the load generator observed about one request, in raw form, so that
every statistic can be recomputed later (and by other tools). Times are seconds relative to the
request's own send time, except ``sent_at`` (Unix epoch seconds) which places it in the run.

``chunk_times[i]`` is when the i-th content-bearing SSE event arrived and ``chunk_tokens[i]`` how many
tokens it carried; under speculative decoding one event carries several tokens, so
``sum(chunk_tokens)`` (not ``len(chunk_times)``) is the output length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from spectrn.errors import AnalysisError, one_line
from spectrn.names import name_problem
from spectrn.run.summary import Provenance
from spectrn.spec.config import SpectrnConfig

# How the token count of each chunk was obtained, best first: the event's ``token_ids``; the difference of
# the cumulative ``usage.completion_tokens`` (continuous usage); an estimate from text lengths.
TokenSource = Literal["token_ids", "usage", "text"]


class RequestRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    variant: str = Field(description="baseline or speculative (or any endpoint label).")
    index: int = Field(description="Position in the shared request schedule (same prompt on both variants).")
    prompt_id: str
    prompt_class: str
    level: str = Field(default="c4", description="Load level label, e.g. c4 (concurrency 4) or r2.0 (2 req/s).")
    warmup: bool = False
    shard: int = 0
    sent_at: float = Field(description="Unix time the request was sent.")
    ttft: float | None = Field(default=None, description="Seconds from send to the first token.")
    e2e: float | None = Field(default=None, description="Seconds from send to the arrival of data: [DONE].")
    chunk_times: list[float] = Field(
        default_factory=list, description="Arrival of each token-bearing event (s after send)."
    )
    chunk_tokens: list[int] = Field(default_factory=list, description="Tokens in each token-bearing event.")
    token_source: TokenSource = Field(
        default="token_ids",
        description="Where chunk_tokens come from: token_ids, usage (cumulative per event) or text (estimated).",
    )
    token_warning: str | None = Field(
        default=None, description="Set when the server's token_ids and usage disagree (token_ids are counted)."
    )
    prompt_tokens: int | None = None
    completion_tokens: int | None = Field(default=None, description="Server-reported usage.completion_tokens.")
    status: int | None = Field(default=None, description="HTTP status (None: no response).")
    error: str | None = Field(default=None, description="Error class, e.g. http_500, disconnect, timeout.")
    error_msg: str | None = None
    output_text: str | None = None
    output_token_ids: list[int] | None = None
    llmperf_itl: float | None = Field(
        default=None, description="llmperf's own inter-token latency (ingested llmperf responses: no event times)."
    )

    @field_validator("variant", "prompt_class")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        # variants and prompt classes become file names and labels downstream (llmperf folders, dimensions)
        problem = name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def output_tokens(self) -> int:
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.chunk_tokens)


class RunMeta(BaseModel):
    """``run.json``: what was run, against what, when, and where its numbers come from."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    spectrn_version: str
    started_at: float
    finished_at: float | None = None
    endpoints: dict[str, str] = Field(default_factory=dict, description="variant -> base URL (credentials removed)")
    engine: str = "spectrn"
    config: SpectrnConfig = Field(default_factory=SpectrnConfig, description="The run's full configuration.")
    interrupted: bool = Field(
        default=False, description="The run was stopped before its end (Ctrl-C, SIGTERM or an error mid-run)."
    )
    stop_reason: str | None = Field(default=None, description="Why an interrupted run stopped.")
    notes: list[str] = Field(default_factory=list)
    model: str | None = None
    api: str | None = None
    max_tokens: int | None = None
    levels: list[str] = Field(default_factory=list)
    mode: str | None = None
    shard: int = 0
    shards: int = 1
    planned: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="endpoint -> load level -> measured requests this process planned (warm-up excluded).",
    )
    planned_warmup: dict[str, int] = Field(
        default_factory=dict, description="endpoint -> warm-up requests this process planned."
    )
    load_shape: dict[str, dict[str, object]] = Field(
        default_factory=dict, description="load level -> how requests were started (closed-loop ramp, open-loop)."
    )
    token_sources: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="endpoint -> token source -> records whose tokens were counted that way."
    )
    provenance: Provenance = Field(default_factory=Provenance)


def write_records(path: Path, records: Iterable[RequestRecord]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for r in records:
            f.write(r.model_dump_json(exclude_none=True) + "\n")


def iter_records(path: Path) -> Iterator[RequestRecord]:
    """Stream ``requests.jsonl`` one line at a time (bounded memory for any run length). A torn last line (a
    killed writer: no newline at its end) is skipped; any other bad line is an error."""
    if not path.exists():
        raise AnalysisError(f"{path} does not exist", hint="run `spectrn bench` first or pass the run folder")
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield RequestRecord.model_validate_json(line)
            except ValueError as e:
                if not line.endswith("\n"):
                    return  # the writer was killed mid-line; the complete records before it stand
                raise AnalysisError(
                    f"{path} line {n} is not a request record: {one_line(e)}",
                    hint="the file was damaged; remove or repair that line (only a torn last line is skipped)",
                ) from None


def read_records(path: Path) -> list[RequestRecord]:
    return list(iter_records(path))
