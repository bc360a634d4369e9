"""The run folder's files byte for byte and its errors word for word, each written out here: run.json,
summary.json, publish.json, acceptance.json and the llmperf summary as the writers lay them out; requests.jsonl and
the EMF file through their temporary file; UTF-8 whatever the locale; and the exact message, hint and error class
of every file a reader refuses (what a user reads when a run folder is damaged)."""

from __future__ import annotations

import io
import json
import locale
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.summaries import variant
from spectrn.errors import AnalysisError, PublishError, SpectrnError
from spectrn.run.folder import RunFolder
from spectrn.run.publish_ledger import PublishLedger, PublishTarget, SentCall
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Acceptance, LevelSummary, Load, Summary, Verdict

ANALYZE_FIX = "restore it, or remove it and re-run `spectrn analyze`"
LEDGER_FIX = "restore it, or delete it and publish with --force knowing that already sent data is counted twice"


def _raised(call: Callable[[], object]) -> tuple[type[BaseException], str, str | None]:
    """(the error's class, its message, its hint) for a call that must fail."""
    with pytest.raises(Exception) as info:
        call()
    e = info.value
    if isinstance(e, SpectrnError):
        return type(e), e.message, e.hint
    return type(e), str(e), None


def _rec(index: int, prompt_id: str = "p") -> RequestRecord:
    return RequestRecord(variant="baseline", index=index, prompt_id=prompt_id, prompt_class="s", sent_at=1.0,
                         ttft=0.5, e2e=1.0, chunk_times=[0.5, 1.0], chunk_tokens=[1, 1], status=200)  # fmt: skip


def _summary() -> Summary:
    spec = variant(0.1, 0.01, 0.01, 1.0, 100.0, acceptance=Acceptance(source="counters", rate=0.5))
    base = variant(0.2, 0.02, 0.02, 1.0, 50.0)
    level = LevelSummary(load=Load.parse("c4"), variants={"baseline": base, "speculative": spec})
    return Summary(run_id="r", verdict=Verdict(clean=True, performance=True), levels=[level])


@pytest.fixture
def folder(tmp_path: Path) -> RunFolder:
    f = RunFolder(tmp_path / "r")
    f.write_meta(RunMeta(run_id="r", spectrn_version="0", started_at=0.0))
    return RunFolder.open(f.path)


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The C locale's ASCII as the default text encoding (a host without a UTF-8 locale): a file opened without
    ``encoding="utf-8"`` then cannot take a non-ASCII character."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


# ---- opening ---------------------------------------------------------------------------------------------


def test_a_folder_that_does_not_exist_is_named_with_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert _raised(lambda: RunFolder.open(missing)) == (
        AnalysisError,
        f"not a run folder: {missing} does not exist",
        "pass a run folder written by `spectrn bench`, e.g. results/<run-id>",
    )


# ---- the whole files the writers lay out ------------------------------------------------------------------


def test_run_json_is_indented_by_two_with_a_final_newline_and_meta_reads_the_new_one(folder: RunFolder) -> None:
    assert folder.meta.run_id == "r"  # read once: the cached value the write must drop
    folder.write_meta(RunMeta(run_id="r2", spectrn_version="0", started_at=0.0))
    text = (folder.path / "run.json").read_text(encoding="utf-8")
    assert text.startswith('{\n  "schema_version": ') and text.endswith("\n}\n")
    assert '\n  "run_id": "r2",\n' in text
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"
    assert folder.meta.run_id == "r2"
    assert folder.run_id == "r2"


def test_summary_json_is_indented_by_two_with_a_final_newline(folder: RunFolder) -> None:
    assert folder.write_summary(_summary()) == folder.path / "summary.json"
    text = (folder.path / "summary.json").read_text(encoding="utf-8")
    assert text.startswith('{\n  "schema_version": 2,\n  "run_id": "r",\n') and text.endswith("\n}\n")
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


