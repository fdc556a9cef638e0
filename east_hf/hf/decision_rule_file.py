"""``decision_rule.json``, east-train's record of the decision rule it tuned and folded into the model's output bias.

The saved model alone applies the rule (``config.json`` records the folded offsets as ``FOLDED_OFFSETS_KEY``), as with
the Auto classes or a pipeline: the file is a record, not a setting. A file that differs from the record (edited by
hand) is not applied, and one warning line says so and how to apply other offsets.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["DECISION_RULE_FILE", "FOLDED_OFFSETS_KEY", "read_decision_rule", "rule_edited"]

logger = logging.getLogger("east_hf.hf.predict")  # the warning belongs to prediction, where it is read

DECISION_RULE_FILE = "decision_rule.json"  # east-train's record of a tuned rule, whose offsets are in the saved bias
# The config.json key under which east-train records the offsets ({class name: offset}) it folded into the output bias
FOLDED_OFFSETS_KEY = "east_decision_offsets"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def read_decision_rule(path: Path) -> dict | None:
    """``decision_rule.json`` as a dict, ``None`` where there is none; a file that cannot be read, is not JSON or not
    a JSON object is a one-line ``ValueError`` naming it."""
    if not path.is_file():
        return None
    fix = "restore it (the rule itself is in the model's bias) or remove it"
    try:
        rule = json.loads(path.read_bytes().decode("utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(
            f"Expected {path} to hold JSON as east-train writes it, got {e.msg} at line {e.lineno} column {e.colno}: "
            f"{fix}"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"Expected a readable UTF-8 file {path}, got {_one_line(e)}: {fix}") from None
    if not isinstance(rule, dict):
        raise ValueError(
            f"Expected {path} to hold a JSON object as east-train writes it, got a {type(rule).__name__}: {fix}"
        )
    return rule


def _offsets_text(offsets: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{name} {value:g}" if isinstance(value, (int, float)) else f"{name} {value!r}"
        for name, value in offsets.items()
    )


def rule_edited(rule: dict, folded: Any, path: Path) -> bool:
    """Whether ``rule``'s offsets (``decision_rule.json`` at ``path``) differ from ``folded``, those ``config.json``
    records as folded into the output bias; a difference is not applied, and one warning line says so and how to
    apply other offsets. A config without the record (a run saved before east_hf recorded it) cannot tell: False."""
    if not isinstance(folded, Mapping):
        return False
    offsets = rule.get("offsets")
    same = (
        isinstance(offsets, Mapping)
        and set(offsets) == set(folded)
        and all(
            isinstance(offsets[k], (int, float))
            and not isinstance(offsets[k], bool)
            and abs(float(offsets[k]) - float(folded[k])) <= 1e-6
            for k in folded
        )
    )
    if not same:
        logger.warning(
            f"{path} was edited: its offsets are not applied; predictions use the rule east-train folded into the "
            f"model's output bias ({_offsets_text(folded)}, recorded in config.json as {FOLDED_OFFSETS_KEY}). To "
            "predict with other offsets, add their difference to the bias (east_hf.core.decision."
            "fold_offsets_into_bias) and save the model, or train again with --tune_decision_rule true"
        )
    return not same
