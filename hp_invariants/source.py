"""Reading, decoding, position arithmetic and edit application for one Python source file.

A :class:`SourceFile` keeps what is needed to write the file back byte-exact outside an edit: the
encoding (PEP 263 cookie or BOM, found by :func:`tokenize.detect_encoding`), the BOM and the original
line endings. Positions follow :mod:`hp_invariants.model`: 1-based lines, 0-based character
columns.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass, field
from typing import Any, Iterable

from hp_invariants.model import Edit

_NEWLINE = re.compile(r"\r\n|\r|\n")


class SourceDecodeError(ValueError):
    """The bytes of a file cannot be decoded as Python source (bad cookie, invalid bytes, NUL)."""


class NotRegularFileError(OSError):
    """The path names a folder, a FIFO, a device or a socket, not a regular file."""


def _size_text(size: int) -> str:
    """A file size for a message: ``5 MiB``, ``5.3 MiB``, or bytes below one MiB (``200 bytes``, ``1 byte``)."""
    if size < 2**20:
        return "1 byte" if size == 1 else f"{size} bytes"
    return f"{size / 2**20:.1f}".removesuffix(".0") + " MiB"


class FileTooLargeError(OSError):
    """The file is larger than the configured limit (``max-file-size``); it was not read."""

    def __init__(self, path: str, size: int, limit: int):
        super().__init__(errno.EFBIG, f"{_size_text(size)} is over the {_size_text(limit)} limit", path)
        self.size = size
        self.limit = limit


def read_source_bytes(path: str, max_size: int | None = None) -> tuple[bytes, os.stat_result]:
    """Return the bytes of the regular file at ``path`` and its ``os.stat`` result.

    Safe on anything a walk or a command line can name: the file is opened non-blocking (a FIFO
    named ``x.py`` cannot hang the run) and checked with ``fstat`` before reading. Raises
    ``OSError`` (missing, unreadable, symlink loop), :class:`NotRegularFileError` (folder, FIFO,
    device, socket) and :class:`FileTooLargeError` when the file is over ``max_size`` bytes (then at
    most ``max_size + 1`` bytes are read, so memory stays bounded).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise NotRegularFileError(errno.EISDIR, "is a folder, not a file", path)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError(errno.EINVAL, "not a regular file (FIFO, device or socket)", path)
        if max_size is not None and max_size > 0 and info.st_size > max_size:
            raise FileTooLargeError(path, info.st_size, max_size)
        with open(fd, "rb", closefd=False) as handle:
            raw = handle.read() if not max_size or max_size <= 0 else _read_at_most(handle, max_size + 1)
    finally:
        os.close(fd)
    if max_size is not None and max_size > 0 and len(raw) > max_size:  # grew while being read
        raise FileTooLargeError(path, len(raw), max_size)
    return raw, info


