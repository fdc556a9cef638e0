"""Where a model card is written, and how east_hf knows a card of its own: a last line signing the text above it.

The signature is an HTML comment the Hub does not show, holding the SHA-256 of the text above it. A ``README.md``
without a valid one (the user wrote it, or edited the card east_hf wrote) is never replaced: the card goes beside it
as ``CARD_BESIDE_README``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

__all__ = ["CARD_BESIDE_README", "card_path", "is_unchanged_card", "signed"]

# The card's name beside a README.md that east_hf did not write, or that was edited since: that README stays as it is.
CARD_BESIDE_README = "README.east_hf.md"
_SIGNATURE = "<!-- east_hf model card; sha256 of the text above: {} -->"
_SIGNED = re.compile(r"<!-- east_hf model card; sha256 of the text above: ([0-9a-f]{64}) -->")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def signed(text: str) -> str:
    """``text`` and a last line signing it: the SHA-256 of everything above that line, in an HTML comment."""
    body = text if text.endswith("\n") else text + "\n"
    return body + _SIGNATURE.format(_digest(body)) + "\n"


def is_unchanged_card(path: str | Path) -> bool:
    """Whether ``path`` holds a model card east_hf wrote, unchanged since: its last line is the signature and the
    SHA-256 of the text above it matches. A user's README, an edited card or a card from before east_hf signed its
    cards is not one, and is never replaced."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    body, _, last = text.rstrip("\n").rpartition("\n")
    found = _SIGNED.fullmatch(last)
    return found is not None and found.group(1) == _digest(body + "\n")


def card_path(output_dir: Path) -> Path:
    """Where a card goes: ``README.md`` where it is missing or an unchanged card of east_hf's, else
    ``CARD_BESIDE_README`` (or a numbered ``README.east_hf-<n>.md`` where that name too holds a file east_hf did not
    write as it is): east_hf never replaces a README the user wrote or edited."""
    readme = output_dir / "README.md"
    if not readme.exists() or is_unchanged_card(readme):
        return readme
    path, n = output_dir / CARD_BESIDE_README, 1
    while path.exists() and not is_unchanged_card(path):
        n += 1
        path = output_dir / f"{Path(CARD_BESIDE_README).stem}-{n}.md"
    return path
