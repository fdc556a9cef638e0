"""The decision rule of a run: tuned from validation logits by ``EASTTrainer.tune_decision_rule`` (per-class logit
offsets for the configured metric; multi-label: one offset per label, at the beta the surrogate trains), folded into
the model's output bias, and recorded by east-train in ``decision_rule.json``.

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

import torch

from east_hf.core import resolve_beta
from east_hf.core.decision.logits import LogitsFile
from east_hf.core.decision.multilabel import tune_label_offsets
from east_hf.core.decision.rule import DecisionRule, tune_logit_offsets
from east_hf.core.loss_registry import SetLoss, floored_beta

__all__ = ["DECISION_RULE_FILE", "FOLDED_OFFSETS_KEY", "read_decision_rule", "rule_edited", "tune_rule"]

logger = logging.getLogger("east_hf.hf.predict.predictor")  # the warning belongs to prediction, where it is read

DECISION_RULE_FILE = "decision_rule.json"  # east-train's record of a tuned rule, whose offsets are in the saved bias
# The config.json key under which east-train records the offsets ({class name: offset}) it folded into the output bias
FOLDED_OFFSETS_KEY = "east_decision_offsets"


def tune_rule(
    logits: LogitsFile | torch.Tensor,
    labels: torch.Tensor,
    args: Any,
    loss: SetLoss,
    id2label: Mapping[int, str] | None = None,
    multi_label: bool = False,
) -> tuple[Any, DecisionRule]:
    """(the beta tuned for, the rule) of ``logits`` (N, C) (a ``LogitsFile``, read a block or a column at a time; a
    multi-label rule reads the whole (N, L) back into memory) and ``labels`` for ``args``' ``east_metric``,
    ``east_beta`` (``loss``'s resolved beta where it has one; by class name through ``id2label``), ``east_average``
    and ``east_pos_label``; a precision-leaning beta is floored at ``east_beta_floor``, as the surrogate trains it."""
    beta = getattr(loss, "beta", None)
    if beta is None:  # a baseline: resolve the configured beta as EASTLoss would
        beta = resolve_beta(args.east_beta, id2label, logits.shape[1])
    beta = floored_beta(beta.tolist() if isinstance(beta, torch.Tensor) else beta, args.east_beta_floor)
    if multi_label:  # one offset per label, tuned on the (N, L) logits in memory
        scores = logits.block(0, logits.shape[0]) if isinstance(logits, LogitsFile) else logits
        settings = dict(beta=beta, average=args.east_average, zero_division=getattr(loss, "zero_division", 0.0))
        return beta, tune_label_offsets(scores, labels, args.east_metric, **settings)
    rule = tune_logit_offsets(
        logits, labels, args.east_metric, beta=beta, average=args.east_average, pos_label=args.east_pos_label
    )
    return beta, rule


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
            "predict with other offsets, add their difference to the bias (east_hf.core.decision.rule."
            "fold_offsets_into_bias) and save the model, or train again with --tune_decision_rule true"
        )
    return not same
