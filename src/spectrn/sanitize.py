"""Turn text from outside (a server, a file) into text each sink can hold safely, one rule per sink.

Server text reaches five sinks, each with its own rules (docs/reliability.md, "Server data becoming names"):

* ``valid_text``: any sink. A lone surrogate (``"\\ud800"`` from a JSON escape) cannot be encoded as UTF-8,
  so writing it would raise; it is kept as its escape, ``\\ud800``, as data.
* ``server_label``: a short name a server declares (model, draft, version) and that becomes a CloudWatch
  dimension value, a terminal line and report text: printable ASCII only (what AWS accepts in a dimension
  value, and nothing a terminal interprets), every other character as its ``\\uXXXX`` escape, at most
  ``MAX_LABEL_CHARS``.
* ``file_name``: a path component: at most 255 bytes (the Linux NAME_MAX), letters, digits, ``.``, ``_``,
  ``-`` only, never ``.``/``..`` or a leading dot; a shortened name keeps a digest of the whole so two long
  names stay two files.
* ``cw_dimension``: a CloudWatch dimension value: ASCII only, no control characters, at least one
  non-whitespace character, at most 1024 characters (API_Dimension, cited in docs/cloudwatch.md).
* ``terminal``: C0/C1 control characters, DEL and the Unicode bidirectional controls (which reorder what
  follows them on screen) shown as escapes.
* ``markdown``: every character Markdown or HTML gives an inline meaning to escaped, for short text such as a
  prompt class in a table cell: no image, link, emphasis, table cell or raw HTML.
* ``markdown_code``: server text as a code span, where Markdown interprets nothing (no link, image, autolink,
  emphasis or HTML: CommonMark "Code spans", GitHub Flavored Markdown's autolinks skip them); the fence is
  longer than any run of backticks inside, ``|`` is escaped so a table cell stays one cell (GFM "Tables").

HTML is escaped by the report's own ``html.escape`` at the point of rendering.
"""

from __future__ import annotations

import hashlib
import re

MAX_LABEL_CHARS = 200
MAX_FILE_NAME_BYTES = 255
MAX_DIMENSION_CHARS = 1024

# Unicode's explicit bidirectional formatting characters (UAX #9): embeddings, overrides, isolates and marks.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()#!|~")


def valid_text(text: str) -> str:
    """``text`` with every lone surrogate kept as its ``\\uXXXX`` escape: encodable as UTF-8 everywhere."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def decode(raw: bytes) -> str:
    """Server bytes as text: UTF-8 (what JSON, SSE and the Prometheus text format define), invalid bytes replaced;
    never a charset the server declares (some Python codecs run in quadratic time on hostile input)."""
    return raw.decode("utf-8", "replace")


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def server_label(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    """A server-declared name as printable ASCII (others escaped), at most ``limit`` characters."""
    out = "".join(ch if " " <= ch <= "~" else _escape(ch) for ch in text[: limit * 2])
    return out[:limit] if len(out) <= limit else out[: limit - 3] + "..."


def file_name(text: str, limit: int = MAX_FILE_NAME_BYTES) -> str:
    """``text`` as one safe path component of at most ``limit`` bytes; a changed name carries a digest."""
    safe = _UNSAFE_FILE_CHARS.sub("_", text).lstrip(".") or "_"
    if safe == text and len(safe) <= limit:
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe[: limit - len(digest) - 1]}-{digest}"


def cw_dimension(text: str) -> str:
    """``text`` as a CloudWatch dimension value: printable ASCII, not blank, at most 1024 characters."""
    out = server_label(text, MAX_DIMENSION_CHARS)
    return out if out.strip() else "unknown"


def _controls(ch: str) -> bool:
    return ch in BIDI_CONTROLS or (ch < " " and ch not in "\n\t") or "\x7f" <= ch <= "\x9f"


def terminal(text: str) -> str:
    """``text`` for a terminal: control characters (newline and tab aside), DEL and bidi controls as escapes,
    lone surrogates as escapes, nothing else changed."""
    return "".join(_escape(ch) if _controls(ch) else ch for ch in valid_text(text))


def markdown(text: str) -> str:
    """``text`` inside Markdown as literal text: specials backslash-escaped, ``<``/``>``/``&`` as entities,
    line breaks as spaces (a table cell or list item stays one line), controls and bidi escaped."""
    out = []
    for ch in terminal(_one_line(text)):
        if ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch in _MARKDOWN_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _one_line(text: str) -> str:
    return " ".join(text.replace("\r", "\n").replace("\t", " ").split("\n"))


def markdown_code(text: str) -> str:
    """``text`` as one Markdown code span, shown literally (see the module's docstring)."""
    body = terminal(_one_line(text)).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each side of a span that has both, and a backtick next to the fence would
    # lengthen it: a space on each side keeps the content as it is (a blank content is never stripped)
    pad = " " if body.strip() and (body[0] in "` " or body[-1] in "` ") else ""
    return f"{fence}{pad}{body}{pad}{fence}"
