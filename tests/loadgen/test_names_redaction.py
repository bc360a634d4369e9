"""The one name rule (spectrn.names) and the one URL redaction (spectrn.errors.redact_url)."""

from __future__ import annotations

import pytest

from spectrn.errors import ConfigError, redact_url
from spectrn.names import check_name, check_run_id, is_safe_name


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pass@host:8000/v1", "http://user:***@host:8000/v1"),
        ("https://tok3nvalue@host/v1", "https://***@host/v1"),
        ("http://host:8000/v1?token=abc123&x=1", "http://host:8000/v1?token=***&x=1"),
        ("http://host/v1?api-key=abc&X-Amz-Signature=def", "http://host/v1?api-key=***&X-Amz-Signature=***"),
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("http://u:p@[::1:bad", "http://u:***@[::1:bad"),  # does not parse: the text patterns still mask it
        ("not a url at all", "not a url at all"),
        ("http://user:p@ss@host:8000/v1", "http://user:***@host:8000/v1"),  # '@' inside the password
        ("http://user:pa:ss@host/v1", "http://user:***@host/v1"),  # ':' inside the password
        ("http://host/v1?a=&token=abc&b=", "http://host/v1?a=&token=***&b="),  # blank values kept
        ("http://host/v1?token=", "http://host/v1?token=***"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize("name", ["baseline", "speculative", "b.1", "A_b-c", "x" * 63])
def test_safe_names(name: str) -> None:
    assert check_name(name, what="endpoint name", source="--endpoint") == name


@pytest.mark.parametrize("name", ["", "../x", "/abs", "a/b", "a..b", ".hidden", "x-", "sp ace", "x" * 64, "é", "a\nb"])
def test_unsafe_names_name_the_field_the_source_and_the_fix(name: str) -> None:
    assert not is_safe_name(name)
    with pytest.raises(ConfigError) as e:
        check_name(name, what="endpoint name", source="--endpoint NAME=URL")
    assert "endpoint name" in e.value.message and "(from --endpoint NAME=URL)" in e.value.message
    assert e.value.hint and "letters, digits" in e.value.hint


@pytest.mark.parametrize("run_id", ["20260101-1200", "demo-20260101-120000-qwen3-1p7b-k7", "a", "r" * 40])
def test_run_ids_usable_locally_and_in_a_cluster(run_id: str) -> None:
    assert check_run_id(run_id) == run_id


@pytest.mark.parametrize("run_id", ["My_Run", "a.b", "r" * 41, "-a", "a-", "../x", ""])
def test_run_ids_refused(run_id: str) -> None:
    with pytest.raises(ConfigError, match="is not usable"):
        check_run_id(run_id)


def test_the_in_cluster_path_uses_the_same_rule() -> None:
    from spectrn.render import load_job

    assert load_job.check_run_id is check_run_id


def test_the_default_run_ids_pass_the_rule() -> None:
    from spectrn.bench.local import new_run_id
    from spectrn.configuration.sources import build_config

    for draft in ("qwen3-0.6b", "qwen3-1.7b"):
        check_run_id(new_run_id(build_config({"draft": draft}), prefix="demo-"))


@pytest.mark.parametrize(("field", "value"), [("variant", "../../etc"), ("prompt_class", "a/b"), ("variant", "/abs")])
def test_names_read_back_from_requests_jsonl_are_checked(tmp_path, field: str, value: str) -> None:
    """A requests.jsonl edited (or written by another tool) with a variant or class that would become a
    path outside the run folder is refused when read, naming the line."""
    import json

    from spectrn.errors import AnalysisError
    from spectrn.run.records import read_records

    good = {"variant": "baseline", "index": 0, "prompt_id": "p", "prompt_class": "c", "sent_at": 1.0}
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, field: value}) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(AnalysisError, match=rf"line 2 is not a request record: {field}: .* is not a safe name"):
        read_records(path)
