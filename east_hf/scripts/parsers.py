"""Command-line parsers whose usage errors are one line, as every east_hf command's other errors are.

argparse prints its usage lines before ``<prog>: error: ...``; east_hf's commands say what went wrong in one line
and leave the usage to ``--help``. Standard library only: the commands import it before torch loads.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["OneLineArgumentParser", "OneLineErrors"]


class OneLineErrors:
    """An ``argparse.ArgumentParser`` mixin: ``error`` exits with status 2 after one line, ``<prog>: error:
    <message>`` (the message's whitespace folded), without the usage lines."""

    prog: str

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")


class OneLineArgumentParser(OneLineErrors, argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with one-line usage errors (``OneLineErrors``)."""
