"""Schedules and synthetic lengths, worked out by hand (audit, issue 29)."""

from __future__ import annotations

from spectrn.configuration.bench import LengthDistribution
from spectrn.loadgen.prompts import Prompt, PromptSet, build_schedule
from spectrn.loadgen.synthetic import draw


def _prompt(pid: str, cls: str, text: str, turns: list[str] | None = None) -> Prompt:
    return Prompt(id=pid, **{"class": cls}, text=text, turns=turns)


def test_equal_class_weights_alternate_starting_with_the_first_class_by_name() -> None:
    # smooth weighted round robin, weights 1:1: credits tie every other round and the tie goes to "a"
    ps = PromptSet(name="s", prompts=[_prompt("b1", "b", "bee"), _prompt("a1", "a", "ay")], class_weights={"a": 1.0})
    schedule = build_schedule(ps, requests=4, warmup=0, seed=0)
    assert [r.prompt_class for r in schedule] == ["a", "b", "a", "b"]


def test_the_nonce_tags_the_first_turn_of_a_conversation() -> None:
    ps = PromptSet(name="s", prompts=[_prompt("c1", "chat", "first", ["first", "second"])])
    (req,) = build_schedule(ps, requests=1, warmup=0, seed=0, nonce="N")
    assert (req.text, req.turns) == ("[N-0] first", ("[N-0] first", "second"))


def test_synthetic_lengths_round_to_the_nearest_token() -> None:
    assert draw(LengthDistribution(dist="fixed", mean=10.6), None) == 11  # type: ignore[arg-type]
    assert draw(LengthDistribution(dist="fixed", mean=10.4), None) == 10  # type: ignore[arg-type]
    assert draw(LengthDistribution(dist="fixed", mean=10.6, max=8), None) == 8  # type: ignore[arg-type]
