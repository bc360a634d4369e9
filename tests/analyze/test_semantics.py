"""Window semantics from the server's signals (metric families, whether the counters moved), and per config."""

from __future__ import annotations

from spectrn.analyze.semantics import from_server
from spectrn.dialects import semantics_of, semantics_of_profile


def test_plugin_0_2_runs_nxdi_semantics_and_the_current_plugin_upstream() -> None:
    # docs/neuron.md: the fork and plugin 0.2.x load NxDI fused speculation (at most k tokens per step); the
    # current plugin's eagle3 proposes k tokens plus a bonus (k + 1)
    assert semantics_of("legacy-neuron") == "nxdi"
    assert semantics_of("legacy-neuron", "current") == "nxdi"  # plugin_release means nothing on the fork
    assert semantics_of("vllm-neuron", "0.2") == "nxdi"
    assert semantics_of("vllm-neuron", "0.5") == "nxdi"  # the last NxDI line (DLC 0.16.0), as 0.2.x
    assert semantics_of("vllm-neuron", "current") == "upstream"
    assert [semantics_of_profile(p) for p in ("neuron-fork", "vllm-neuron", "vllm-neuron-0.24", "upstream")] == [
        "nxdi", "nxdi", "upstream", "upstream"
    ]  # fmt: skip
    assert semantics_of_profile("vllm-neuron-0.5") == "nxdi"


def _deltas(drafts: float) -> dict[str, object]:
    return {"source": "counter deltas", "drafts": drafts, "draft_tokens": drafts * 4, "accepted_tokens": 0.0}


def test_moving_counters_mean_upstream_and_still_ones_nxdi() -> None:
    assert from_server("v1", [_deltas(0.0), _deltas(12.0)])[0] == "upstream"  # type: ignore[index]
    assert from_server("v1", [_deltas(0.0), _deltas(0.0)])[0] == "nxdi"  # type: ignore[index]
    assert from_server("v0", [])[0] == "nxdi"  # type: ignore[index]
    v0_sample = {"source": "v0 gauge (cumulative since server start, not this run)", "rate": 0.5}
    assert from_server("v0", [v0_sample])[0] == "upstream"  # type: ignore[index]


def test_no_signal_and_unusable_counters_decide_nothing() -> None:
    assert from_server(None, []) is None
    assert from_server("v1", []) is None  # families registered, but no run measured them
    unusable = {"source": "counters unusable: a counter went down", "rate": None}
    assert from_server("v1", [unusable]) is None
