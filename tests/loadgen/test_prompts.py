"""Prompt sets and the shared request schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectrn.errors import ConfigError
from spectrn.loadgen.prompts import (
    Prompt,
    PromptSet,
    ScheduledRequest,
    build_schedule,
    load_prompt_set,
    split_schedule,
)


def test_builtin_sets_have_classes() -> None:
    structured = load_prompt_set("structured")
    assert {p.prompt_class for p in structured.prompts} == {"structured"}
    open_ = load_prompt_set("open")
    assert {p.prompt_class for p in open_.prompts} == {"open"}
    sample = load_prompt_set("sample")
    assert len(sample.prompts) == 8
    both = load_prompt_set("all")
    assert len(both.prompts) == len(structured.prompts) + len(open_.prompts)


def test_schedule_is_seeded_balanced_and_marks_warmup() -> None:
    ps = load_prompt_set("all")
    a = build_schedule(ps, requests=36, warmup=2, seed=3)
    b = build_schedule(ps, requests=36, warmup=2, seed=3)
    assert a == b
    assert [r.index for r in a] == list(range(38))
    assert [r.warmup for r in a[:3]] == [True, True, False]
    counts: dict[str, int] = {}
    for r in a[:36]:  # two whole passes over 18 prompts
        counts[r.prompt_id] = counts.get(r.prompt_id, 0) + 1
    assert set(counts.values()) == {2}
    assert build_schedule(ps, requests=36, warmup=2, seed=4) != a


def _eager(ps: PromptSet, requests: int, warmup: int, seed: int, nonce: str | None = None) -> list[ScheduledRequest]:
    """The schedule as the docstring defines it, built whole: passes over a seeded shuffle of the prompts."""
    import random

    rng = random.Random(seed)
    order: list[Prompt] = []
    while len(order) < warmup + requests:
        batch = list(ps.prompts)
        rng.shuffle(batch)
        order.extend(batch)
    return [
        ScheduledRequest(i, p.id, p.prompt_class, f"[{nonce}-{i}] {p.text}" if nonce else p.text, i < warmup)
        for i, p in enumerate(order[: warmup + requests])
    ]


@pytest.mark.parametrize(("requests", "warmup", "shards"), [(37, 3, 1), (37, 3, 4), (5, 0, 3), (2, 7, 2), (0, 4, 3)])
def test_the_lazy_schedule_is_the_eager_one_in_every_view(requests: int, warmup: int, shards: int) -> None:
    ps = load_prompt_set("all")
    lazy = build_schedule(ps, requests=requests, warmup=warmup, seed=9, nonce="n")
    eager = _eager(ps, requests, warmup, 9, "n")
    assert list(lazy) == eager and lazy == eager and len(lazy) == len(eager)
    assert [lazy[i] for i in range(-len(eager), len(eager))] == eager + eager
    assert list(lazy[2:9:3]) == eager[2:9:3] and lazy[::-1] == eager[::-1]
    for shard in range(shards):
        warm, measured = split_schedule(lazy, shard, shards)
        mine = [r for r in eager if r.index % shards == shard]
        assert list(warm) == [r for r in mine if r.warmup] and list(measured) == [r for r in mine if not r.warmup]
        assert (len(warm), len(measured)) == (sum(r.warmup for r in mine), sum(not r.warmup for r in mine))
        # a plain list (tests, other callers) splits the same way
        assert split_schedule(eager, shard, shards) == (
            [r for r in mine if r.warmup],
            [r for r in mine if not r.warmup],
        )
    with pytest.raises(IndexError):
        lazy[len(eager)]


def test_a_million_request_schedule_holds_a_few_megabytes() -> None:
    """Open loop at a high rate for a long time: the schedule is one prompt position per request, not a
    request object with its text (which cost ~190 MiB at 500k requests)."""
    import sys

    s = build_schedule(load_prompt_set("all"), requests=1_000_000, warmup=0, seed=1)
    assert len(s) == 1_000_000 and s[999_999].index == 999_999
    assert sys.getsizeof(s._order) < 5_000_000


def test_nonce_is_unique_per_index_and_shared_by_endpoints() -> None:
    ps = load_prompt_set("structured")
    s = build_schedule(ps, requests=4, warmup=0, seed=0, nonce="run1")
    assert len({r.text for r in s}) == 4
    assert s[0].text.startswith("[run1-0] ")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("prompts: [{id: a, class: c, text: hi, colour: red}]", "colour"),
        ("prompts: []", "prompts"),
        ("- just\n- a list\n", "mapping"),
        ("prompts: [{id: a, class: c, text: x}, {id: a, class: c, text: y}]", "duplicate prompt id"),
        ("prompts: [{id: a, text: x}]", "class"),
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("prompts: [{id: a, class: c, text: x}", "malformed YAML"),
    ],
)
def test_bad_prompt_files_name_the_problem(tmp_path: Path, content: str, needle: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_prompt_set(str(f))
    assert needle in str(e.value)


def test_non_utf8_prompt_file(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_bytes(b"prompts: [{id: a, class: c, text: \xff\xfe}]")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_prompt_set(str(f))


def test_unknown_set_name() -> None:
    with pytest.raises(ConfigError, match="unknown prompt set"):
        load_prompt_set("nope")


TWO_CLASSES = "name: s\nprompts: [{id: x, class: a, text: hi}, {id: y, class: b, text: yo}]\n"


@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        ("{a: -1}", "class_weights: -1.0 for class 'a' is not a positive weight"),
        ("{a: 0}", "class_weights: 0.0 for class 'a' is not a positive weight"),
        ("{a: .inf}", "class_weights: inf for class 'a' is not a positive weight"),
        ("{a: .nan}", "class_weights: nan for class 'a' is not a positive weight"),
    ],
)
def test_a_prompt_files_class_weights_must_be_positive_shares(tmp_path: Path, weights: str, problem: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(f"{TWO_CLASSES}class_weights: {weights}\n")
    with pytest.raises(ConfigError) as e:
        load_prompt_set(str(f))
    assert e.value.message == f"prompt file {f}: {problem}"


def test_a_prompt_files_class_weights_name_only_its_classes(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(f"{TWO_CLASSES}class_weights: {{a: 2, c: 1}}\n")
    with pytest.raises(ConfigError) as e:
        load_prompt_set(str(f))
    assert (e.value.message, e.value.hint) == (
        f"prompt file {f}: class_weights names class(es) c that no prompt has",
        "use the file's classes: a, b",
    )
    f.write_text(f"{TWO_CLASSES}class_weights: {{a: 2.5}}\n")
    assert load_prompt_set(str(f)).class_weights == {"a": 2.5}
