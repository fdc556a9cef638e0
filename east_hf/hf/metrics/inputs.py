"""What the Trainer hands a ``compute_metrics``, as tensors, and the metric-key names of classes or labels; shared by
``ComputeMetrics`` (single-label) and ``MultiLabelComputeMetrics``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from east_hf.core import safe_name

__all__ = ["IGNORE_INDEX", "as_tensor", "class_names"]

IGNORE_INDEX = -100  # the label the Trainer pads with and the loss ignores


def class_names(num_classes: int, id2label: Mapping[Any, str] | None) -> list[str]:
    """Safe names of all classes, from ``id2label`` or the index; clashing or empty names get ``_<index>``."""
    labels = {int(k): str(v) for k, v in (id2label or {}).items()}
    names = [safe_name(labels.get(k, k)) for k in range(num_classes)]
    return [f"{name}_{k}" if names.count(name) > 1 or not name else name for k, name in enumerate(names)]


def as_tensor(x: Any) -> torch.Tensor:
    """Predictions or labels as one tensor: the first of several model outputs, batches concatenated."""
    if isinstance(x, tuple):  # a model with several outputs: the logits come first
        return as_tensor(x[0])
    if isinstance(x, list) and x and isinstance(x[0], (tuple, list, np.ndarray, torch.Tensor)):
        return torch.cat([as_tensor(b) for b in x])  # eval_do_concat_batches=False: one entry per batch
    return torch.as_tensor(x)
