"""Workloads from the user's own files (``spectrn.loadgen.workloads``): every reader, the shaping options, the
low-diversity finding, one exact error per bad row, and end to end through ``spectrn bench --local``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spectrn.configuration.bench import WorkloadConfig
from spectrn.errors import ConfigError
from spectrn.loadgen.prompts import Prompt, PromptSet, build_schedule
from spectrn.loadgen.workloads import (
    class_for,
    detect_format,
    distinct_5gram_share,
    load_workload,
    workload_warnings,
)

TEXTS = [
    "Explain how a hash map handles collisions in plain words.",
    "Write a short poem about autumn leaves falling on a quiet street.",
    "List three uses of the Fourier transform in signal processing.",
    "Summarize the causes of the French revolution in two sentences.",
    "What is the derivative of x squared times the sine of x?",
    "Translate 'good morning, how are you' into Spanish and German.",
]


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _sharegpt(path: Path) -> Path:
    data = [
        {
            "id": f"c{i}",
            "category": "chat" if i % 2 else "code gen",
            "conversations": [
                {"from": "human", "value": text},
                {"from": "gpt", "value": "x" * (40 + i)},
                {"from": "human", "value": "And then?"},
            ],
        }
        for i, text in enumerate(TEXTS)
    ]
    data.append({"id": "empty", "conversations": [{"from": "gpt", "value": "hello"}]})  # no user turn: skipped
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _spec_bench(path: Path) -> Path:
    cats = ["writing", "math_reasoning", "writing", "math_reasoning", "qa", "qa"]
    return _jsonl(
        path,
        [
            {"question_id": 81 + i, "category": c, "turns": [t, "Now shorter."]}
            for i, (t, c) in enumerate(zip(TEXTS, cats, strict=True))
        ],
    )


def _hf(path: Path) -> Path:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict(
        {
            "question": TEXTS,
            "topic": ["science", "arts", "science", "arts", "science", "arts"],
            "n": [8, 9, 10, 11, 12, 13],
        }
    ).save_to_disk(str(path))
    return path


HF_OPTS = {"prompt_field": "question", "class_field": "topic", "output_tokens_field": "n"}

# ---- readers ----


def test_jsonl_prompt_and_messages_rows(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "w.jsonl",
        [
            {"prompt": TEXTS[0], "class": "code", "id": "a", "output_tokens": 50},
            {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEXTS[1]},
                          {"role": "assistant", "content": "ok"}, {"role": "user", "content": "More."}],
             "category": "Creative Writing", "max_tokens": 30},
            {"text": TEXTS[2]},
        ],
    )  # fmt: skip
    ps, _ = load_workload(str(path))
    a, b, c = ps.prompts
    assert (a.id, a.prompt_class, a.text, a.output_tokens, a.turns) == ("a", "code", TEXTS[0], 50, None)
    assert (b.id, b.prompt_class, b.output_tokens) == ("2", "Creative-Writing", 30)
    assert b.text == f"Be brief.\n\n{TEXTS[1]}" and b.turns == [b.text, "More."]
    assert (c.id, c.prompt_class) == ("3", "default")


def test_sharegpt_first_human_turn_and_answer_hint(tmp_path: Path) -> None:
    ps, notes = load_workload(str(_sharegpt(tmp_path / "sg.json")))
    assert [p.id for p in ps.prompts] == [f"c{i}" for i in range(6)]
    first = ps.prompts[0]
    assert first.text == TEXTS[0] and first.turns == [TEXTS[0], "And then?"]
    assert first.output_tokens == 10  # ceil(40 characters / 4)
    assert {p.prompt_class for p in ps.prompts} == {"chat", "code-gen"}
    assert any("skipped 1 conversation(s) without a user turn" in n for n in notes)


def test_csv_with_header(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(
        "\ufeffid,text,category,output_tokens\n"
        f'q1,"{TEXTS[0]}",math,12\n'
        'q2,"a prompt, with a comma\nand a newline",,\n',
        encoding="utf-8",
    )
    ps, _ = load_workload(str(path))
    assert [(p.id, p.prompt_class, p.output_tokens) for p in ps.prompts] == [
        ("q1", "math", 12),
        ("q2", "default", None),
    ]
    assert ps.prompts[1].text == "a prompt, with a comma\nand a newline"


def test_spec_bench_categories_and_turns(tmp_path: Path) -> None:
    path = _spec_bench(tmp_path / "question.jsonl")
    assert detect_format(path) == "spec-bench"
    ps, _ = load_workload(str(path))
    assert [p.id for p in ps.prompts] == [str(81 + i) for i in range(6)]
    assert {p.prompt_class for p in ps.prompts} == {"writing", "math_reasoning", "qa"}
    assert ps.prompts[0].turns == [TEXTS[0], "Now shorter."] and ps.prompts[0].text == TEXTS[0]


def test_hf_dataset_saved_to_disk(tmp_path: Path) -> None:
    path = _hf(tmp_path / "ds")
    assert detect_format(path) == "hf-disk"
    ps, _ = load_workload(str(path), WorkloadConfig(**HF_OPTS))
    assert [p.text for p in ps.prompts] == TEXTS
    assert [p.prompt_class for p in ps.prompts[:2]] == ["science", "arts"]
    assert [p.output_tokens for p in ps.prompts] == [8, 9, 10, 11, 12, 13]
    assert [p.id for p in ps.prompts] == ["0", "1", "2", "3", "4", "5"]


def test_hf_unknown_column_names_the_choices(tmp_path: Path) -> None:
    path = _hf(tmp_path / "ds")
    with pytest.raises(ConfigError) as e:
        load_workload(str(path), WorkloadConfig(prompt_field="prompt"))
    assert e.value.message == f"prompt folder {path} has no column 'prompt' (bench.workload.prompt_field)"
    assert e.value.hint == "use one of its columns: question, topic, n"


def test_hf_without_the_datasets_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(ConfigError) as e:
        load_workload(str(tmp_path), WorkloadConfig(format="hf-disk"))
    assert "needs the datasets library" in e.value.message
    assert e.value.hint == "pip install 'spectrn[datasets]'"


def test_yaml_sets_unchanged(tmp_path: Path) -> None:
    ps, warnings = load_workload("structured")
    assert ps.name == "structured" and {p.prompt_class for p in ps.prompts} == {"structured"}
    assert warnings == []  # packaged sets are what they are: no finding
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nprompts:\n  - {id: p, class: c, text: hello}\n")
    assert detect_format(path) == "yaml"
    assert load_workload(str(path))[0].prompts == [Prompt(id="p", **{"class": "c"}, text="hello")]


# ---- options ----


def test_seeded_sampling_is_reproducible(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "w.jsonl", [{"prompt": f"prompt number {i} " * 3} for i in range(50)])
    opts = WorkloadConfig(sample=7)
    a = [p.id for p in load_workload(str(path), opts, seed=3)[0].prompts]
    assert a == [p.id for p in load_workload(str(path), opts, seed=3)[0].prompts]
    assert a != [p.id for p in load_workload(str(path), opts, seed=4)[0].prompts]
    assert len(a) == 7 and a == sorted(a, key=int)  # file order kept


def test_length_filters_count_characters(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "w.jsonl", [{"prompt": "x" * n} for n in (5, 10, 20)])
    ps, _ = load_workload(str(path), WorkloadConfig(min_chars=10, max_chars=10, system_prompt="long " * 10))
    assert [p.id for p in ps.prompts] == ["2"]  # measured before the system prompt is added
    with pytest.raises(ConfigError, match="no prompt of .* has 100 to 200 characters"):
        load_workload(str(path), WorkloadConfig(min_chars=100, max_chars=200))


def test_class_map_and_sanitizing() -> None:
    opts = WorkloadConfig(class_map={"math reasoning": "math"})
    assert class_for("math reasoning", opts) == "math"
    assert class_for("Q&A / RAG", opts) == "Q-A-RAG"
    assert class_for("..hidden..", opts) == "hidden"
    assert class_for("a" * 80, opts) == "a" * 63
    assert class_for("!!!", opts) == class_for(None, opts) == "default"
    assert class_for(7, opts) == "7"


def test_class_weights_shape_the_schedule(tmp_path: Path) -> None:
    rows = [{"prompt": f"{t} {i}", "class": "a" if i < 5 else "b"} for i, t in enumerate(TEXTS * 2)]
    path = _jsonl(tmp_path / "w.jsonl", rows)
    ps, _ = load_workload(str(path), WorkloadConfig(class_weights={"a": 3}))
    schedule = build_schedule(ps, requests=400, warmup=0, seed=1)
    counts = Counter(r.prompt_class for r in schedule)
    assert counts == {"a": 300, "b": 100}
    assert schedule == build_schedule(ps, requests=400, warmup=0, seed=1)
    with pytest.raises(ConfigError, match="class_weights names class.* c that"):
        load_workload(str(path), WorkloadConfig(class_weights={"c": 1}))


def test_system_prompt_and_prefix_on_every_request(tmp_path: Path) -> None:
    path = _spec_bench(tmp_path / "question.jsonl")
    ps, _ = load_workload(str(path), WorkloadConfig(system_prompt="You are terse.", prefix="Context: none. "))
    lead = "Context: none. "
    assert all(p.text.startswith(lead) and p.turns and p.turns[0] == p.text for p in ps.prompts)
    assert ps.system_prompt == "You are terse."  # sent as the conversation's system message, not in the text
    schedule = build_schedule(ps, requests=12, warmup=0, seed=0)
    assert {r.text[: len(lead)] for r in schedule} == {lead} and {r.system for r in schedule} == {"You are terse."}
    assert {r.system for r in schedule.part(0, 2, warmup=False)} == {"You are terse."}


def test_bad_options_fail_in_the_config() -> None:
    with pytest.raises(ValueError, match="is not a safe name"):
        WorkloadConfig(class_map={"x": "a b"})
    with pytest.raises(ValueError, match="min_chars 5 is above max_chars 2"):
        WorkloadConfig(min_chars=5, max_chars=2)
    with pytest.raises(ValueError, match="not a positive weight"):
        WorkloadConfig(class_weights={"a": 0})


# ---- low-diversity finding ----


def test_low_diversity_classes_are_reported() -> None:
    template = "Please fill in the form for customer number {} and send it back today " + "before noon " * 10
    ps = PromptSet(
        name="t",
        prompts=[Prompt(id=f"f{i}", **{"class": "forms"}, text=template.format(i)) for i in range(20)]
        + [Prompt(id="s1", **{"class": "single"}, text="same"), Prompt(id="s2", **{"class": "single"}, text="same")]
        + [Prompt(id=f"v{i}", **{"class": "varied"}, text=t) for i, t in enumerate(TEXTS)],
    )
    warnings = workload_warnings(ps)
    assert len(warnings) == 2
    assert warnings[0].startswith("prompt class forms: its prompts are near-identical (only ")
    assert warnings[1].startswith("prompt class single has 1 distinct prompt(s)")


def test_shared_prefix_does_not_count_as_sameness(tmp_path: Path) -> None:
    assert distinct_5gram_share(TEXTS) == 1.0
    assert distinct_5gram_share(["a b c d e f"] * 4) == 0.25
    lead = "You are a helpful assistant who answers carefully and with citations. " * 5
    path = _jsonl(tmp_path / "w.jsonl", [{"prompt": t, "class": "c"} for t in TEXTS])
    assert load_workload(str(path), WorkloadConfig(system_prompt=lead))[1] == []


# ---- bad rows: one error naming file, line and field ----

NOT_JSON = "not valid JSON (Expecting value: line 1 column 1 (char 0))"
BAD_JSONL = [
    ('{"prompt": "ok"}\n{"class": "c"}\n', "line 2, field 'prompt': missing: the row needs prompt or text or messages"),
    ('{"prompt": "ok"}\n{"prompt": 3}\n', "line 2, field 'prompt': must be a non-empty string"),
    ('{"prompt": "ok"}\nnot json\n', f"line 2, field '(line)': {NOT_JSON}"),
    ('{"messages": [{"role": "assistant", "content": "x"}]}\n', "line 1, field 'messages': has no message with"),
    ('{"prompt": "a", "output_tokens": -1}\n', "line 1, field 'output_tokens': must be a whole number of tokens"),
    ('{"prompt": "a", "id": "x"}\n{"prompt": "b", "id": "x"}\n', "line 2, field 'id': 'x' is used twice"),
    ('{"prompt": "a", "class": ["c"]}\n', "line 1, field 'class': must be a string, not list"),
    ("[1, 2]\n", "line 1, field '(row)': must be an object, not list"),
]


@pytest.mark.parametrize(("content", "expect"), BAD_JSONL)
def test_bad_jsonl_rows(tmp_path: Path, content: str, expect: str) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_workload(str(path))
    assert e.value.message.startswith(f"prompt file {path}, {expect}"), e.value.message
    assert "docs/workloads.md" in (e.value.hint or "")


def test_bad_spec_bench_row(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "q.jsonl", [{"question_id": 1, "turns": ["a"]}, {"question_id": 2, "turns": ["a", ""]}])
    with pytest.raises(ConfigError) as e:
        load_workload(str(path), WorkloadConfig(format="spec-bench"))
    assert e.value.message == f"prompt file {path}, line 2, field 'turns[1]': must be a non-empty string"


def test_bad_sharegpt_record(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    path.write_text(json.dumps([{"id": "a", "conversations": [{"from": "human", "value": "hi"}]}, {"id": "b"}]))
    with pytest.raises(ConfigError) as e:
        load_workload(str(path))
    assert (
        e.value.message
        == f"prompt file {path}, record [1], field 'conversations': missing: the row needs conversations"
    )
    path.write_text(json.dumps([{"id": "a", "conversations": [{"from": "human"}]}]))
    with pytest.raises(ConfigError) as e:
        load_workload(str(path))
    assert e.value.message == (
        f'prompt file {path}, record [0], field \'conversations[0]\': must be an object with "from" and "value" strings'
    )


def test_bad_csv_rows(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("prompt,output_tokens\nhello,5\nworld,many\n")
    with pytest.raises(ConfigError) as e:
        load_workload(str(path))
    assert e.value.message == (
        f"prompt file {path}, line 3, field 'output_tokens': must be a whole number of tokens from 1 to 1000000, "
        "not 'many'"
    )
    path.write_text("prompt,class\nhello,a,extra\n")
    with pytest.raises(ConfigError, match="line 2, field '\\(row\\)': has more values than the header"):
        load_workload(str(path))
    path.write_text("question\nhello\n")
    with pytest.raises(ConfigError, match="line 2, field 'prompt': missing"):
        load_workload(str(path))


def test_bad_hf_row(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"prompt": ["fine", "   "]}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(ConfigError) as e:
        load_workload(str(tmp_path / "ds"))
    assert e.value.message == f"prompt file {tmp_path / 'ds'}, row [1], field 'prompt': must be a non-empty string"


def test_not_utf8_and_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.jsonl"
    path.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    with pytest.raises(ConfigError, match=r"line 2 is not UTF-8"):
        load_workload(str(path))
    monkeypatch.setattr("spectrn.loadgen.workloads.MAX_WORKLOAD_FILE_BYTES", 10)
    with pytest.raises(ConfigError, match="over the 10-byte limit"):
        load_workload(str(path))
    with pytest.raises(ConfigError, match="does not exist"):
        load_workload(str(tmp_path / "nope.jsonl"))


def test_prompt_turns_must_start_with_text() -> None:
    with pytest.raises(ValueError, match="turns\\[0\\] must be the prompt's text"):
        Prompt(id="p", **{"class": "c"}, text="a", turns=["b"])


# ---- end to end: the real CLI, a local simulator pair ----


def _bench(prompts: Path, out: Path, *, requests: int, concurrency: int) -> list[str]:
    return ["bench", "--local", "--prompts", str(prompts), "--requests", str(requests),
            "--concurrency", str(concurrency), "--time-scale", "0.05", "--max-tokens", "16",
            "--out-dir", str(out), "--run-id", "r", "--no-report"]  # fmt: skip


@pytest.mark.parametrize(
    ("maker", "extra", "classes"),
    [
        # two-turn conversations: the second turn is reported as its own class, <class>-t2
        (_sharegpt, (), {"chat", "code-gen", "chat-t2", "code-gen-t2"}),
        (_spec_bench, (), {"writing", "math_reasoning", "qa", "writing-t2", "math_reasoning-t2", "qa-t2"}),
        (_hf, tuple(a for k, v in HF_OPTS.items() for a in ("--set", f"bench.workload.{k}={v}")), {"science", "arts"}),
    ],
    ids=["sharegpt", "spec-bench", "hf-disk"],
)
def test_bench_local_with_a_workload_file(
    cli: Any, tmp_path: Path, maker: Any, extra: tuple[str, ...], classes: set[str]
) -> None:
    name = {"_sharegpt": "sg.json", "_spec_bench": "question.jsonl", "_hf": "ds"}[maker.__name__]
    source = maker(tmp_path / name)
    out = tmp_path / "out"
    argv = [*_bench(source, out, requests=6, concurrency=2), *extra]
    code, _, err = cli(*argv)
    assert code == 0, err
    summary = json.loads((out / "r" / "summary.json").read_text())
    assert set(summary["levels"][0]["by_prompt_class"]) == classes


def test_bench_local_prints_the_low_diversity_warning(cli: Any, tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "w.jsonl", [{"prompt": "the same prompt every time", "class": "dull"}] * 4)
    argv = _bench(path, tmp_path / "out", requests=2, concurrency=1)
    code, _, err = cli(*argv)
    assert code == 0, err
    assert "warning: prompt class dull has 1 distinct prompt(s)" in err


def test_bench_refuses_a_bad_workload_before_any_server(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "fine"}\n{"prompt": ""}\n')
    out = tmp_path / "out"
    code, _, err = cli("bench", "--local", "--prompts", str(path), "--out-dir", str(out), "--run-id", "r")
    assert code == 2
    assert f"ConfigError: prompt file {path}, line 2, field 'prompt': must be a non-empty string" in err
    assert not out.exists()  # nothing started, nothing written
