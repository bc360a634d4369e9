"""The lines of a JSON Lines file, read in bounded memory whatever the file holds.

A line is read in pieces of at most 1 MiB and kept only up to ``MAX_LINE`` bytes: a file whose end is hundreds of
megabytes of NUL bytes (what a crash leaves on a file system that had extended the file but not yet written its
blocks) or a line of gigabytes is walked through, never held. Each line says how long it was, whether it ended with
a newline (a last line without one is torn: its writer stopped mid-line) and whether it held only NUL bytes
(padding, which is no record).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

MAX_LINE = 64 << 20  # far above any record (a 32k-token output with its token ids and times is ~1 MiB)
_PIECE = 1 << 20
NUL = 0


@dataclass(slots=True)
class Line:
    number: int  # 1-based
    text: bytes | None  # the line's bytes, its newline included; None when over ``MAX_LINE`` or holding NUL bytes
    size: int  # bytes, newline included
    nul_bytes: int  # NUL bytes in the line
    complete: bool  # ended with a newline

    @property
    def padding(self) -> bool:
        """Only NUL bytes (then perhaps a newline): what a crash left, not a record."""
        return self.nul_bytes > 0 and self.nul_bytes == self.size - self.complete

    @property
    def blank(self) -> bool:
        return self.text is not None and not self.text.strip()


def read_lines(f: BinaryIO, *, max_line: int = MAX_LINE) -> Iterator[Line]:
    """Every line of ``f`` (opened in binary mode), holding at most ``max_line`` bytes of one line at a time."""
    readline = f.readline
    number = 0
    while True:
        piece = readline(_PIECE)
        if not piece:
            return
        number += 1
        if piece[-1:] == b"\n" and b"\0" not in piece:  # a whole line of at most a piece: nearly every line
            yield Line(number, piece, len(piece), 0, True)
            continue
        parts: list[bytes] | None = []
        size = nuls = 0
        while True:
            size += len(piece)
            nuls += piece.count(NUL)
            if parts is not None:
                if size > max_line or nuls:  # a line with NUL bytes is no JSON: its text is never needed
                    parts = None
                else:
                    parts.append(piece)
            if piece.endswith(b"\n"):
                break
            piece = readline(_PIECE)
            if not piece:
                break
        yield Line(number, None if parts is None else b"".join(parts), size, nuls, piece.endswith(b"\n"))
