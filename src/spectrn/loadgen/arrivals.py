"""When each request of a load level starts: levels, seeded arrival processes, trace files, run.json's shape.

A level is closed loop (``C`` streams, each starting its next request when the last one ends) or open loop
(requests start at arrival times that do not depend on the server's answers). Open-loop arrival times come
from a seeded process (``poisson``, ``constant``, ``gamma`` with a burstiness) or from a trace file; every
endpoint gets the identical times, so the A/B comparison stays paired by schedule index.

Arrival processes, all with mean gap ``1 / rate``:

- ``poisson``: exponential gaps (coefficient of variation 1), what ``vllm bench serve`` sends by default.
- ``constant``: equal gaps, the first request at 0.
- ``gamma``: gamma-distributed gaps of shape ``burstiness`` (CV ``1/sqrt(burstiness)``): 1 is Poisson, below
  1 burstier, above 1 smoother; ``vllm bench serve --burstiness`` uses the same parameterisation.

A trace is JSONL (one object a line) or CSV (a header row) with an arrival offset in seconds from the
level's start (``timestamp`` or ``arrival_s``) and optional ``input_tokens`` / ``output_tokens`` per row.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectrn.errors import ConfigError
from spectrn.run.load_shape import LoadShape

ARRIVALS = ("poisson", "constant", "gamma")
# An open-loop level without bench.max_in_flight: a backstop against unbounded tasks, not a load setting.
DEFAULT_MAX_IN_FLIGHT = 1024
MAX_TRACE_BYTES = 200_000_000
MAX_TRACE_ROWS = 1_000_000
MAX_TRACE_TOKENS = 131072
TIME_COLUMNS = ("timestamp", "arrival_s")


@dataclass(frozen=True)
class Level:
    """One load level. Closed loop: ``concurrency`` streams. Open loop: ``rate`` (or a trace, ``trace``)
    with at most ``concurrency`` requests in flight (``bench.max_in_flight``, default 1024)."""

    label: str
    concurrency: int | None = None
    rate: float | None = None
    arrivals: str = "poisson"
    burstiness: float | None = None
    trace: bool = False
    capped: bool = False  # the in-flight cap was chosen by the user (bench.max_in_flight)

    @property
    def open_loop(self) -> bool:
        return self.rate is not None or self.trace

    @staticmethod
    def closed(c: int) -> Level:
        return Level(f"c{c}", concurrency=c)

    @staticmethod
    def open(
        rate: float, arrivals: str = "poisson", burstiness: float | None = None, max_in_flight: int | None = None
    ) -> Level:
        cap = max_in_flight or DEFAULT_MAX_IN_FLIGHT
        return Level(f"r{rate:g}", cap, rate, arrivals, burstiness, capped=max_in_flight is not None)

    @staticmethod
    def replay(max_in_flight: int | None = None) -> Level:
        cap = max_in_flight or DEFAULT_MAX_IN_FLIGHT
        return Level("trace", cap, trace=True, capped=max_in_flight is not None)


@dataclass(frozen=True)
class TraceRow:
    offset_s: float
    input_tokens: int | None = None
    output_tokens: int | None = None


# ---- arrival processes ------------------------------------------------------------------------------


def poisson_arrivals(rate: float, seed: int) -> Iterator[float]:
    """Seeded Poisson arrival offsets (seconds from the level's start), generated as they are needed."""
    rng = random.Random(seed)
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        yield t


def arrival_times(kind: str, rate: float, seed: int, burstiness: float | None = None) -> Iterator[float]:
    """Seeded arrival offsets of ``kind`` at ``rate`` per second, generated as they are needed (a level of a
    million requests holds none of them in memory)."""
    if kind == "poisson":
        yield from poisson_arrivals(rate, seed)
    elif kind == "constant":
        k = 0
        while True:  # k / rate rather than a running sum: no drift over a long level
            yield k / rate
            k += 1
    elif kind == "gamma":
        shape = burstiness or 1.0
        rng = random.Random(seed)
        t = 0.0
        while True:
            t += rng.gammavariate(shape, 1.0 / (rate * shape))  # mean gap 1/rate whatever the shape
            yield t
    else:
        raise ValueError(f"unknown arrival process {kind!r}")


def shard_seed(seed: int, shard: int, shards: int) -> int:
    """The seed of one shard's arrival process: the run's seed alone, or one stream per shard. With one seed
    for all, the pods of a sharded level would draw the same gaps and send in synchronized bursts of
    ``shards`` requests: the right mean rate, the wrong load shape."""
    if shards == 1:
        return seed
    return int.from_bytes(hashlib.sha256(f"spectrn-shard:{seed}:{shard}".encode()).digest()[:8], "big")


def level_arrivals(level: Level, seed: int, shards: int, shard: int) -> Iterator[float]:
    """The arrival offsets of an open-loop rate level for one shard (each shard carries rate / shards).

    Together the shards offer the level's process: constant arrivals are phase-shifted by one level gap per
    shard (shard k sends at k/rate, (k + shards)/rate, ...: merged, evenly spaced at 1/rate); random ones
    draw from independent streams (``shard_seed``), whose superposition is again the level's process for
    Poisson."""
    assert level.rate is not None
    if level.arrivals == "constant":
        phase = shard / level.rate
        return (phase + t for t in arrival_times("constant", level.rate / shards, seed))
    return arrival_times(level.arrivals, level.rate / shards, shard_seed(seed, shard, shards), level.burstiness)


def shard_rate(level: Level, shards: int) -> float:
    """This shard's share of an open-loop rate level's rate."""
    assert level.rate is not None
    return level.rate / shards


def shard_cap(level: Level, shards: int) -> int:
    """This shard's share of the level's in-flight cap, so that all shards together keep to it."""
    return max(1, -(-(level.concurrency or DEFAULT_MAX_IN_FLIGHT) // shards))


# ---- trace files ---------------------------------------------------------------------------------


def _bad(path: Path, line: int, field: str, why: str) -> ConfigError:
    return ConfigError(
        f"trace {path} line {line}: {field} {why}",
        hint="each row needs timestamp (or arrival_s): seconds from the start, >= 0, in arrival order; "
        "input_tokens and output_tokens are optional whole numbers >= 1 (docs/load-shapes.md)",
    )


def _number(path: Path, line: int, field: str, raw: Any, *, whole: bool) -> float | int | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        raise _bad(path, line, field, f"is {raw!r}, not a number")
    # JSON numbers too go through their text: an integer past float's range is then infinite (a timestamp) or
    # exact (a token count), as in a CSV cell, never an OverflowError
    text = str(raw).strip()
    value: float | int
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise _bad(path, line, field, f"is {text[:40]!r}, not a number") from None
    if isinstance(value, float) and not math.isfinite(value):  # an int is finite, and too big for math.isfinite
        raise _bad(path, line, field, f"is {value!r}, not a finite number")
    if whole:
        if value != int(value):
            raise _bad(path, line, field, f"is {value!r}, not a whole number of tokens")
        value = int(value)
        if not 1 <= value <= MAX_TRACE_TOKENS:
            raise _bad(path, line, field, f"is {value}, outside 1..{MAX_TRACE_TOKENS}")
        return value
    if value < 0:
        raise _bad(path, line, field, f"is {value:g}: arrival times are seconds from the start, >= 0")
    return float(value)


def _row(path: Path, line: int, data: dict[str, Any], last: float) -> TraceRow:
    given = [c for c in TIME_COLUMNS if data.get(c) not in (None, "")]
    if not given:
        raise _bad(path, line, "timestamp", "is missing (give timestamp or arrival_s, seconds from the start)")
    if len(given) > 1:
        raise _bad(path, line, "arrival_s", "and timestamp are both given: give one")
    offset = _number(path, line, given[0], data[given[0]], whole=False)
    assert isinstance(offset, float)
    if offset < last:
        raise _bad(path, line, given[0], f"is {offset:g}, earlier than the row before ({last:g}): sort by arrival")
    inp = _number(path, line, "input_tokens", data.get("input_tokens"), whole=True)
    out = _number(path, line, "output_tokens", data.get("output_tokens"), whole=True)
    return TraceRow(offset, int(inp) if inp is not None else None, int(out) if out is not None else None)


def _lines(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise ConfigError(
                f"{what}: trace {path} is {size} bytes, over the {MAX_TRACE_BYTES} byte limit",
                hint=f"replay a part of it (at most {MAX_TRACE_ROWS} rows)",
            )
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what}: trace file {path} does not exist", hint="check the path") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what}: trace file {path} is not UTF-8 text", hint="give a JSONL or CSV file") from None
    except OSError as e:
        raise ConfigError(f"{what}: cannot read trace file {path}: {e.strerror or e}", hint="check the path") from None


def read_trace(path: Path, what: str = "bench.trace") -> list[TraceRow]:
    """The rows of a JSONL or CSV trace (CSV when the name ends in .csv), checked: every bad row is one
    ``ConfigError`` naming the file, the line and the field. Columns other than the four known are ignored
    (traces exported from other tools carry more)."""
    text = _lines(path, what)
    rows: list[TraceRow] = []
    last = 0.0
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or not set(TIME_COLUMNS) & {f.strip() for f in reader.fieldnames}:
            raise _bad(path, 1, "header", "has no timestamp or arrival_s column")
        for rec in reader:
            if len(rows) >= MAX_TRACE_ROWS:
                raise _bad(path, reader.line_num, "row", f"is past the limit of {MAX_TRACE_ROWS} rows")
            data = {k.strip(): v for k, v in rec.items() if isinstance(k, str)}
            row = _row(path, reader.line_num, data, last)
            rows.append(row)
            last = row.offset_s
    else:
        for n, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            if len(rows) >= MAX_TRACE_ROWS:
                raise _bad(path, n, "row", f"is past the limit of {MAX_TRACE_ROWS} rows")
            try:
                data = json.loads(raw)
            except ValueError as e:
                raise _bad(path, n, "row", f"is not JSON ({e})") from None
            if not isinstance(data, dict):
                raise _bad(path, n, "row", "is not a JSON object")
            row = _row(path, n, data, last)
            rows.append(row)
            last = row.offset_s
    if not rows:
        raise ConfigError(f"{what}: trace {path} has no rows", hint="give at least one row with a timestamp")
    return rows


# ---- what run.json records ---------------------------------------------------------------------------


def open_loop_shape(
    level: Level, *, shards: int, seed: int, duration_s: float | None, trace: Sequence[TraceRow] | None, trace_file: str
) -> LoadShape:
    """run.json's ``load_shape`` of an open-loop level: everything needed to regenerate its arrival times."""
    shape: dict[str, Any] = {"kind": "open-loop"}
    if level.trace:
        assert trace  # a trace level replays a trace's rows; read_trace refuses a trace without any
        shape.update(
            arrivals="trace",
            trace=trace_file,
            trace_rows=len(trace),
            trace_span_s=round(trace[-1].offset_s, 6),
        )
    else:
        shape.update(
            arrivals=level.arrivals,
            rate_per_s=level.rate,
            rate_per_s_this_shard=shard_rate(level, shards),
            seed=seed,
        )
        if level.arrivals == "gamma":
            shape["burstiness"] = level.burstiness or 1.0
    shape.update(
        max_in_flight=level.concurrency or DEFAULT_MAX_IN_FLIGHT,
        max_in_flight_this_shard=shard_cap(level, shards),
        max_in_flight_set=level.capped,
        # an arrival that finds the cap reached is sent late; its TTFT counts from the send (queued_s in the record)
        ttft_from="send",
        duration_s=duration_s,
    )
    return LoadShape.model_validate(shape)
