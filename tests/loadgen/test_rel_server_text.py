"""What a server says besides its stream (``/metrics``, ``/version``, ``/sim/identity``, error bodies), end to end.

Each test runs ``spectrn bench`` through the real CLI against ``tests/hostile.py`` servers over real HTTP and
checks the documented outcome (docs/reliability.md): bytes decoded as UTF-8 whatever charset is declared,
every read size-capped, declared sizes bounded by what spectrn accepts, lone surrogates kept as escapes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from doubles.relhelp import bench_argv, last_line, measured_error_classes, records, run_cli, summary
from hostile import BIDI, DRAFT_CONTROLS, LONG_MODEL, MARKDOWN_DRAFT, HostileServer

REQUESTS = 6
COMMON = ["--requests", str(REQUESTS), "--max-tokens", "12", "--concurrency", "2", "--prompts", "all"]


def _bench(capsys: Any, tmp_path: Path, spec: HostileServer, base: HostileServer) -> tuple[int, str, Path]:
    endpoints = {"baseline": base.url, "speculative": spec.url}
    code, _, err = run_cli(bench_argv(endpoints, tmp_path / "results", "r", *COMMON), capsys)
    assert "Traceback" not in err, err
    return code, err, tmp_path / "results" / "r"


def test_metrics_are_utf8_whatever_charset_the_server_declares(hostile, capsys, tmp_path) -> None:
    """UTF-8 counters declared as ``charset=utf-16``: read as UTF-8 (the Prometheus text format's encoding), so
    the window and the acceptance are the server's: 4 drafts of 4 tokens per response, 8 accepted."""
    code, err, run_dir = _bench(capsys, tmp_path, hostile("metrics_declared_charset"), hostile("token_ids"))
    assert code == 0, err
    s = summary(run_dir)
    ident = s.provenance.servers["speculative"]
    assert (ident.window, ident.source, ident.metrics_style) == (4, "server", "v1")
    acc = s.levels[0].variants["speculative"].acceptance
    assert acc is not None and acc.counters is not None
    assert acc.counters.rate == 8 / 16
    assert acc.counters.per_position == [3 / 4, 2 / 4, 2 / 4, 1 / 4]


def test_more_position_series_than_any_window_are_unusable_not_a_rate(hostile, capsys, tmp_path) -> None:
    """2,000 per-position series: no window (spectrn accepts 1..32) and no counter figures, the reason recorded."""
    code, err, run_dir = _bench(capsys, tmp_path, hostile("metrics_many_positions"), hostile("token_ids"))
    assert code == 0, err
    s = summary(run_dir)
    assert s.provenance.servers["speculative"].window is None
    acc = s.levels[0].variants["speculative"].acceptance
    assert acc is None or acc.counters is None or not acc.counters.per_position
    counters = json.loads((run_dir / "acceptance.json").read_text(encoding="utf-8"))["speculative@c2"]
    assert counters["per_position"] is None and counters["rate"] is None
    assert counters["problem"] == (
        "2000 vllm:spec_decode_num_accepted_tokens_per_pos positions, "
        "more than the 32 speculative tokens spectrn accepts"
    )


def test_counters_whose_ratio_overflows_are_unusable_not_a_crash(hostile, capsys, tmp_path) -> None:
    """Finite counters (1e300 tokens over 1e-300 drafts) whose mean acceptance length is infinite: the run
    finishes, acceptance.json is written, and the counters are unusable with the reason."""
    code, err, run_dir = _bench(capsys, tmp_path, hostile("metrics_overflow"), hostile("token_ids"))
    assert code == 0, err
    counters = json.loads((run_dir / "acceptance.json").read_text(encoding="utf-8"))["speculative@c2"]
    assert counters["problem"] == "mean_accepted_length overflow (the counters are not counts of one run)"
    assert summary(run_dir).levels[0].variants["speculative"].acceptance.counters is None


def test_a_model_id_longer_than_a_file_name_allows(hostile, capsys, tmp_path) -> None:
    """A 300-character model id names the llmperf-compatible files: cut to fit 255 bytes (with a digest), the
    id itself kept whole in the summary."""
    code, err, run_dir = _bench(capsys, tmp_path, hostile("long_model_id"), hostile("long_model_id"))
    assert code == 0, err
    assert summary(run_dir).model == LONG_MODEL
    files = sorted(p.name for p in (run_dir / "speculative").glob("*.json"))
    assert len(files) == 2 and all(len(f.encode()) <= 255 and f.startswith("org-mmm") for f in files), files


def test_a_metrics_flood_is_refused_before_parsing(hostile, capsys, tmp_path) -> None:
    code, err, run_dir = _bench(capsys, tmp_path, hostile("metrics_flood"), hostile("token_ids"))
    assert code == 0, err
    assert any("more than the 10000 spectrn parses" in n for n in summary(run_dir).notes)


def test_identity_reads_are_size_capped(hostile, capsys, tmp_path) -> None:
    """``/version``, ``/sim/identity`` and ``/metrics`` that never end: spectrn stops reading at its cap (the
    server could send only a few MiB before the client hung up), and the run goes on without them."""
    spec = hostile("version_endless")
    code, err, run_dir = _bench(capsys, tmp_path, spec, hostile("token_ids"))
    assert code == 0, err
    assert spec.side_bytes < 16 << 20, spec.side_bytes  # uncapped, 10 s of reading is about 64 MiB per endpoint
    ident = summary(run_dir).provenance.servers["speculative"]
    assert ident.version is None and ident.draft is None


def test_a_lone_surrogate_in_version_is_kept_escaped(hostile, capsys, tmp_path) -> None:
    code, err, run_dir = _bench(capsys, tmp_path, hostile("version_surrogate"), hostile("version_surrogate"))
    assert code == 0, err
    assert summary(run_dir).provenance.servers["speculative"].version == "bad \\ud800 input"


def test_a_lone_surrogate_in_an_error_message_is_a_record_not_a_crash(hostile, capsys, tmp_path) -> None:
    code, err, run_dir = _bench(capsys, tmp_path, hostile("token_ids"), hostile("error_surrogate"))
    assert code == 4 and last_line(err).startswith("BenchError: no successful request on baseline"), err
    recs = records(run_dir)
    assert measured_error_classes(recs, "baseline") == {"http_400": REQUESTS}
    assert all(r["error_msg"] == "bad \\ud800 input" for r in recs if r["variant"] == "baseline")


def test_a_declared_draft_becomes_a_printable_ascii_label(hostile, capsys, tmp_path) -> None:
    """Escapes, a right-to-left override and non-ASCII in a declared draft name: printable ASCII (what a
    CloudWatch dimension value allows and nothing a terminal interprets), at most 200 characters."""
    code, err, run_dir = _bench(capsys, tmp_path, hostile("draft_controls"), hostile("token_ids"))
    assert code == 0, err
    draft = summary(run_dir).provenance.servers["speculative"].draft
    assert draft is not None and len(draft) <= 200
    assert all(" " <= ch <= "~" for ch in draft), draft
    assert draft.startswith("d\\x1b[31m\\u202eevil\\xe9xxx") and DRAFT_CONTROLS.startswith("d\x1b[31m\u202eevil\xe9")
    assert "\u202e" not in err and "\x1b" not in err


def test_bidi_overrides_in_server_text_reach_the_terminal_escaped(hostile, capsys, tmp_path) -> None:
    """A right-to-left override in an error message would reorder what the terminal shows; it is shown as its
    escape, and the record keeps the message as sent."""
    code, err, run_dir = _bench(capsys, tmp_path, hostile("token_ids"), hostile("bidi_error"))
    assert code == 4, err
    assert not set(err) & {"\u202e", "\u2066", "\u2069"}, err
    assert "user\\u202egnp.exe\\u2066x\\u2069" in err
    assert {r["error_msg"] for r in records(run_dir) if r["variant"] == "baseline" and not r.get("warmup")} == {BIDI}


def test_compare_markdown_carries_no_image_link_or_html_from_a_server(hostile, capsys, tmp_path) -> None:
    """Two runs whose speculative servers declare different drafts, one of them Markdown with an image, a link,
    HTML, a backtick and a pipe: ``compare --markdown`` shows it as one code span, literally."""
    base = hostile("token_ids")
    for run_id, mode in (("a", "token_ids"), ("b", "draft_markdown")):
        endpoints = {"baseline": base.url, "speculative": hostile(mode).url}
        code, _, err = run_cli(bench_argv(endpoints, tmp_path / "results", run_id, *COMMON), capsys)
        assert code == 0, err
    md = tmp_path / "cmp.md"
    code, _, err = run_cli(["compare", str(tmp_path / "results" / "a"), str(tmp_path / "results" / "b"),
                            "--markdown", str(md)], capsys)  # fmt: skip
    assert code == 0, err
    text = md.read_text(encoding="utf-8")
    # a code span whose fence (two backticks) is longer than the backtick run inside, the pipe escaped
    span = "``" + MARKDOWN_DRAFT.replace("|", "\\|") + "/k?``"  # the config label: draft/window
    assert text.startswith(f"### spectrn: `b` ({span}) vs `a` (`unknown/k?`)"), text
    # it may appear again (the config diff names the draft), but only inside code spans: outside them, nothing
    outside = re.sub(r"(`+)(?:(?!\1).)+?\1", "", text, flags=re.S)  # every code span, whatever its fence
    assert "![t]" in text and "![t]" not in outside and "<img" not in outside and "](http" not in outside
