"""How ``EASTConfig``'s ``east_*`` fields map onto the parameters of the core objects that own them.

``LOSS_FIELDS`` and ``SCHEDULE_FIELDS`` name each field beside the ``EASTLoss`` / ``AnnealingSchedule`` parameter it
sets. The config reads a shared default from the core object's signature (``core_default``), validates its values by
making the object once (``east_hf.hf.config.checks``; ``field_error`` names a failing parameter by its field), and the
builder (``east_hf.hf.config.build``) passes the same values on.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "LOSS_FIELDS",
    "OWN_DEFAULTS",
    "RESOLVED_SCHEDULE_FIELDS",
    "SCHEDULE_FIELDS",
    "core_default",
    "field_error",
    "strategy_name",
]

LOSS_FIELDS = {
    "east_metric": "metric",
    "east_beta": "beta",
    "east_beta_floor": "beta_floor",
    "east_average": "average",
    "east_pos_label": "pos_label",
    "east_temperature": "temperature",
    "east_threshold_grad": "threshold_grad",
    "east_confusion_memory": "confusion_memory",
}
"""``EASTConfig`` field -> the ``EASTLoss`` parameter it sets."""
SCHEDULE_FIELDS = {
    "east_temperature": "temperature",
    "east_decay": "decay",
    "east_patience": "patience",
    "east_stage_patience": "stage_patience",
    "east_min_temperature": "min_temperature",
    "east_max_stages": "max_stages",
    "east_threshold": "threshold",
    "east_threshold_mode": "threshold_mode",
    "east_warm_start_steps": "warm_start_steps",
    "east_ce_weight_decay": "ce_weight_decay",
    "east_select_window": "select_window",
}
"""``EASTConfig`` field -> the ``AnnealingSchedule`` parameter it sets as it is (the others are resolved by the
builder: ``east_warm_start``, ``east_warm_start_epochs``, ``east_ce_weight``, ``east_lr_decay``,
``east_anneal_threshold``)."""
RESOLVED_SCHEDULE_FIELDS = {
    "east_warm_start": "warm_start",
    "east_warm_start_epochs": "warm_start_epochs",
    "east_ce_weight": "ce_weight",
    "east_lr_decay": "lr_decay",
    "east_anneal_threshold": "anneal_threshold",
}
OWN_DEFAULTS = {"east_beta_floor", "east_warm_start", "east_ce_weight", "east_lr_decay"}
"""Fields whose default is the config's own, not the core object's: what the Trainer layer trains by default (the
floored beta, the cross-entropy warm start, the annealed cross-entropy weight and, with one class scored, the learning
rate halved at each temperature decrease) where the core's default is the paper's letter."""


def core_default(owner: Any, param: str) -> Any:
    """The default of ``param`` in the signature of a core object: the one place that default is written."""
    return inspect.signature(owner).parameters[param].default


def strategy_name(strategy: Any) -> str:
    """A strategy given as a string or as transformers' enum, as its string."""
    return str(getattr(strategy, "value", strategy))


def field_error(error: Exception, fields: Mapping[str, str]) -> ValueError:
    """A core object's one-line error with its parameter named as the ``east_`` field that set it (``fields``: field
    -> parameter)."""
    names = {param: name for name, param in fields.items()}
    message = re.sub(
        r"\b(Expected )(\w+)",
        lambda m: f"{m.group(1)}{names[m.group(2)]}" if m.group(2) in names else m.group(0),
        str(error),
        count=1,
    )
    return ValueError(message)
