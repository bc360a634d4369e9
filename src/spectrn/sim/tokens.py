"""A deterministic toy tokenizer and output generator for the simulator.

Tokenizer: text splits into word, number (up to 3 digits), punctuation and whitespace pieces with a
leading space attached, much like byte-level BPE pre-tokenizers; each piece maps to a stable id in
``[0, 151643)`` (a hash, so the same piece always has the same id) and Qwen3's special tokens keep their
real ids. It counts tokens plausibly (about 1.3 per English word) and decodes by concatenating pieces.

Output: ``OutputStream`` yields the tokens a greedy model would produce for a prompt. They depend ONLY on
the prompt text and the seed, never on speculation or timing, so a baseline and a speculative server
emit byte-identical greedy output (speculation is lossless). Structured prompts get a plausible
continuation (counting on from the last number, JSON records, Python skeletons, repeating the prompt's
phrase); open-ended prompts get pseudo-prose from a word list.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

VOCAB_SIZE = 151936
SPECIAL_TOKENS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
EOS_TOKEN_ID = 151645
_ORDINARY_IDS = 151643

_SPECIAL_RE = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS))
_PIECE_RE = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+(?!\S)|\s+")

Token = tuple[int, str]


@lru_cache(maxsize=1 << 16)
def piece_id(piece: str) -> int:
    digest = hashlib.blake2b(piece.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % _ORDINARY_IDS


def pieces(text: str) -> list[str]:
    """Split ``text`` into pieces (special tokens stay whole)."""
    out: list[str] = []
    pos = 0
    for m in _SPECIAL_RE.finditer(text):
        out.extend(_PIECE_RE.findall(text, pos, m.start()))
        out.append(m.group(0))
        pos = m.end()
    out.extend(_PIECE_RE.findall(text, pos))
    return out


def encode(text: str) -> list[int]:
    return [SPECIAL_TOKENS.get(p) or piece_id(p) for p in pieces(text)]


def encode_pieces(text: str) -> list[Token]:
    return [(SPECIAL_TOKENS.get(p) or piece_id(p), p) for p in pieces(text)]


def message_text(content: Any) -> str:
    """OpenAI message content: a string or a list of parts ``{"type": "text", "text": ...}``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise ValueError("only text content parts are supported")
        return "".join(parts)
    raise ValueError("message content must be a string or a list of text parts")


def render_chat(messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
    """Qwen3's ChatML layout (without the thinking block)."""
    out = []
    for msg in messages:
        out.append(f"<|im_start|>{msg['role']}\n{message_text(msg.get('content'))}<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


# ---- output generation ----------------------------------------------------------------------------

_WORDS = (
    "the a of and to in that it with as for was on be by at this from which or but are an not have they "
    "river light morning quiet city stone window garden memory journey distant silver evening voice shadow "
    "whisper field ocean mountain letter winter summer forest bridge harbor story dream thought careful "
    "gentle sudden ancient bright hollow narrow golden patient restless wandering remembered carried "
    "opened turned followed believed noticed returned began kept found gave told walked watched"
).split()

_JSON_RE = re.compile(r"\bjson\b|[{}]")
_CODE_RE = re.compile(r"\b(python|function|def|code|skeleton|class|script)\b")
_COUNT_RE = re.compile(r"\b(count(ing)?|numbers?|sequence|one to \w+)\b|\b\d+\s*,?\s+\d+\b")
_NUMBER_RE = re.compile(r"\d+")
_NUMBER_WORDS = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()


def output_kind(prompt: str) -> str:
    """Which continuation a prompt gets: json, code, count, repeat or prose."""
    from spectrn.sim.model import predictability

    lower = prompt.lower()
    if _JSON_RE.search(lower):
        return "json"
    if _CODE_RE.search(lower):
        return "code"
    if _COUNT_RE.search(lower):
        return "count"
    if predictability(prompt) >= 0.5:
        return "repeat"
    return "prose"


def _segments(prompt: str, rng: random.Random) -> Iterator[str]:
    kind = output_kind(prompt)
    if kind == "json":
        i = 1
        while True:
            yield f'{{"id": {i}, "name": "item_{i}", "active": true}}\n'
            i += 1
    elif kind == "code":
        i = 1
        while True:
            yield f'def function_{i}(value):\n    """Return the value unchanged."""\n    return value\n\n'
            i += 1
    elif kind == "count":
        numbers = _NUMBER_RE.findall(prompt)
        n = int(numbers[-1][:9]) + 1 if numbers else 1
        while True:
            yield f" {n}"
            n += 1
    elif kind == "repeat":
        words = prompt.split()
        phrase = " ".join(words[-12:]) if words else "a"
        while True:
            yield " " + phrase
    else:
        while True:
            sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14)))
            yield " " + sentence[0].upper() + sentence[1:] + "."


def stream_seed(prompt: str, seed: int) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class OutputStream:
    """The greedy output of one prompt, produced lazily a few tokens at a time."""

    def __init__(self, prompt: str, seed: int) -> None:
        self._segments = _segments(prompt, random.Random(stream_seed(prompt, seed)))
        self._buf: list[Token] = []
        self._pos = 0

    def take(self, n: int) -> list[Token]:
        while len(self._buf) - self._pos < n:
            if self._pos > 4096:  # keep the buffer short on long outputs
                del self._buf[: self._pos]
                self._pos = 0
            self._buf.extend(encode_pieces(next(self._segments)))
        out = self._buf[self._pos : self._pos + n]
        self._pos += n
        return out
