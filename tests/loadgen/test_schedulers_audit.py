"""Per-request parameters and the closed-loop ramp, worked out by hand (audit, issue 29).

Rules (``spectrn.loadgen.schedulers``): a trace row's output_tokens replaces max_tokens; else a prompt's own
output length does when it is below bench.max_tokens; the automatic ramp starts one stream every 10 ms after
the first, at most 10 s and at most half the median warm-up request.
"""

from __future__ import annotations

from pathlib import Path

from spectrn.loadgen.arrivals import Level, TraceRow
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.plan import RunPlan
from spectrn.loadgen.prompts import ScheduledRequest
from spectrn.loadgen.schedulers import _params_for, _system, closed_loop_ramp


def _plan(**kw: object) -> RunPlan:
    return RunPlan(
        run_id="r",
        out_dir=Path("."),
        endpoints={},
        schedule=[],
        params=RequestParams(model="m", max_tokens=100),
        levels=[],
        **kw,  # type: ignore[arg-type]
    )


def _req(index: int, output_tokens: int | None = None, warmup: bool = False) -> ScheduledRequest:
    return ScheduledRequest(index, "p", "c", "text", warmup, output_tokens=output_tokens)


def test_a_prompts_output_length_caps_max_tokens_only_below_the_runs() -> None:
    plan = _plan()
    assert _params_for(plan, _req(0, 40)).max_tokens == 40
    assert _params_for(plan, _req(0, 100)).max_tokens == 100
    assert _params_for(plan, _req(0, 250)).max_tokens == 100  # never above bench.max_tokens
    assert _params_for(plan, _req(0)).max_tokens == 100


def test_a_trace_rows_output_tokens_replace_max_tokens() -> None:
    # measured request k replays row k; the first measured request has schedule index 2 (two warm-ups)
    plan = _plan(trace=[TraceRow(0.0, output_tokens=300), TraceRow(1.0)], trace_first_index=2)
    assert _params_for(plan, _req(2, 40)).max_tokens == 300  # the row's, even above bench.max_tokens
    assert _params_for(plan, _req(3, 40)).max_tokens == 40  # a row without output_tokens: the prompt's
    assert _params_for(plan, _req(1, 40, warmup=True)).max_tokens == 40  # warm-ups replay no row


def test_the_automatic_ramp() -> None:
    plan = _plan()
    # 8 streams: 7 gaps of 10 ms
    assert closed_loop_ramp(plan, Level.closed(8), None) == (0.07, "auto: 10 ms per stream")
    assert closed_loop_ramp(plan, Level.closed(2000), None) == (10.0, "auto: 10 ms per stream, capped at 10 s")
    # half of a 0.1 s warm-up request: 0.05 s, below the 0.07 s of 8 streams
    assert closed_loop_ramp(plan, Level.closed(8), 0.1) == (
        0.05,
        "auto: 10 ms per stream, capped at half a warm-up request (0.1 s)",
    )
    assert closed_loop_ramp(plan, Level.closed(8), 0.2)[0] == 0.07  # half is 0.1 s: no cap
    assert closed_loop_ramp(_plan(ramp_s=3.0), Level.closed(8), 0.1) == (3.0, "bench.ramp_s")


def test_the_workloads_system_prompt_is_a_system_message() -> None:
    req = ScheduledRequest(0, "p", "c", "text", False, system="be brief")
    assert _system(req) == [{"role": "system", "content": "be brief"}]
    assert _system(_req(0)) == []
