"""run.json's ``load_shape``: the typed record of how one load level started its requests (``LoadShape``).

Written by the load generator (``spectrn.loadgen.runner`` for closed loops, ``spectrn.loadgen.arrivals`` for open
loops) into ``RunMeta.load_shape`` (level label -> ``LoadShape``); read by the summary's provenance line and the
twin's replay of the start ramp. Everything needed to regenerate a level's arrival times is here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from spectrn.run.summary import Contract


class LoadShape(Contract):
    """One load level's shape: a closed loop (streams) or an open loop (arrivals); the other kind's fields null."""

    kind: Literal["closed-loop", "open-loop"] = Field(description="Closed loop (C streams) or open loop (arrivals).")
    # closed loop
    concurrency: int | None = Field(default=None, description="Closed loop: streams per endpoint, all shards.")
    concurrency_this_shard: int | None = Field(default=None, description="Closed loop: this shard's streams.")
    mode: str | None = Field(default=None, description="Closed loop: how endpoints are driven (bench.mode).")
    ramp_s: float | None = Field(default=None, description="Closed loop: seconds over which the streams start.")
    ramp: str | None = Field(default=None, description="Closed loop: why that ramp (auto rule or configured).")
    start_interval_s: float | None = Field(default=None, description="Closed loop: seconds between stream starts.")
    first_wave: str | None = Field(default=None, description="Closed loop: whether the first wave is measured.")
    # open loop
    arrivals: Literal["poisson", "constant", "gamma", "trace"] | None = Field(
        default=None, description="Open loop: the arrival process."
    )
    rate_per_s: float | None = Field(default=None, description="Open loop: requests per second, all shards.")
    rate_per_s_this_shard: float | None = Field(default=None, description="Open loop: this shard's rate.")
    seed: int | None = Field(default=None, description="Open loop: the seed of the arrival times.")
    burstiness: float | None = Field(default=None, description="Gamma arrivals: the gap distribution's shape.")
    trace: str | None = Field(default=None, description="Trace replay: the trace file.")
    trace_rows: int | None = Field(default=None, description="Trace replay: rows replayed.")
    trace_span_s: float | None = Field(
        default=None,
        description="Trace replay: seconds from the level's start to the last row (its offset in the trace).",
    )
    max_in_flight: int | None = Field(default=None, description="Open loop: the in-flight cap, all shards.")
    max_in_flight_this_shard: int | None = Field(default=None, description="Open loop: this shard's cap.")
    max_in_flight_set: bool | None = Field(default=None, description="Open loop: the cap was set (not the default).")
    ttft_from: Literal["send"] | None = Field(
        default=None, description="Open loop: TTFT counts from the send (a capped arrival waits; queued_s records it)."
    )
    # either
    duration_s: float | None = Field(default=None, description="Seconds per level (bench.duration_s), when set.")
    sent: dict[str, int] | None = Field(
        default=None, description="Duration runs: endpoint -> measured requests actually sent at this level."
    )

    def text(self, label: str) -> str:
        """This level's shape in words, for the report."""
        duration = f", {self.duration_s:g} s per level" if self.duration_s is not None else ""
        if self.kind == "closed-loop":
            ramp = self.ramp_s
            start = "all streams start at once" if not ramp else f"streams start over {ramp} s ({self.ramp})"
            n = self.concurrency
            start = "the stream starts at once" if n == 1 and not ramp else start
            return f"{label}: closed loop, {n} stream{'' if n == 1 else 's'}, {start}{duration}"
        kind = self.arrivals or "poisson"
        if kind == "trace":
            what = f"trace replay of {self.trace} ({self.trace_rows} rows over {self.trace_span_s} s)"
        elif kind == "gamma":
            what = f"gamma arrivals (burstiness {self.burstiness}) at {self.rate_per_s} req/s"
        elif kind == "constant":
            what = f"constant arrivals at {self.rate_per_s} req/s"
        else:
            what = f"Poisson {self.rate_per_s} req/s"
        cap = f", at most {self.max_in_flight} in flight" if self.max_in_flight_set else ""
        return f"{label}: open loop, {what}{cap}{duration}"