def _read_at_most(handle: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of ``handle``, read in chunks of up to 1 MiB (``read(limit)`` sets aside
    ``limit`` bytes at once: a generous ``max-file-size``, 30,000 MiB, was a MemoryError)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = handle.read(min(left, 2**20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------------- identifiers in text
_LAST_SPELLED: tuple = (None, None)
"""The last text :func:`identifier_text` was asked about and its answer (each rule's prefilter asks
about the same text in turn)."""


def identifier_text(text: str, remember: bool = True) -> str:
    """``text`` as a text prefilter must search it for identifiers: Python reads identifiers in NFKC
    form (PEP 3131: ``ﬁx`` and ``ｆix`` are the name ``fix``), so where ``text`` is not in NFKC form
    its NFKC form is appended (a superset: every spelling the parser reads as a name is then found as
    that name); else ``text`` itself (ASCII text, nearly every file, is answered at once). The last
    answer is kept for the next question about the same text (each rule's prefilter asks in turn);
    ``remember`` False: a one-off question (a pass over other files) that must not displace it."""
    global _LAST_SPELLED
    if text.isascii():
        return text
    last = _LAST_SPELLED
    if last[0] is text:
        return last[1]
    import unicodedata  # noqa: PLC0415

    found = text if unicodedata.is_normalized("NFKC", text) else text + "\n" + unicodedata.normalize("NFKC", text)
    if remember:
        _LAST_SPELLED = (text, found)
    return found


_ASCII_SAFE_CODECS = frozenset({"utf-8", "ascii", "iso8859-1", "cp1252", "utf-8-sig"})
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)


def ascii_as_written(raw: bytes) -> bool:
    """True when ``raw`` is ASCII and decodes to itself: no PEP 263 cookie names a codec that reads
    ASCII bytes as other text (``utf-7``'s ``+AF8-`` is ``_``, ``unicode_escape``'s ``\\u005f`` too),
    so a byte search for an ASCII name finds every spelling of it the parser reads."""
    if not raw.isascii():
        return False
    first = raw.find(b"\n")
    second = raw.find(b"\n", first + 1) if first >= 0 else -1
    found = _COOKIE.search(raw if second < 0 else raw[:second])
    if found is None:
        return True
    import codecs  # noqa: PLC0415

    try:
        return codecs.lookup(found.group(1).decode("ascii")).name in _ASCII_SAFE_CODECS
    except LookupError:
        return False


def content_digest(raw: bytes) -> bytes:
    """The content key of a file's bytes (blake2b, 16 bytes): what the project cache and the results
    cache recognise a file's content by."""
    return hashlib.blake2b(raw, digest_size=16).digest()


@dataclass
class SourceFile:
    """The decoded text of one file plus how to encode it back.

    Build one with :meth:`from_bytes` (raises :class:`SourceDecodeError`). ``text`` has the BOM
    stripped and keeps the original line endings.
    """

    path: str
    text: str
    encoding: str = "utf-8"
    bom: bool = False
    _line_starts: list[int] = field(default_factory=list, repr=False)
    known_digest: bytes | None = field(default=None, repr=False, compare=False)
    """The content digest of the bytes this text was decoded from, when the reader computed it."""

    @classmethod
    def from_bytes(cls, path: str, raw: bytes) -> "SourceFile":
        """Decode ``raw`` the way the interpreter does.

        Raises :class:`SourceDecodeError` for an unknown or wrong coding cookie, bytes invalid in the
        encoding, or NUL bytes (a binary file named ``.py``).
        """
        if b"\x00" in raw:
            raise SourceDecodeError("source contains NUL bytes (binary file?)")
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        except SyntaxError as exc:  # unknown encoding / BOM with a different cookie
            raise SourceDecodeError(f"bad coding cookie or BOM ({exc})") from exc
        bom = encoding == "utf-8-sig"
        try:
            if b"#\n".decode(encoding) != "#\n":  # utf-16/32 cookie: the interpreter refuses these too
                raise SourceDecodeError(f"coding cookie names {encoding!r}, which is not ASCII-compatible")
            text = raw.decode(encoding)
        except (UnicodeError, LookupError) as exc:
            raise SourceDecodeError(f"cannot decode as {encoding}: {exc}") from exc
        if bom:
            encoding = "utf-8"
        return cls(path=path, text=text, encoding=encoding, bom=bom)

    def content_digest(self) -> bytes:
        """:func:`content_digest` of this file's bytes (:meth:`encode`: the bytes
        it was decoded from), computed once; what the project facts key each file's summary by."""
        if self.known_digest is None:
            self.known_digest = content_digest(self.encode())
        return self.known_digest

    def encode(self, text: str | None = None) -> bytes:
        """Encode ``text`` (default: this file's text) with the file's encoding and BOM."""
        data = (self.text if text is None else text).encode(self.encoding)
        return (b"\xef\xbb\xbf" + data) if self.bom else data

    # ------------------------------------------------------------------ positions
    @property
    def line_starts(self) -> list[int]:
        """Offsets in ``text`` where each line starts (index 0 is line 1)."""
        if not self._line_starts:
            starts = [0]
            starts.extend(match.end() for match in _NEWLINE.finditer(self.text))
            self._line_starts = starts
        return self._line_starts

    def line_text(self, line: int) -> str:
        """Return line ``line`` (1-based) without its line ending; ``""`` past the end."""
        starts = self.line_starts
        if line < 1 or line > len(starts):
            return ""
        start = starts[line - 1]
        end = starts[line] if line < len(starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def newline(self) -> str:
        """Return the file's dominant line ending (``\\n`` when it has none)."""
        match = _NEWLINE.search(self.text)
        return match.group(0) if match else "\n"

    def char_col(self, line: int, byte_col: int) -> int:
        """Convert an ``ast`` UTF-8 byte column on ``line`` into a character column."""
        text = self.line_text(line)
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def offset(self, line: int, col: int) -> int:
        """Return the offset in ``text`` of ``(line, col)`` (character column)."""
        starts = self.line_starts
        if line > len(starts):
            return len(self.text)
        return starts[line - 1] + col

    def position(self, offset: int) -> tuple[int, int]:
        """Return ``(line, col)`` of an offset in ``text`` (inverse of :meth:`offset`)."""
        import bisect

        index = bisect.bisect_right(self.line_starts, offset) - 1
        return index + 1, offset - self.line_starts[index]

    def node_range(self, node) -> tuple[tuple[int, int], tuple[int, int]]:
        """Return the ``((line, col), (end_line, end_col))`` character range of an ``ast`` node."""
        return (
            (node.lineno, self.char_col(node.lineno, node.col_offset)),
            (node.end_lineno, self.char_col(node.end_lineno, node.end_col_offset)),
        )

    def segment(self, start: tuple[int, int], end: tuple[int, int]) -> str:
        """Return the text between two positions."""
        return self.text[self.offset(*start) : self.offset(*end)]

    # ------------------------------------------------------------------ edits
    def apply_edits(self, edits: Iterable[Edit]) -> str:
        """Return ``text`` with ``edits`` applied.

        Raises ``ValueError`` if two edits overlap (callers drop conflicting fixes first).
        """
        spans = sorted(
            ((self.offset(*e.start), self.offset(*e.end), e.content) for e in edits),
            key=lambda span: (span[0], span[1]),
        )
        out: list[str] = []
        cursor = 0
        for start, end, content in spans:
            if start < cursor:
                raise ValueError("overlapping edits")
            out.append(self.text[cursor:start])
            out.append(content)
            cursor = end
        out.append(self.text[cursor:])
        return "".join(out)
