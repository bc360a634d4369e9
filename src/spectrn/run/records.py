"""The records that cross stage boundaries: one per request (``requests.jsonl``) and the run metadata.

A ``RequestRecord`` is everything the load generator observed about one request, in raw form, so that
every statistic can be recomputed later (and by other tools). Times are seconds relative to the
request's own send time, except ``sent_at`` (Unix epoch seconds) which places it in the run.

``chunk_times[i]`` is when the i-th content-bearing SSE event arrived and ``chunk_tokens[i]`` how many
tokens it carried; under speculative decoding one event carries several tokens, so
``sum(chunk_tokens)`` (not ``len(chunk_times)``) is the output length.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from spectrn.configuration.config import RECORDED, SpectrnConfig
from spectrn.errors import AnalysisError, one_line
from spectrn.names import name_problem
from spectrn.run.json_doc import validate_line
from spectrn.run.jsonl import MAX_LINE, Line, read_lines
from spectrn.run.load_shape import LoadShape
from spectrn.run.summary import Provenance

# The run folder's contract (run.json, requests.jsonl, acceptance.json; summary.json has its own version):
#   1  run.json without ``schema_version`` (spectrn 0.1.0 before the version was recorded)
#   2  ``schema_version`` recorded; the recorded config is read as history (``read_run_meta``)
RUN_SCHEMA_VERSION = 2

# How the token count of each chunk was obtained, best first: the event's ``token_ids``; the difference of
# the cumulative ``usage.completion_tokens`` (continuous usage); an estimate from text lengths.
TokenSource = Literal["token_ids", "usage", "text"]


class RequestRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    variant: str = Field(description="baseline or speculative (or any endpoint label).")
    index: int = Field(description="Position in the shared request schedule (same prompt on both variants).")
    prompt_id: str
    prompt_class: str
    turn: int | None = Field(
        default=None,
        ge=1,
        description="Turn of a replayed conversation (1 = the first user message; the context grows with every "
        "turn); absent for a single-turn prompt. Turns after the first are reported as their own prompt class, "
        "<class>-t<turn>.",
    )
    level: str = Field(default="c4", description="Load level label, e.g. c4 (concurrency 4) or r2.0 (2 req/s).")
    warmup: bool = False
    shard: int = 0
    sent_at: float = Field(description="Unix time the request was sent.")
    queued_s: float | None = Field(
        default=None,
        description="Open loop: seconds this request waited after its arrival time for a slot under "
        "bench.max_in_flight; ttft and e2e count from the send, not from the arrival.",
    )
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
    finish_reason: str | None = Field(
        default=None,
        description="The server's finish_reason: stop (end of sequence or a stop string), length (max_tokens), "
        "or another; None: the server sent none.",
    )
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

    schema_version: int = Field(
        default=RUN_SCHEMA_VERSION,
        description="Version of the run folder's contract (run.json, requests.jsonl, acceptance.json); absent in "
        "version 1.",
    )
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
    ignore_eos: bool | None = Field(
        default=None,
        description="Requests asked for exactly max_tokens (ignore_eos); false: natural lengths up to max_tokens; "
        "absent (runs before the choice existed): on.",
    )
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
    load_shape: dict[str, LoadShape] = Field(
        default_factory=dict, description="load level -> how requests were started (closed-loop ramp, open-loop)."
    )
    token_sources: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="endpoint -> token source -> records whose tokens were counted that way."
    )
    provenance: Provenance = Field(default_factory=Provenance)
    # What reading an older or hand-edited run.json left out or read differently (never written back).
    _read_notes: list[str] = PrivateAttr(default_factory=list)

    @property
    def read_notes(self) -> list[str]:
        return list(self._read_notes)


# Recorded values the figures are computed from: never replaced by a default (that would change a figure).
_FIGURE_INPUTS = {("config", "pricing")}
# Fields a run.json cannot be read without: everything else falls back to today's default with a note.
_REQUIRED = ("run_id", "started_at")


def read_run_meta(raw: Any, where: str) -> RunMeta:
    """A ``run.json`` document of any schema version up to this spectrn's, read as history.

    What a run recorded is not input to check against today's rules: the config's cross-field rules (the model
    catalog, the Neuron rules) are not applied, and a value today's schema no longer accepts (a renamed or
    removed key, a choice that left a list, a tightened bound) is read as today's default with a note in
    ``read_notes``. Only a document that is not an object, is missing ``run_id`` or ``started_at``, or comes
    from a newer spectrn is an error, naming what is missing and the fix."""
    if not isinstance(raw, dict):
        raise AnalysisError(f"{where} is not a JSON object", hint="restore run.json from the original run")
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise AnalysisError(
            f"{where}: schema_version {version!r} is not a version number", hint="restore run.json from the run"
        )
    if version > RUN_SCHEMA_VERSION:
        raise AnalysisError(
            f"{where} was written by a newer spectrn (run schema {version}; this spectrn reads up to "
            f"{RUN_SCHEMA_VERSION})",
            hint="upgrade spectrn (pip install -U spectrn) to read this run",
        )
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise AnalysisError(
            f"{where} has no {' or '.join(missing)}, so it cannot be read as a run",
            hint="restore run.json from the original run, or re-run the bench",
        )
    data = copy.deepcopy(raw)
    data["schema_version"] = RUN_SCHEMA_VERSION
    data.setdefault("spectrn_version", "")
    notes = (
        [f"run.json schema {version} read by spectrn's schema {RUN_SCHEMA_VERSION}"]
        if version != RUN_SCHEMA_VERSION
        else []
    )
    for _ in range(64):
        try:
            meta = RunMeta.model_validate(data, context={RECORDED: True})
        except ValidationError as e:
            figures = [err for err in e.errors() if err["loc"][:2] in _FIGURE_INPUTS]
            if figures:  # a figure computed from today's default instead would be a wrong number, not history
                loc = ".".join(str(p) for p in figures[0]["loc"])
                raise AnalysisError(
                    f"{where}: {loc}: {figures[0]['msg']}: the cost figures are computed from it",
                    hint=f"correct {loc} in run.json (a finite number in range: `spectrn config-reference`), or remove "
                    "it to use the default (the instance catalog's price; 0.5 instances per service)",
                ) from None
            dropped = [(_drop(data, err["loc"]), _why(err)) for err in e.errors() if err["type"] != "missing"]
            if not any(key for key, _ in dropped):
                raise AnalysisError(
                    f"{where} is not valid run metadata: {one_line(e)}", hint="restore run.json, or re-run the bench"
                ) from None
            notes += [f"run.json {key}: {why}" for key, why in dropped if key]
            continue
        meta._read_notes = notes
        return meta
    raise AnalysisError(f"{where} could not be read as run metadata", hint="restore run.json, or re-run the bench")


def _why(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "not a key in this spectrn (renamed or removed since the run); left out"
    return f"not valid in this spectrn ({err['msg']}); read as this spectrn's default"


def _drop(data: dict[str, Any], loc: tuple[int | str, ...]) -> str | None:
    """Remove the deepest mapping key on ``loc`` that holds the bad value; its dotted path, or None."""
    node: Any = data
    last: tuple[dict[str, Any], str, int] | None = None
    for depth, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            last = (node, part, depth)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            break
    if last is None:
        return None
    parent, key, depth = last
    del parent[key]
    return ".".join(str(p) for p in loc[: depth + 1])


def write_records(path: Path, records: Iterable[RequestRecord]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for r in records:
            f.write(r.model_dump_json(exclude_none=True) + "\n")


def iter_records(path: Path, skipped: list[str] | None = None) -> Iterator[RequestRecord]:
    """Stream ``requests.jsonl`` one line at a time (bounded memory for any run length, ``run/jsonl.py``).

    What a killed or crashed writer leaves at the end is skipped, and said in ``skipped``: a torn last line (no
    newline at its end) and NUL padding after the last record. Anything else that is not a record (a damaged
    line, an object with a key twice, a line over ``MAX_LINE``, NUL bytes followed by more records) is an
    ``AnalysisError`` naming the line."""
    if not path.exists():
        raise AnalysisError(f"{path} does not exist", hint="run `spectrn bench` first or pass the run folder")
    damaged = "the file was damaged; remove or repair that line (only a torn last line is skipped)"
    padding: Line | None = None
    padding_bytes = 0
    with path.open("rb") as f:
        for line in read_lines(f):
            if line.padding:
                padding = padding or line
                padding_bytes += line.size
                continue
            if line.blank:
                continue
            if padding is not None:
                raise AnalysisError(
                    f"{path} line {padding.number} starts {padding_bytes} bytes of NUL padding, yet records follow "
                    f"at line {line.number}",
                    hint="the file was damaged in the middle: restore it from the original run",
                )
            try:
                record = _record(line)
            except ValueError as e:
                if not line.complete:  # the writer was killed mid-line; the complete records before it stand
                    if skipped is not None:
                        skipped.append(_torn_note(path, line))
                    return
                raise AnalysisError(
                    f"{path} line {line.number} is not a request record: {one_line(e)}", hint=damaged
                ) from None
            yield record
    if padding is not None and skipped is not None:
        skipped.append(
            f"{path.name}: skipped {padding_bytes} bytes of NUL padding after the last record (line {padding.number} "
            "on; what a crash leaves on some file systems)"
        )


def _record(line: Line) -> RequestRecord:
    if line.text is None:
        if line.nul_bytes:
            raise ValueError(f"it holds {line.nul_bytes} NUL bytes")
        raise ValueError(f"it is {line.size} bytes long, over the {MAX_LINE >> 20} MiB a record may take")
    try:  # a key twice is damage like any other (json_doc.py)
        return validate_line(RequestRecord, line.text)
    except ValueError:
        text = line.text.decode("utf-8", "replace").encode()
        if text == line.text:
            raise
        # bytes that are not UTF-8 are read as replacement characters (a text field's, as ever)
        return validate_line(RequestRecord, text)


def _torn_note(path: Path, line: Line) -> str:
    nuls = f", {line.nul_bytes} of them NUL bytes" if line.nul_bytes else ""
    return (
        f"{path.name}: skipped a torn last line (line {line.number}, {line.size} bytes{nuls}: the writer stopped "
        "mid-line)"
    )


def read_records(path: Path) -> list[RequestRecord]:
    return list(iter_records(path))
