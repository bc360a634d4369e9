"""How ``bench.workload`` shapes a prompt set and names classes, whole values by hand (audit, issue 29)."""

from __future__ import annotations

from spectrn.configuration.bench import WorkloadConfig
from spectrn.loadgen.prompts import Prompt, PromptSet
from spectrn.loadgen.workloads import class_for, shape


def _set(**extra: object) -> PromptSet:
    prompts = [
        Prompt(id="p1", **{"class": "a"}, text="one"),
        Prompt(id="p2", **{"class": "b"}, text="two", turns=["two", "second turn"]),
        Prompt(id="p3", **{"class": "b"}, text="three"),
    ]
    return PromptSet(name="s", prompts=prompts, **extra)  # type: ignore[arg-type]


def test_a_sample_as_large_as_the_set_keeps_every_prompt_and_says_so() -> None:
    notes: list[str] = []
    out = shape(_set(), WorkloadConfig(sample=3), seed=1, source="s", notes=notes)
    assert [p.id for p in out.prompts] == ["p1", "p2", "p3"]
    assert notes == ["bench.workload.sample: 3 is not below the 3 prompts; all are used"]


def test_configured_class_weights_and_system_prompt_override_the_sets() -> None:
    base = _set(class_weights={"a": 1.0, "b": 2.0}, system_prompt="from the set")
    out = shape(base, WorkloadConfig(class_weights={"b": 5.0}, system_prompt="from the config"), seed=0, source="s")
    assert (out.class_weights, out.system_prompt) == ({"a": 1.0, "b": 5.0}, "from the config")
    kept = shape(base, WorkloadConfig(), seed=0, source="s")
    assert (kept.class_weights, kept.system_prompt) == ({"a": 1.0, "b": 2.0}, "from the set")


def test_a_prefix_leads_the_text_and_the_first_turn_only() -> None:
    out = shape(_set(), WorkloadConfig(prefix="CTX "), seed=0, source="s")
    assert [(p.text, p.turns) for p in out.prompts] == [
        ("CTX one", None),
        ("CTX two", ["CTX two", "second turn"]),
        ("CTX three", None),
    ]


def test_class_names_map_then_sanitize_to_63_characters() -> None:
    opts = WorkloadConfig(class_map={"math reasoning": "math"})
    assert class_for("math reasoning", opts) == "math"  # mapped before sanitizing
    assert class_for("Q&A / RAG", opts) == "Q-A-RAG"
    assert class_for("x" * 70 + "!", opts) == "x" * 63
    assert class_for(None, opts) == opts.default_class and class_for("", opts) == opts.default_class
