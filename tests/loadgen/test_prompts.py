"""Prompt sets and the shared request schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectrn.errors import ConfigError
from spectrn.loadgen.prompts import build_schedule, load_prompt_set


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
