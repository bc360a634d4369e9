"""``json_doc.refuse_twice`` (the fast check for ``requests.jsonl``) decides exactly like a parse that sees every key.

The oracle is defined here: the JSON text is built from lists of (key, value) pairs, so which objects hold a key
twice is known before anything is parsed, and the expected value is what ``json.loads`` makes of the text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectrn.run.json_doc import DuplicateKeyError, refuse_twice

# keys and strings rich in what the colon count must get right: colons, quotes, backslashes, \u escapes
TEXT = st.text(alphabet=st.sampled_from(["a", "b", ":", '"', "\\", ",", "{", "}", " ", "é", "\x01"]), max_size=6)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.floats(allow_nan=False), TEXT)


def _pairs(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(st.tuples(TEXT, children), max_size=5).map(lambda p: ("obj", p))


VALUE = st.recursive(
    SCALAR, lambda children: st.one_of(st.lists(children, max_size=4), _pairs(children)), max_leaves=12
)


def _text(v: Any, *, ascii_only: bool) -> str:
    if isinstance(v, tuple):
        body = ",".join(f"{json.dumps(k, ensure_ascii=ascii_only)}:{_text(x, ascii_only=ascii_only)}" for k, x in v[1])
        return "{" + body + "}"
    if isinstance(v, list):
        return "[" + ",".join(_text(x, ascii_only=ascii_only) for x in v) + "]"
    return json.dumps(v, ensure_ascii=ascii_only)


def _has_twice(v: Any) -> bool:
    if isinstance(v, tuple):
        keys = [k for k, _ in v[1]]
        return len(set(keys)) != len(keys) or any(_has_twice(x) for _, x in v[1])
    if isinstance(v, list):
        return any(_has_twice(x) for x in v)
    return False


def _check(text: str) -> None:
    """What the records reader does: a parser that keeps the last of two keys, then the colon count."""
    top = json.loads(text)
    refuse_twice(text.encode(), list(top), top.values())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(TEXT, VALUE), max_size=8), st.booleans())
def test_a_key_twice_anywhere_is_refused_and_nothing_else(pairs, ascii_only) -> None:
    doc = ("obj", pairs)
    text = _text(doc, ascii_only=ascii_only)
    if _has_twice(doc):
        with pytest.raises(DuplicateKeyError):
            _check(text)
    else:
        _check(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2}',
        '{"a:b":1,"a:b":2}',  # the colon inside the key counted
        '{"a":"x:","b":"y","a":"z"}',  # colons inside string values counted
        '{"a":"\\u003a","a":1}',  # an escape that spells a colon
        '{"a":{"b":1,"b":2}}',  # nested
        '{"a":[{"b":1,"c":2,"b":3}]}',
    ],
)
def test_known_keys_twice(text: str) -> None:
    with pytest.raises(DuplicateKeyError):
        _check(text)
