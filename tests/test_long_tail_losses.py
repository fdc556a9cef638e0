"""Focal loss and LDAM-DRW, the long-tail baselines: values against independent references (the papers' formulas and
the authors' code, torchvision's sigmoid focal loss), gradients, and LDAM's deferred re-weighting in EASTTrainer."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PlainClassifier, blobs, east_args
from torchvision.ops import sigmoid_focal_loss

from east_hf.core.long_tail_losses import effective_number_weights, ldam_margins
from east_hf.core.loss_registry import FocalLoss, LDAMLoss, build_loss
from east_hf.hf.training.trainer import EASTTrainer
from east_hf.scripts.compare_plan import parse_variants


def _batch(n=64, c=5, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, generator=g, dtype=dtype) * 2, torch.randint(0, c, (n,), generator=g)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0, 5.0])
def test_focal_loss_is_the_papers_formula(gamma):
    logits, labels = _batch()
    p_t = logits.softmax(1)[torch.arange(len(labels)), labels].double()
    expected = (-((1 - p_t) ** gamma) * p_t.log()).mean()
    assert FocalLoss(gamma=gamma)(logits, labels).item() == pytest.approx(expected.item(), rel=1e-5)
    alpha = torch.tensor([0.1, 0.2, 0.3, 0.2, 0.2])
    weighted = (alpha[labels].double() * -((1 - p_t) ** gamma) * p_t.log()).sum() / alpha[labels].double().sum()
    assert FocalLoss(gamma=gamma, class_weight=alpha)(logits, labels).item() == pytest.approx(
        weighted.item(), rel=1e-5
    )


def test_focal_loss_of_the_whole_set_is_the_sum_of_its_batches_statistics():
    logits, labels = _batch(n=90)
    loss = FocalLoss()
    stats = sum(loss.statistics(logits[i : i + 30], labels[i : i + 30]) for i in range(0, 90, 30))
    assert loss.loss_from_statistics(stats).item() == pytest.approx(loss(logits, labels).item(), rel=1e-6)


def test_ldam_margins_and_weights_are_those_of_the_authors_code():
    counts = np.array([5000, 1200, 300, 40, 7])
    margins = 1.0 / np.sqrt(np.sqrt(counts))
    margins = margins * (0.5 / margins.max())  # Cao et al.'s LDAMLoss.__init__, max_m = 0.5
    assert ldam_margins(counts.tolist()).numpy() == pytest.approx(margins, rel=1e-6)
    beta = 0.9999
    weights = (1.0 - beta) / (1.0 - np.power(beta, counts))  # their DRW branch of train.py
    weights = weights / weights.sum() * len(counts)
    assert effective_number_weights(counts.tolist()).numpy() == pytest.approx(weights, rel=1e-5)


def test_ldam_is_cross_entropy_with_the_true_class_margin_subtracted():
    logits, labels = _batch()
    counts = [500, 200, 50, 10, 3]
    margins, weights = ldam_margins(counts), effective_number_weights(counts)
    shifted = logits.clone()
    shifted[torch.arange(len(labels)), labels] -= margins[labels]
    expected = F.cross_entropy(shifted, labels, weight=weights)  # weighted mean, as torch defines it
    assert build_loss("ldam", class_counts=counts)(logits, labels).item() == pytest.approx(expected.item(), rel=1e-5)
    plain = LDAMLoss(margins, scale=3.0)
    assert plain(logits, labels).item() == pytest.approx(F.cross_entropy(3.0 * shifted, labels).item(), rel=1e-5)


@pytest.mark.parametrize("loss", [FocalLoss(gamma=2.0), LDAMLoss([0.5, 0.3, 0.2, 0.1, 0.4], scale=2.0)])
def test_gradients_match_finite_differences(loss):
    logits, labels = _batch(n=12, dtype=torch.float64)
    logits.requires_grad_(True)

    def f(z):
        return loss.loss_from_statistics(loss.statistics(z.float(), labels)).double()

    # the losses compute in float32: compare the analytic gradient to float64 central differences at a loose tolerance
    (grad,) = torch.autograd.grad(f(logits), logits)
    eps, numeric = 1e-3, torch.zeros_like(logits)
    for i in range(logits.shape[0]):
        for j in range(logits.shape[1]):
            d = torch.zeros_like(logits)
            d[i, j] = eps
            numeric[i, j] = (f(logits + d) - f(logits - d)) / (2 * eps)
    assert torch.allclose(grad, numeric, atol=2e-3)


def test_multi_label_focal_is_torchvisions_sigmoid_focal_loss_and_ldam_is_refused():
    g = torch.Generator().manual_seed(1)
    logits, labels = torch.randn(40, 4, generator=g) * 3, (torch.rand(40, 4, generator=g) < 0.3).float()
    focal = build_loss("focal", multi_label=True)
    expected = sigmoid_focal_loss(logits, labels, alpha=-1, gamma=2.0, reduction="mean")
    assert focal(logits, labels).item() == pytest.approx(expected.item(), rel=1e-4)
    with pytest.raises(ValueError, match="multiclass only"):
        build_loss("ldam", multi_label=True, label_priors=[0.3] * 4)


def test_ldam_defers_its_re_weighting_to_a_second_stage(tmp_path):
    args = east_args(
        tmp_path, east_loss="ldam", east_annealing=True, eval_strategy="steps", eval_steps=2, save_strategy="no",
        max_steps=60, east_patience=2, learning_rate=3e-2,
    )  # fmt: skip
    trainer = EASTTrainer(PlainClassifier(), args, train_dataset=blobs(96, 0), eval_dataset=blobs(48, 1))
    assert isinstance(trainer.east_loss, LDAMLoss) and trainer.east_loss.class_weight is not None
    assert isinstance(trainer.warm_start_loss, LDAMLoss) and trainer.warm_start_loss.class_weight is None
    assert torch.equal(trainer.warm_start_loss.margins, trainer.east_loss.margins)
    trainer.train()
    stages = [log["east_stage"] for log in trainer.state.log_history if "eval_loss" in log]
    assert stages[0] == -1 and 0 in stages  # the plain LDAM first, then the re-weighted one
    assert "east_temperature" not in trainer.state.log_history[-1]  # a baseline: no temperature


def test_focal_trains_and_east_compare_runs_every_baseline_with_all(tmp_path):
    args = east_args(tmp_path, east_loss="focal", max_steps=30, learning_rate=3e-2)
    trainer = EASTTrainer(PlainClassifier(), args, train_dataset=blobs(96, 0), eval_dataset=blobs(48, 1))
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    assert trainer.evaluate()["eval_loss"] < before
    assert list(parse_variants("all", None)) == ["east", "ce", "wce", "la", "dice", "focal", "ldam"]
    assert list(parse_variants("all", None, multi_label=True)) == ["east", "ce", "wce", "la", "asl", "focal"]


def test_ldam_refuses_priors_given_as_fractions_and_a_run_without_annealing(tmp_path):
    with pytest.raises(ValueError, match="Expected class counts .* for LDAM, got fractions"):
        build_loss("ldam", class_counts=[0.9, 0.1])
    with pytest.raises(ValueError, match="east_annealing=True for east_loss='ldam'"):
        east_args(tmp_path, east_loss="ldam", east_annealing=False)