def test_publish_json_is_sorted_indented_by_two_and_read_back(folder: RunFolder) -> None:
    assert folder.publish_ledger() == PublishLedger()  # never published: an empty ledger, no file needed
    target = PublishTarget(namespace="ns", target="us-east-1", sent={"h1": SentCall(index=0, datums=3, sent_at="t")})
    ledger = PublishLedger(targets={"ns@us-east-1": target})
    assert folder.write_publish_ledger(ledger) == folder.path / "publish.json"
    assert (folder.path / "publish.json").read_text(encoding="utf-8") == (
        "{\n"
        '  "schema_version": 2,\n'
        '  "targets": {\n'
        '    "ns@us-east-1": {\n'
        '      "batches": null,\n'
        '      "dashboard": null,\n'
        '      "datums": null,\n'
        '      "last_error": null,\n'
        '      "max_datums_per_call": null,\n'
        '      "namespace": "ns",\n'
        '      "nonfinite_dropped": [],\n'
        '      "plan_digest": null,\n'
        '      "run_id": null,\n'
        '      "samples": null,\n'
        '      "sent": {\n'
        '        "h1": {\n'
        '          "datums": 3,\n'
        '          "index": 0,\n'
        '          "sent_at": "t"\n'
        "        }\n"
        "      },\n"
        '      "storage_resolution": null,\n'
        '      "target": "us-east-1",\n'
        '      "time_shift_s": 0.0,\n'
        '      "updated_at": null\n'
        "    }\n"
        "  }\n"
        "}\n"
    )
    assert folder.publish_ledger() == ledger


def test_acceptance_json_is_indented_by_two_without_a_final_newline(folder: RunFolder) -> None:
    folder.write_acceptance({"speculative@c4": {"drafts": 10}, "baseline@c4": None})
    assert (folder.path / "acceptance.json").read_text(encoding="utf-8") == (
        '{\n  "speculative@c4": {\n    "drafts": 10\n  },\n  "baseline@c4": null\n}'
    )


def test_a_nan_counter_delta_is_refused_not_written_as_nan(folder: RunFolder) -> None:
    with pytest.raises(ValueError) as info:
        folder.write_acceptance({"speculative@c4": {"drafts": float("nan")}})
    # json's own words (the pure-Python encoder, which indent selects, adds the value)
    assert re.fullmatch(r"Out of range float values are not JSON compliant(: nan)?", str(info.value))
    assert not (folder.path / "acceptance.json").exists()


def test_llmperf_summary_is_indented_by_two_and_responses_move_into_place(folder: RunFolder) -> None:
    f, tmp = folder.open_llmperf_responses("speculative")
    assert tmp == folder.path / "speculative" / ".individual_responses.json.tmp"
    with f:
        f.write("[]")
    paths = folder.write_llmperf("speculative", "s_c4", {"mean": 1.5, "model": "m"}, tmp)
    assert paths == [
        folder.path / "speculative" / "s_c4_summary.json",
        folder.path / "speculative" / "s_c4_individual_responses.json",
    ]
    assert paths[0].read_text(encoding="utf-8") == '{\n  "mean": 1.5,\n  "model": "m"\n}'
    assert paths[1].read_text(encoding="utf-8") == "[]"
    assert not tmp.exists()
    # a second level of the same variant opens its temporary file in the folder that now exists
    f2, tmp2 = folder.open_llmperf_responses("speculative")
    f2.close()
    assert tmp2 == tmp


def test_llmperf_responses_from_another_folder_are_refused(folder: RunFolder, tmp_path: Path) -> None:
    (folder.path / "speculative").mkdir()
    elsewhere = tmp_path / "responses.json"
    elsewhere.write_text("[]")
    assert _raised(lambda: folder.write_llmperf("speculative", "s", {}, elsewhere)) == (
        ValueError,
        f"{elsewhere} is not in {folder.path / 'speculative'}",
        None,
    )


def test_both_scrape_names_are_taken(folder: RunFolder) -> None:
    for name in ("speculative.c4.before.prom", "speculative.c4.after.prom"):
        assert folder.write_scrape(name, "x 1\n") == folder.path / "metrics" / name
        assert (folder.path / "metrics" / name).read_text() == "x 1\n"


# ---- streamed files: the temporary file, a new folder, a failed write --------------------------------------


RECORD_LINE = (
    '{{"variant":"baseline","index":{i},"prompt_id":"p{i}","prompt_class":"s","level":"c4","warmup":false,"shard":0,'
    '"sent_at":1.0,"ttft":0.5,"e2e":1.0,"chunk_times":[0.5,1.0],"chunk_tokens":[1,1],"token_source":"token_ids",'
    '"status":200}}\n'
)  # no null fields: a record keeps only what it has


