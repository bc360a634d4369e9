"""Fault injection for reliability tests: errors, mid-stream disconnects, stalls, malformed events.

Every decision comes from a seeded random stream per request (seed, request counter), so a run with the
same seed and arrival order fails the same requests in the same places.

- ``error_rate``: the request is answered at once with ``error_status`` (500 or 503) and vLLM's JSON error body.
- ``disconnect_rate``: a streaming request's connection is cut (no ``[DONE]``, no terminating chunk) after a
  random number of content events.
- ``stall_rate`` / ``stall_s``: after each engine step, with this probability the whole engine stalls for
  ``stall_s`` seconds (times ``time_scale``), as a runtime hiccup would: every running stream pauses.
- ``malformed_sse_rate``: one event of a streaming request carries truncated JSON.
- Slow start is ``SimSettings.startup_delay_s``: /health answers 503 until it has passed.
"""

from __future__ import annotations

import hashlib
import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class FaultSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    error_rate: float = Field(default=0.0, ge=0, le=1, description="Share of requests answered with error_status.")
    error_status: Literal[500, 503] = Field(default=500, description="HTTP status of injected errors.")
    disconnect_rate: float = Field(default=0.0, ge=0, le=1, description="Share of streams cut mid-way.")
    stall_rate: float = Field(default=0.0, ge=0, le=1, description="Probability per engine step of an engine stall.")
    stall_s: float = Field(default=1.0, ge=0, le=3600, description="Length of a stall (seconds, before time_scale).")
    malformed_sse_rate: float = Field(default=0.0, ge=0, le=1, description="Share of streams with one malformed event.")

    @property
    def any(self) -> bool:
        return bool(self.error_rate or self.disconnect_rate or self.stall_rate or self.malformed_sse_rate)


class FaultPlan(BaseModel):
    """What goes wrong with one request (decided when it arrives)."""

    model_config = ConfigDict(frozen=True)

    error: bool = False
    disconnect_after_events: int | None = None
    malformed_event: int | None = None


def plan_for(faults: FaultSettings, seed: int, counter: int) -> FaultPlan:
    if not faults.any:
        return FaultPlan()
    digest = hashlib.blake2b(f"faults\x00{seed}\x00{counter}".encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "little"))
    error = rng.random() < faults.error_rate
    disconnect = rng.randint(1, 16) if rng.random() < faults.disconnect_rate else None
    malformed = rng.randint(1, 8) if rng.random() < faults.malformed_sse_rate else None
    return FaultPlan(error=error, disconnect_after_events=disconnect, malformed_event=malformed)
