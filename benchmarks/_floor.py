"""The ``ast.parse`` floor: read, decode and ``ast.parse`` every file of a list, in one process.

Usage: ``python benchmarks/_floor.py FILELIST`` where FILELIST holds one path per line. This is the
least work any ``ast``-based checker must do, done the way hp-invariants' engine does it (bytes read
whole, decoded with the PEP 263 cookie / BOM, one ``ast.parse`` per file). Prints
``files=N parsed=M errors=K`` on stdout; always exits 0 (files that do not parse are counted).
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize


def main(argv: list[str]) -> int:
    """Parse every file named in the list file ``argv[0]``; print the counts; return 0."""
    with open(argv[0], encoding="utf-8") as handle:
        paths = [line.rstrip("\n") for line in handle if line.strip()]
    parsed = errors = 0
    for path in paths:
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
            encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
            text = raw.decode(encoding)
            if text.startswith("\ufeff"):
                text = text[1:]
            ast.parse(text, filename=path)
            parsed += 1
        except (OSError, SyntaxError, ValueError, LookupError, RecursionError, MemoryError):
            errors += 1
    print(f"files={len(paths)} parsed={parsed} errors={errors}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
