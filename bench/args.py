"""Command-line values of the bench scripts."""

from __future__ import annotations

import argparse

__all__ = ["decimal"]


def decimal(text: str) -> int:
    """An ``argparse`` type: an integer written in ASCII decimal digits, a ``-`` before them
    allowed (the script's own range check then names the value). Python's ``int`` also reads
    other scripts' digits (``２``), ``_`` between digits (``1_0``), a ``+`` and whitespace
    around; such a value is refused, and argparse says so and exits 2.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not such an integer.
    """
    digits = text.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):
        raise argparse.ArgumentTypeError(f"not a whole number in digits 0-9: {text!r}")
    return int(text)