@pytest.mark.parametrize("which", ["requests.jsonl", "metrics.emf.jsonl"])
def test_streamed_files_go_through_a_hidden_temporary_file_beside_them(tmp_path: Path, which: str) -> None:
    folder = RunFolder(tmp_path / "results" / "r")  # neither folder exists yet
    seen: list[list[str]] = []

    def stream(first: Any, second: Any) -> Iterator[Any]:
        yield first
        seen.append(sorted(os.listdir(folder.path)))  # mid-write: only the temporary file is there
        yield second

    if which == "requests.jsonl":
        path = folder.write_records(stream(_rec(0, "p0"), _rec(1, "p1")))
        assert path.read_text(encoding="utf-8") == RECORD_LINE.format(i=0) + RECORD_LINE.format(i=1)
    else:
        path = folder.write_emf(stream('{"a": 1}', '{"b": 2}'))
        assert path.read_text(encoding="utf-8") == '{"a": 1}\n{"b": 2}\n'
    assert path == folder.path / which
    (only,) = seen
    assert len(only) == 1 and re.fullmatch(rf"\.{re.escape(which)}\.[^/]+\.tmp", only[0]), only
    assert sorted(os.listdir(folder.path)) == [which]  # renamed over: nothing left beside it


def test_a_failed_stream_leaves_the_old_file_and_no_temporary_file(folder: RunFolder) -> None:
    folder.write_emf(["old"])

    def lines() -> Iterator[str]:
        yield "new"
        raise RuntimeError("the metric source failed")

    assert _raised(lambda: folder.write_emf(lines())) == (RuntimeError, "the metric source failed", None)
    assert (folder.path / "metrics.emf.jsonl").read_text() == "old\n"
    assert sorted(os.listdir(folder.path)) == ["metrics.emf.jsonl", "run.json"]


def test_run_folder_files_are_utf8_whatever_the_locale(folder: RunFolder, ascii_locale: None) -> None:
    folder.write_records([_rec(0, "café")])
    folder.write_emf(['{"Label": "é"}'])
    with folder.append_records() as f:
        f.write(_rec(1, "naïve").model_dump_json(exclude_none=True) + "\n")
    f, tmp = folder.open_llmperf_responses("baseline")
    with f:
        f.write('["ü"]')
    assert [r.prompt_id for r in folder.records()] == ["café", "naïve"]
    assert (folder.path / "metrics.emf.jsonl").read_bytes() == b'{"Label": "\xc3\xa9"}\n'
    assert tmp.read_bytes() == b'["\xc3\xbc"]'


def test_append_records_keeps_what_is_there(folder: RunFolder) -> None:
    folder.write_records([_rec(0, "p0")])
    with folder.append_records() as f:
        f.write(_rec(1, "p1").model_dump_json(exclude_none=True) + "\n")
    assert [r.prompt_id for r in folder.records()] == ["p0", "p1"]


def test_copy_in_makes_nested_folders_and_copies_twice_into_one(folder: RunFolder) -> None:
    a = folder.copy_in("pods/0/requests.jsonl", io.BytesIO(b"a"))
    b = folder.copy_in("pods/0/run.json", io.BytesIO(b"b"))
    assert (a, b) == (folder.path / "pods" / "0" / "requests.jsonl", folder.path / "pods" / "0" / "run.json")
    assert (a.read_bytes(), b.read_bytes()) == (b"a", b"b")


# ---- what reading a torn requests.jsonl leaves in the run's notes -----------------------------------------


def test_a_torn_last_line_is_noted_once_beside_the_run_json_notes(folder: RunFolder) -> None:
    folder.write_records([_rec(0)])
    with (folder.path / "requests.jsonl").open("ab") as f:
        f.write(b'{"variant": "b')  # 14 bytes, no newline: the writer was killed mid-line
    folder.meta._read_notes.append("run.json: an earlier note")
    assert [r.index for r in folder.records()] == [0]
    assert [r.index for r in folder.records()] == [0]  # read twice, noted once
    assert folder.meta.read_notes == [
        "run.json: an earlier note",
        "requests.jsonl: skipped a torn last line (line 2, 14 bytes: the writer stopped mid-line)",
    ]


# ---- damaged files: class, message and hint ------------------------------------------------------------


def test_acceptance_json_that_is_not_json(folder: RunFolder) -> None:
    path = folder.path / "acceptance.json"
    path.write_text("{")
    assert _raised(folder.acceptance) == (
        AnalysisError,
        f"{path} is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ANALYZE_FIX,
    )


