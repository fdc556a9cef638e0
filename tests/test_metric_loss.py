"""The fused loss of a confusion matrix, 1 - M(C) in one Function, against 1 - M of ``east_hf.core.metrics``."""

import pytest
import torch

from east_hf.core import METRICS
from east_hf.core.metric_loss import MetricConstants, metric_loss

SETTINGS = [
    ("fbeta", {"average": "macro"}),
    ("fbeta", {"average": "weighted"}),
    ("fbeta", {"average": "micro"}),
    ("fbeta", {"average": "binary", "pos_label": 1}),
    ("fbeta", {"average": "binary", "pos_label": 0}),
    ("fbeta", {"average": "macro", "beta": "per_class"}),
    ("fbeta", {"average": "weighted", "beta": "per_class", "zero_division": 1.0}),
    ("fbeta", {"average": "micro", "beta": 0.5, "zero_division": 0.5}),
    ("f1", {"average": "macro", "zero_division": 1.0}),
    ("mcc", {}),
    ("accuracy", {}),
]

MATRICES = {
    "soft": lambda c: torch.rand(c, c, dtype=torch.float64) * 10 + 0.1,
    "empty_class": lambda c: (
        (torch.rand(c, c, dtype=torch.float64) * 10)
        .index_fill_(0, torch.tensor([0]), 0.0)
        .index_fill_(1, torch.tensor([0]), 0.0)
    ),  # class 0 neither true nor predicted: F-beta's denominator is 0
    "one_column": lambda c: torch.zeros(c, c, dtype=torch.float64).index_fill_(1, torch.tensor([1]), 3.0),  # MCC 0
    "zeros": lambda c: torch.zeros(c, c, dtype=torch.float64),
    "hard": lambda c: torch.randint(0, 5, (c, c)).double(),
}


def _kwargs(metric, settings, c):
    kwargs = dict(settings)
    if kwargs.get("beta") == "per_class":
        kwargs["beta"] = torch.linspace(0.25, 2.0, c, dtype=torch.float64)
    if metric in ("mcc", "accuracy"):
        kwargs = {}
    return kwargs


@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("c", [2, 3, 10])
@pytest.mark.parametrize("metric, settings", SETTINGS)
def test_fused_metric_loss_equals_one_minus_the_metric(metric, settings, c, matrix):
    kwargs = _kwargs(metric, settings, c)
    if kwargs.get("average") == "binary" and c != 2:
        kwargs["pos_label"] = c - 1
    cm = MATRICES[matrix](c).requires_grad_()
    ref = 1 - METRICS[metric](cm, **kwargs)
    (g_ref,) = torch.autograd.grad(ref, cm)
    got = metric_loss(cm, metric, **kwargs)
    (g_got,) = torch.autograd.grad(got, cm)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g_got, g_ref, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("metric, settings", SETTINGS)
def test_gradcheck_fused_metric_loss(metric, settings):
    kwargs = _kwargs(metric, settings, 4)
    if kwargs.get("average") == "binary":
        kwargs["pos_label"] = 3
    cm = (torch.rand(4, 4, dtype=torch.float64) * 5 + 0.5).requires_grad_()
    constants = MetricConstants(metric, 4, cm, **kwargs)
    assert torch.autograd.gradcheck(lambda x: metric_loss(x, constants=constants), (cm,))


def test_fused_metric_loss_treats_nan_as_the_metric_does_and_refuses_what_it_refuses():
    cm = torch.rand(3, 3).index_fill_(0, torch.tensor([1]), float("nan"))
    for metric in ("fbeta", "mcc", "accuracy"):  # F-beta and accuracy stay NaN (EASTLoss then raises); MCC is 0
        torch.testing.assert_close(metric_loss(cm, metric), 1 - METRICS[metric](cm), equal_nan=True)
    assert torch.isnan(metric_loss(cm, "fbeta"))
    with pytest.raises(ValueError, match="one beta for average='micro'"):
        metric_loss(torch.rand(3, 3), "fbeta", beta=[1.0, 2.0, 1.0], average="micro")
    with pytest.raises(ValueError, match="every beta > 0"):
        metric_loss(torch.rand(3, 3), "fbeta", beta=[1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="pos_label"):
        metric_loss(torch.rand(3, 3), "fbeta", average="binary", pos_label=3)
    with pytest.raises(ValueError, match="fused loss"):
        metric_loss(torch.rand(3, 3), "precision")


def test_east_loss_uses_the_fused_loss_and_rebuilds_its_constants_when_a_setting_changes():
    from east_hf import EASTLoss

    cm = (torch.rand(3, 3, dtype=torch.float64) * 5 + 0.5).requires_grad_()
    loss_fn = EASTLoss(metric="fbeta", beta=[0.5, 1.0, 2.0], num_classes=3)
    for metric, average, beta in [("fbeta", "macro", [0.5, 1.0, 2.0]), ("fbeta", "weighted", 2.0),
                                  ("fbeta", "micro", 2.0), ("mcc", "macro", 1.0), ("accuracy", "macro", 1.0),
                                  ("precision", "macro", 1.0)]:  # fmt: skip
        loss_fn.metric, loss_fn.average, loss_fn.beta = metric, average, beta
        got = loss_fn.loss_from_confusion(cm)
        ref = 1 - loss_fn.metric_value(cm)
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(torch.autograd.grad(got, cm)[0], torch.autograd.grad(ref, cm)[0])
    assert loss_fn.loss_from_confusion(torch.tensor([[3, 1, 0], [0, 2, 1], [1, 0, 4]])).dtype == torch.float32
