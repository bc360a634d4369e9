"""What a speculation window of ``k`` means on each kind of server: proposals, tokens verified, tokens emitted.

One definition for every module that reasons about windows (the simulator, analysis, prediction, sweeps); which
semantics a server dialect or a simulator profile has is its dialect's (``spectrn.dialects``):

``"nxdi"``
    NxDI fused speculation (the Neuron fork of vLLM and the vllm-neuron plugin 0.2.x): ``speculation_length = k``
    runs the draft ``k`` times but proposes only the first ``k - 1`` tokens; the target verifies ``k``
    positions (the last emitted token and the ``k - 1`` proposals), so a step emits at most ``k`` tokens.
    neuronx-distributed-inference ``models/model_base.py``: *"k" iterations of the draft model. We use only
    first "k-1" tokens. Extra run is for populating the kv cache*; the target then runs on
    ``candidate_input_ids[:, :-1]``.
``"upstream"``
    Upstream vLLM and the vllm-neuron plugin's eagle3 line 0.24.x (``num_speculative_tokens = k``): ``k``
    proposals, the target verifies ``k + 1`` positions and a step emits the accepted prefix plus one bonus
    token, at most ``k + 1`` tokens.

In both cases a step emits ``accepted + 1`` tokens (at least one), and the mean acceptance length of
``p`` conditional per-position acceptance probabilities is ``1 + sum_i prod_{j<=i} p_j`` over the
``proposals(sem, k)`` positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

WindowSemantics = Literal["nxdi", "upstream"]
SEMANTICS: tuple[WindowSemantics, ...] = get_args(WindowSemantics)


def _check(sem: str, k: int) -> None:
    if sem not in SEMANTICS:
        raise ValueError(f"window semantics {sem!r} is not one of {', '.join(SEMANTICS)}")
    if k < 1:
        raise ValueError(f"window {k} must be at least 1")


def proposals(sem: WindowSemantics, k: int) -> int:
    """Draft tokens proposed (and counted as draft tokens) per step."""
    _check(sem, k)
    return k - 1 if sem == "nxdi" else k


def max_tokens_per_step(sem: WindowSemantics, k: int) -> int:
    """The most tokens one speculative step can emit (all proposals accepted, plus the target's own token)."""
    return proposals(sem, k) + 1


def verified_tokens(sem: WindowSemantics, k: int) -> int:
    """Positions the target model processes per sequence in one speculative step."""
    return max_tokens_per_step(sem, k)


def draft_runs(sem: WindowSemantics, k: int) -> int:
    """Forward passes of the draft model per step (NxDI runs one more than it proposes, to fill its cache)."""
    _check(sem, k)
    return k


def expected_tokens_per_step(position_probs: Sequence[float]) -> float:
    """Mean tokens per step for conditional per-position acceptance probabilities (one per proposal)."""
    total, run = 1.0, 1.0
    for p in position_probs:
        run *= p
        total += run
    return total
