"""Hard metrics for evaluation: packaged evaluate modules and a Trainer ``compute_metrics``, both over the core.

- ``load_metric("macro_fbeta")`` / ``load_metric("mcc")`` load the evaluate modules shipped in this package
  (``east_hf/hf/metrics/<name>/<name>.py``), offline. Each module folder stands alone: its script needs only
  numpy (with evaluate and datasets), computes what the core computes, and pushes to the Hub as a Space.
- ``build_compute_metrics(num_classes, ...)`` returns a Trainer ``compute_metrics`` that calls the functional core
  directly (no evaluate inside the evaluation loop); ``multi_label=True`` a ``MultiLabelComputeMetrics`` for
  multi-hot labels (N, L).
- ``load_metric(name, config_name="multilabel")`` loads a module's multi-label config (indicator rows), as
  evaluate's own ``f1``.
"""

from __future__ import annotations

from pathlib import Path

from east_hf.core.validation import check_choice
from east_hf.hf.metrics.compute import METRIC_KEYS, SUMMARY_KEYS, ComputeMetrics, build_compute_metrics, safe_name
from east_hf.hf.metrics.multilabel import MULTILABEL_METRIC_KEYS, MultiLabelComputeMetrics

__all__ = [
    "METRIC_DIR",
    "METRIC_KEYS",
    "METRIC_NAMES",
    "MULTILABEL_METRIC_KEYS",
    "SUMMARY_KEYS",
    "ComputeMetrics",
    "MultiLabelComputeMetrics",
    "build_compute_metrics",
    "load_metric",
    "safe_name",
]

METRIC_DIR = Path(__file__).resolve().parent
"""The folder holding one evaluate module per metric, in evaluate's layout ``<name>/<name>.py``."""

METRIC_NAMES = ("macro_fbeta", "mcc")


def load_metric(name: str, config_name: str | None = None, **kwargs):
    """Load a packaged evaluate metric by name: ``evaluate.load`` on its path inside east_hf.

    ``evaluate.load("mcc")`` would first look for ``./mcc/mcc.py`` in the working directory and then ask the Hub;
    this helper passes the absolute path of the packaged script, so it needs no network and no particular working
    directory. ``config_name`` (``"multilabel"``) and ``kwargs`` go to ``evaluate.load`` (``experiment_id``,
    ``keep_in_memory``, ...), so ``load_metric("macro_fbeta", "multilabel")`` reads as ``evaluate.load`` does.

    >>> round(load_metric("macro_fbeta").compute(predictions=[0, 1, 1], references=[0, 1, 0])["fbeta"], 4)
    0.6667
    """
    check_choice("a metric name", name, METRIC_NAMES)
    import evaluate  # imported here: it is slow to import and only the metric modules need it

    return evaluate.load(str(METRIC_DIR / name), config_name, **kwargs)
