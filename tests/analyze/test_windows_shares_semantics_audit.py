"""Window semantics by definition (NxDI window k proposes k - 1 tokens, upstream k proposes k), a class's
billed share of its level, and which semantics a server's signals show, with the words a user reads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spectrn.analyze.semantics import _MOVED, _V0_MOVED, _V0_STILL, _V1_STILL, choose, from_server
from spectrn.analyze.shares import LevelShare, decode_spans, level_share
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RunMeta
from spectrn.run.summary import Provenance, ServerIdentity
from spectrn.windows import draft_runs, expected_tokens_per_step, max_tokens_per_step, proposals, verified_tokens


@pytest.mark.parametrize(
    ("sem", "k", "proposed", "most", "drafts"),
    [("nxdi", 5, 4, 5, 5), ("upstream", 5, 5, 6, 5), ("nxdi", 1, 0, 1, 1), ("upstream", 1, 1, 2, 1)],
)
def test_a_window_proposes_emits_and_verifies_by_its_semantics(
    sem: str, k: int, proposed: int, most: int, drafts: int
) -> None:
    # NxDI: k draft runs, the first k - 1 proposed, k positions verified (k tokens at most); upstream: k proposals,
    # k + 1 positions verified, k + 1 tokens at most (the bonus token)
    assert proposals(sem, k) == proposed  # type: ignore[arg-type]
    assert max_tokens_per_step(sem, k) == most  # type: ignore[arg-type]
    assert verified_tokens(sem, k) == most  # type: ignore[arg-type]
    assert draft_runs(sem, k) == drafts  # type: ignore[arg-type]


def test_a_window_below_one_or_an_unknown_semantics_is_refused() -> None:
    with pytest.raises(ValueError, match="window 0 must be at least 1"):
        proposals("nxdi", 0)
    with pytest.raises(ValueError, match="'eagle' is not one of nxdi, upstream"):
        draft_runs("eagle", 3)  # type: ignore[arg-type]


def test_expected_tokens_per_step_accumulates_the_conditional_products() -> None:
    # 1 + 0.75 + 0.75 x 0.5 + 0.75 x 0.5 x 0.5 = 1 + 0.75 + 0.375 + 0.1875
    assert expected_tokens_per_step([0.75, 0.5, 0.5]) == 2.3125
    assert expected_tokens_per_step([]) == 1.0


# ---- a class's share of its level ----------------------------------------------------------------------------


def test_a_class_is_billed_the_walls_share_of_its_decode_slot_seconds() -> None:
    share = LevelShare(wall_s=10.0, slot_s=4.0)
    assert share.billed_s(1.0) == 2.5  # 10 s x 1 / 4
    assert LevelShare(wall_s=10.0, slot_s=0.0).billed_s(0.0) == 0.0


def test_decode_spans_run_from_first_to_last_token_and_are_never_negative() -> None:
    assert decode_spans([0.5, 2.0, 0.25], [1.5, 1.0, 0.25]).tolist() == [1.0, 0.0, 0.0]
    got = level_share([0.5, 0.25, math.nan], [1.5, 2.25, 3.0], wall_s=8.0)
    assert got == LevelShare(wall_s=8.0, slot_s=3.0)  # 1.0 + 2.0, the request without a TTFT adds nothing
    assert isinstance(got.slot_s, float) and not isinstance(got.slot_s, np.floating)


# ---- semantics from the server's signals ----------------------------------------------------------------------


def deltas(drafts: object) -> dict[str, object]:
    return {"source": "counter deltas", "drafts": drafts}


def test_the_first_moving_signal_decides_and_still_counters_mean_nxdi() -> None:
    assert from_server("v1", [deltas(0.0), deltas(3)]) == ("upstream", _MOVED)
    assert from_server("v0", [{"source": "v0 gauge", "rate": 0.0}]) == ("upstream", _V0_MOVED)  # a sample of 0
    assert from_server("v0", [{"source": "v0 gauge", "rate": None}]) == ("nxdi", _V0_STILL)
    assert from_server("v0", [deltas(0.0)]) == ("nxdi", _V1_STILL)  # measured counters outrank the family style
    assert from_server("v1", [deltas(True)]) == ("nxdi", _V1_STILL)  # a boolean is no count
    assert from_server(None, [{"source": "counters unusable", "drafts": 5}]) is None


def meta(dialect: str, **server: object) -> RunMeta:
    cfg = SpectrnConfig.model_validate({"vllm_dialect": dialect, "num_speculative_tokens": 4})
    prov = Provenance(servers={"speculative": ServerIdentity(**server)})  # type: ignore[arg-type]
    return RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=cfg, provenance=prov)


def test_the_servers_semantics_win_and_a_disagreement_is_stated_with_both_step_limits() -> None:
    m = meta("legacy-neuron", window=5, metrics_style="v1")
    got = choose(m, {"speculative@c4": deltas(12.0), "baseline@c4": deltas(0.0)})
    assert (got.semantics, got.source, got.evidence) == ("upstream", "server", _MOVED)
    assert got.conflict == (
        "WINDOW SEMANTICS: the config (vllm_dialect 'legacy-neuron') says nxdi (5 tokens per step at most at window "
        f"5), but the server says upstream: {_MOVED}. The figures use the server's: upstream (6 at most); set "
        "vllm_dialect/plugin_release to the server's stack"
    )
    agree = choose(meta("legacy-neuron", metrics_style="v0"), {})
    assert (agree.semantics, agree.source, agree.evidence, agree.conflict) == ("nxdi", "server", _V0_STILL, None)
    # only the speculative service's entries count: the baseline's moving counters say nothing about it
    quiet = choose(meta("legacy-neuron"), {"baseline@c4": deltas(12.0)})
    assert (quiet.semantics, quiet.source, quiet.conflict) == ("nxdi", "config", None)
