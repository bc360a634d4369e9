"""Property tests of ``spectrn.sanitize``, one rule per sink, over arbitrary text (lone surrogates included).

Each property is the sink's own rule, written here from its definition (docs/reliability.md), not from the code:
a file name fits NAME_MAX and holds only safe characters; a CloudWatch dimension value is ASCII without control
characters, not blank and at most 1024 characters (API_Dimension); terminal text holds no C0/C1 control other
than newline and tab and no bidirectional control; Markdown holds no character that opens a link, image, HTML
tag or table cell; a code span is one span whose content is the text.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from spectrn import sanitize

# any code point, surrogates too: what json.loads makes of "\ud800"
ANY = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=600)
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@settings(max_examples=300)
@given(ANY)
def test_valid_text_is_always_utf8_and_keeps_valid_text_unchanged(s: str) -> None:
    out = sanitize.valid_text(s)
    assert _encodable(out)
    if _encodable(s):
        assert out == s


@settings(max_examples=300)
@given(ANY, st.integers(min_value=20, max_value=255))
def test_file_name_fits_name_max_with_safe_characters_and_keeps_names_apart(s: str, limit: int) -> None:
    out = sanitize.file_name(s, limit)
    assert 1 <= len(out.encode()) <= limit
    assert re.fullmatch(r"[A-Za-z0-9._-]+", out) and not out.startswith(".") and out not in (".", "..")
    # two different long or unsafe names never share a file
    assert sanitize.file_name(s + "x", limit) != out or s + "x" == out


@settings(max_examples=300)
@given(ANY)
def test_cloudwatch_dimension_value_follows_the_api_rules(s: str) -> None:
    out = sanitize.cw_dimension(s)
    assert 1 <= len(out) <= 1024
    assert all(" " <= ch <= "~" for ch in out)  # ASCII, no control character
    assert out.strip()  # at least one non-whitespace character


@settings(max_examples=300)
@given(ANY)
def test_terminal_text_holds_no_control_or_bidi_character(s: str) -> None:
    out = sanitize.terminal(s)
    assert _encodable(out)
    assert not any((ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F or ch in BIDI for ch in out)


@settings(max_examples=300)
@given(ANY)
def test_markdown_text_opens_no_link_image_html_or_cell(s: str) -> None:
    out = sanitize.markdown(s)
    assert "\n" not in out and "\r" not in out and "<" not in out and ">" not in out
    # every [ ] ( ) ! | ` * _ is preceded by an odd number of backslashes: literal, never syntax
    for m in re.finditer(r"[\[\]()!|`*_]", out):
        run = len(out[: m.start()]) - len(out[: m.start()].rstrip("\\"))
        assert run % 2 == 1, (out, m.start())


@settings(max_examples=300)
@given(ANY)
def test_markdown_code_is_one_span_holding_the_text(s: str) -> None:
    out = sanitize.markdown_code(s)
    fence = re.match(r"`+", out)
    assert fence is not None and out.endswith(fence.group())
    if out == "``":
        assert s == ""  # nothing to show
        return
    inner = out[len(fence.group()) : -len(fence.group())]
    assert fence.group() not in inner  # no backtick run inside as long as the fence: the span cannot close early
    assert "\n" not in inner
    # CommonMark: one space is stripped from each side when both are spaces and the content is not all spaces
    shown = inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else inner
    one_line = " ".join(s.replace("\r", "\n").replace("\t", " ").split("\n"))
    assert shown.replace("\\|", "|") == sanitize.terminal(one_line)
