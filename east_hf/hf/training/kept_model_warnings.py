"""Warnings at the end of training about the model kept (``load_best_model_at_end``).

A model that finds almost none of a scored class on validation (``warn_near_empty_kept_model``), and one that never
predicts a class with validation samples (``warn_unpredicted_kept_classes``): small or imbalanced data can keep such a
model whatever the loss, and its test scores then say less than its validation metric suggested.
"""

from __future__ import annotations

from typing import Any

from transformers.utils import logging as hf_logging

__all__ = ["NEAR_EMPTY_RECALL", "UNPREDICTED_NAMED", "warn_near_empty_kept_model", "warn_unpredicted_kept_classes"]

NEAR_EMPTY_RECALL = 0.05  # validation recall of a scored class below which the kept model is warned about
UNPREDICTED_NAMED = 10  # classes a warning names before it counts the rest: one line with many classes

logger = hf_logging.get_logger(__name__)


def warn_near_empty_kept_model(log_history: list[dict[str, Any]], best_step: int | None, binary: bool) -> str | None:
    """Warn (and return the message) when the model kept at the end finds almost none of a scored class on
    validation: recall below ``NEAR_EMPTY_RECALL`` for the positive class (``binary``) or for a class reported by
    name (``eval_recall_<name>``, e.g. the classes of a per-class beta). A precision-leaning target (F-beta with beta
    < 1) judged on a few dozen validation positives can keep an epoch that predicted a handful of them by luck; such a
    model predicts almost nothing on new data."""
    if best_step is None:
        return None
    evaluation = next((h for h in log_history if h.get("step") == best_step and "eval_loss" in h), None)
    if evaluation is None:
        return None
    keys = [k for k in evaluation if k.startswith("eval_recall_")] + (["eval_recall"] if binary else [])
    low = {
        k: evaluation[k] for k in keys if isinstance(evaluation[k], (int, float)) and evaluation[k] < NEAR_EMPTY_RECALL
    }
    if not low:
        return None
    which = ", ".join(f"{k.removeprefix('eval_')}={v:.3f}" for k, v in low.items())
    message = (
        f"The model kept (step {best_step}) finds almost none of a scored class on validation ({which}, below "
        f"{NEAR_EMPTY_RECALL}): a near-empty prediction that a few validation samples rewarded; check the test "
        "recall, and consider east_select_window 3 (the best mean over three evaluations)"
    )
    logger.warning(message)
    return message


def warn_unpredicted_kept_classes(
    unpredicted: dict[int, list[tuple[int, float]]] | None,
    best_step: int | None,
    id2label: dict | None,
    multi_label: bool = False,
    supported: dict[int, int] | None = None,
) -> str | None:
    """Warn (and return the message) when the model kept at the end never predicts a class (multi-label: a label)
    that has validation samples (``unpredicted``: per evaluation step, the (class, samples) pairs the trainer
    recorded; ``supported``: per step, how many classes have validation samples). Small or imbalanced data can leave
    a class that no run learned, whatever the loss; its recall and F-beta are 0. A single-label model that predicts
    one class for every validation row has learned nothing: the line says so, and what to try."""
    if not unpredicted or best_step is None or not unpredicted.get(best_step):
        return None
    what, many = ("label", "labels") if multi_label else ("class", "classes")
    classes = unpredicted[best_step]
    names = ", ".join(f"{(id2label or {}).get(k, k)} ({n:g} samples)" for k, n in classes[:UNPREDICTED_NAMED])
    if len(classes) > UNPREDICTED_NAMED:
        names += f" and {len(classes) - UNPREDICTED_NAMED} more {many}"
    if not multi_label and (supported or {}).get(best_step, 0) == len(classes) + 1:
        message = (
            f"The model kept (step {best_step}) predicts one class for every validation row, while {len(classes)} "
            f"other classes have validation samples ({names}): it tells no class apart; try a longer warm start "
            "(east_warm_start_epochs -1: until its own early stopping), a higher learning rate or more epochs, and "
            "compare --loss ce"
        )
        logger.warning(message)
        return message
    message = (
        f"The model kept (step {best_step}) never predicts a {what} that has validation samples: {names}; its "
        f"recall and F-beta of that {what} are 0 (too few training steps or samples of it: more epochs or a higher "
        "learning rate can help)"
    )
    logger.warning(message)
    return message
