"""The metric keys the annealing watches, as the Trainer logs them: the across-stage key of a metric, the key the best
model is chosen by, and which way each is better. Pure strings: the schedule (``east_hf.core.annealing``) compares
values, the config and the callback name the keys."""

from __future__ import annotations

from east_hf.core.metrics import target_metric_key

__all__ = ["anneal_key", "monitor_mode", "selection_key"]


def monitor_mode(key: str) -> str:
    """``"min"`` for a metric key ending in ``loss``, else ``"max"``: the Trainer's ``greater_is_better`` default.

    >>> monitor_mode("eval_loss"), monitor_mode("eval_fbeta")
    ('min', 'max')
    """
    return "min" if key.endswith("loss") else "max"


def anneal_key(metric: str, anneal_monitor: str | None = None) -> str:
    """The metric key watched across stages: ``anneal_monitor``, or the hard metric the surrogate of ``metric``
    targets, as the Trainer logs it (``eval_<key>``, ``"f1"`` reported as ``fbeta``).

    >>> anneal_key("f1"), anneal_key("mcc"), anneal_key("fbeta", "eval_loss")
    ('eval_fbeta', 'eval_mcc', 'eval_loss')
    """
    return anneal_monitor or f"eval_{target_metric_key(metric)}"


def selection_key(anneal_key: str, select_window: int = 1) -> str:
    """The metric key of the value the best model is chosen by: ``anneal_key`` itself, or for a mean over
    ``select_window`` > 1 evaluations ``eval_mean<k>_<name>`` (ending as the anneal key does, so the Trainer infers
    ``greater_is_better`` alike).

    >>> selection_key("eval_fbeta"), selection_key("eval_fbeta", 3), selection_key("eval_loss", 3)
    ('eval_fbeta', 'eval_mean3_fbeta', 'eval_mean3_loss')
    """
    if select_window == 1:
        return anneal_key
    return f"eval_mean{select_window}_{anneal_key.removeprefix('eval_')}"
