"""Argument types the subcommands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [lo, hi], or a message naming what is wrong."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range ({lo}..{hi})")
        return value

    return parse