def test_acceptance_json_with_a_key_twice(folder: RunFolder) -> None:
    path = folder.path / "acceptance.json"
    path.write_text('{"a@c4": null, "a@c4": {}}')
    assert _raised(folder.acceptance) == (
        AnalysisError,
        f"{path} holds the key 'a@c4' twice in one object, so which value counts is undefined (RFC 8259 section 4)",
        "keep one of the two 'a@c4' entries (or restore the file from the original run)",
    )


def test_acceptance_json_that_is_not_counter_deltas(folder: RunFolder) -> None:
    path = folder.path / "acceptance.json"
    path.write_text('{"speculative@c4": 3}')
    assert _raised(folder.acceptance) == (
        AnalysisError,
        f"{path} is not an object of counter deltas",
        "restore it from the original run, or delete it (acceptance then comes from the stream)",
    )


def test_summary_json_of_another_version(folder: RunFolder) -> None:
    path = folder.path / "summary.json"
    path.write_text('{"schema_version": 1, "run_id": "r"}')
    assert _raised(folder.summary) == (
        AnalysisError,
        f"{path} is not a summary of schema version 2",
        f"re-analyze the run: `spectrn analyze {folder.path}`",
    )


def test_summary_json_that_does_not_match_the_schema(folder: RunFolder) -> None:
    path = folder.path / "summary.json"
    path.write_text('{"schema_version": 2, "run_id": "r", "levels": []}')
    assert _raised(folder.summary) == (
        AnalysisError,
        f"{path} does not match the summary schema: verdict: Field required",
        f"re-analyze the run: `spectrn analyze {folder.path}`",
    )


def test_require_summary_names_the_command_to_run(folder: RunFolder) -> None:
    assert _raised(folder.require_summary) == (
        AnalysisError,
        f"{folder.path} has no summary.json",
        f"run `spectrn analyze {folder.path}` first",
    )
    folder.write_summary(_summary())
    assert folder.require_summary() == _summary()


def test_acceptance_for_a_variant_the_level_does_not_have(folder: RunFolder) -> None:
    assert folder.acceptance_for("speculative", "c4") is None  # not analyzed yet
    folder.write_summary(_summary())
    assert folder.acceptance_for("speculative", "c4") == Acceptance(source="counters", rate=0.5)
    assert folder.acceptance_for("baseline", "c4") is None
    assert folder.acceptance_for("eagle", "c4") is None
    assert folder.acceptance_for("speculative", "c8") is None


def test_publish_json_that_is_not_json(folder: RunFolder) -> None:
    path = folder.path / "publish.json"
    path.write_text("{")
    assert _raised(folder.publish_ledger) == (
        PublishError,
        f"{path} is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        LEDGER_FIX,
    )


def test_publish_json_with_a_key_twice(folder: RunFolder) -> None:
    path = folder.path / "publish.json"
    path.write_text('{"schema_version": 2, "schema_version": 2}')
    assert _raised(folder.publish_ledger) == (
        PublishError,
        f"{path} holds the key 'schema_version' twice in one object, so which value counts is undefined "
        "(RFC 8259 section 4)",
        "keep one of the two 'schema_version' entries (or restore the file from the original run)",
    )


def test_publish_json_of_an_unknown_layout_names_the_file(folder: RunFolder) -> None:
    path = folder.path / "publish.json"
    path.write_text('{"schema_version": 2, "targets": {"ns@t": 3}}')
    expected: tuple[Any, ...] = (
        PublishError,
        f"{path} has an unknown layout (each target must be an object with a 'sent' map): targets.ns@t: Input should "
        "be a valid dictionary or instance of PublishTarget",
        LEDGER_FIX,
    )
    assert _raised(folder.publish_ledger) == expected


def test_publish_json_with_an_infinite_time_shift_is_refused_not_rewritten_as_null(folder: RunFolder) -> None:
    # Python's json reads the non-standard Infinity; kept, it would be written back as null and then refused
    path = folder.path / "publish.json"
    target = '{"namespace": "ns", "target": "t", "sent": {}, "time_shift_s": Infinity}'
    path.write_text('{"schema_version": 2, "targets": {"ns@t": ' + target + "}}")
    expected: tuple[Any, ...] = (
        PublishError,
        f"{path} has an unknown layout (each target must be an object with a 'sent' map): targets.ns@t.time_shift_s:"
        " Input should be a finite number",
        LEDGER_FIX,
    )
    assert _raised(folder.publish_ledger) == expected
