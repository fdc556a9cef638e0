"""The checks of the settings the annealing callback trains with, shared by ``TemperatureAnnealingCallback``
(``east_hf.hf.callbacks``), which runs them when it is made and when training begins, and ``EASTConfig``
(``east_hf.hf.config``), which runs them on its fields when it is made."""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_EMA_DECAY", "check_ema_decay", "check_evaluates"]

DEFAULT_EMA_DECAY = 0.0  # no moving average of the weights, as the paper; the callback's and the config's default


def check_ema_decay(ema_decay: Any) -> float:
    """``ema_decay`` as a float in [0, 1) (0: no moving average), or a one-line ``ValueError``.

    >>> check_ema_decay(0.9)
    0.9
    """
    if isinstance(ema_decay, bool) or not isinstance(ema_decay, (int, float)) or not 0 <= ema_decay < 1:
        raise ValueError(f"Expected ema_decay in [0, 1) (0: no moving average of the weights), got {ema_decay!r}")
    return float(ema_decay)


def check_evaluates(eval_strategy: str) -> None:
    """Annealing ends its stages on validation results: refuse ``eval_strategy="no"``."""
    if eval_strategy == "no":
        raise ValueError(
            "Expected eval_strategy 'steps' or 'epoch' (and an eval_dataset) for temperature annealing, got 'no': "
            "the stages end on validation results; set east_annealing=False to train at a fixed temperature"
        )
