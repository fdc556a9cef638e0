"""The multi-label losses (east_hf.core.multilabel_losses, the loss registry) against scikit-learn and the papers'
formulas written out here: MultiLabelEASTLoss, binary cross-entropy with logit adjustment, the asymmetric loss,
MixedSetLoss and the registry, and a linear model that learns a separable set without reading from the device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import f1_score, fbeta_score, jaccard_score, matthews_corrcoef, precision_score, recall_score

from east_hf.core.loss_registry import MULTILABEL_LOSSES, MixedSetLoss, build_loss
from east_hf.core.multilabel_losses import AsymmetricLoss, BinaryCrossEntropySetLoss, MultiLabelEASTLoss

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning"),
    pytest.mark.filterwarnings("ignore:A single label was found:UserWarning"),
]


# ---- MultiLabelEASTLoss ----
def far_logits(seed: int, n: int = 80, num_labels: int = 5):
    """Logits at least 2 from 0 (the Heaviside kink), labels and the hard predictions (logits > 0)."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, num_labels, generator=g) < 0.35).double()
    y[:, 0] = (torch.rand(n, generator=g) < 0.05).double()  # rare
    agree = torch.rand(n, num_labels, generator=g) < 0.75
    sign = torch.where(agree, 2 * y - 1, 1 - 2 * y)
    logits = sign * (2.0 + 3.0 * torch.rand(n, num_labels, generator=g, dtype=torch.float64))
    return logits, y, (logits > 0).long()


SMALL_T_SCORES = {
    ("fbeta", "macro"): lambda y, p: fbeta_score(y, p, beta=2.0, average="macro", zero_division=0.0),
    ("fbeta", "micro"): lambda y, p: fbeta_score(y, p, beta=2.0, average="micro", zero_division=0.0),
    ("fbeta", "samples"): lambda y, p: fbeta_score(y, p, beta=2.0, average="samples", zero_division=0.0),
    ("fbeta", "weighted"): lambda y, p: fbeta_score(y, p, beta=2.0, average="weighted", zero_division=0.0),
    ("jaccard", "macro"): lambda y, p: jaccard_score(y, p, average="macro", zero_division=0.0),
    ("jaccard", "samples"): lambda y, p: jaccard_score(y, p, average="samples", zero_division=0.0),
    ("precision", "micro"): lambda y, p: precision_score(y, p, average="micro", zero_division=0.0),
    ("recall", "macro"): lambda y, p: recall_score(y, p, average="macro", zero_division=0.0),
    ("mcc", "macro"): lambda y, p: np.mean([matthews_corrcoef(y[:, k], p[:, k]) for k in range(y.shape[1])]),
}


@pytest.mark.parametrize("metric, average", list(SMALL_T_SCORES))
def test_loss_at_a_small_temperature_is_one_minus_scikit_learn(metric, average):
    logits, y, hard = far_logits(0)
    loss_fn = MultiLabelEASTLoss(metric, beta=2.0, average=average, temperature=1e-4)
    expected = 1.0 - SMALL_T_SCORES[metric, average](y.long().numpy(), hard.numpy())
    assert loss_fn(logits, y).item() == pytest.approx(expected, abs=1e-3)
    assert loss_fn(logits.float(), y.float()).dtype == torch.float32


@pytest.mark.parametrize(
    "metric, average", [("fbeta", "macro"), ("fbeta", "micro"), ("fbeta", "samples"), ("mcc", "macro"),
                        ("mcc", "micro"), ("jaccard", "macro"), ("jaccard", "samples"), ("fbeta", "weighted")]
)  # fmt: skip
def test_loss_gradcheck_in_float64(metric, average):
    """The gradient of the loss w.r.t. the logits is autograd's exact derivative (away from H's kinks)."""
    g = torch.Generator().manual_seed(1)
    y = (torch.rand(12, 3, generator=g) < 0.4).double()
    y[0, 1] = -100
    # probabilities well inside the pieces of H_T at T = 0.1 (kinks at 0.5 +- 0.125)
    probs = torch.where(torch.rand(12, 3, generator=g) < 0.5, 0.1, 0.85) + 0.05 * torch.rand(12, 3, generator=g)
    logits = torch.logit(probs.double()).requires_grad_()
    weight = torch.rand(12, generator=g, dtype=torch.float64) + 0.5
    loss_fn = MultiLabelEASTLoss(metric, beta=[0.5, 1.0, 2.0] if average == "macro" else 1.5, average=average,
                                 temperature=0.1)  # fmt: skip
    assert torch.autograd.gradcheck(lambda z: loss_fn(z, y, weight), (logits,))


def test_loss_records_bad_labels_without_reading_the_device():
    loss_fn = MultiLabelEASTLoss(temperature=0.2)
    logits = torch.randn(4, 3)
    good = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 1.0, -100.0]])
    bad = good.clone()
    bad[1, 2], bad[2, 0] = 0.5, 2.0
    loss_fn.statistics(logits, good, validate_args=False)
    loss_fn.raise_if_label_fault()  # nothing recorded
    stats = loss_fn.statistics(logits, bad, validate_args=False)
    masked = good.clone()
    masked[1, 2] = masked[2, 0] = -100
    torch.testing.assert_close(stats, loss_fn.statistics(logits, masked))  # the bad entries count for nothing
    with pytest.raises(ValueError, match=r"Expected multi-label labels of 0, 1 .*got 2 other entries") as error:
        loss_fn.raise_if_label_fault()
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"got 0.5"):
        loss_fn.statistics(logits, bad)


def test_an_all_ignored_batch_has_a_zero_loss_and_gradient():
    loss_fn = MultiLabelEASTLoss(temperature=0.2)
    logits = torch.randn(3, 2, requires_grad=True)
    stats = loss_fn.statistics(logits, torch.full((3, 2), -100.0))
    assert bool(loss_fn.is_empty(stats))
    loss = loss_fn.loss_from_statistics(stats)
    loss.backward()
    assert loss.item() == 0.0 and bool((logits.grad == 0).all())


def test_loss_settings_and_stage():
    loss_fn = MultiLabelEASTLoss("jaccard", temperature=0.2, confusion_memory=0.5)
    assert loss_fn.soft_metric_key == "east_soft_jaccard" and loss_fn.name == "east"
    loss_fn.set_stage(0.05, ce_weight=0.3)
    assert loss_fn.temperature == 0.05
    loss_fn.bind_num_classes(3)
    with pytest.raises(ValueError, match=r"Expected logits with 3 labels"):
        loss_fn(torch.randn(2, 4), torch.zeros(2, 4))
    first = loss_fn.with_memory(torch.ones(4, 4))
    torch.testing.assert_close(first, torch.ones(4, 4))
    torch.testing.assert_close(loss_fn.with_memory(torch.ones(4, 4)), torch.full((4, 4), 1.5))
    floored = MultiLabelEASTLoss(beta=[0.25, 2.0], beta_floor=1.0, temperature=1e-4)
    logits, y, _ = far_logits(2, num_labels=2)
    plain = MultiLabelEASTLoss(beta=[1.0, 2.0], temperature=1e-4)
    assert floored(logits, y).item() == pytest.approx(plain(logits, y).item())
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the surrogate is computed in float32 under autocast
        stats = plain.statistics(torch.nn.Linear(2, 2)(logits.float()), y.float())
    assert stats.dtype == torch.float32 and stats.shape == (4, 3)


# ---- binary cross-entropy, logit adjustment, asymmetric loss ----
def bce_case(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(30, 4, generator=g, dtype=torch.float64)
    y = (torch.rand(30, 4, generator=g) < 0.3).double()
    y[torch.rand(30, 4, generator=g) < 0.15] = -100
    return logits, y, y != -100


def test_binary_cross_entropy_equals_torch_with_pos_weight_and_masking():
    logits, y, keep = bce_case()
    pos_weight = torch.tensor([4.0, 1.0, 0.5, 9.0], dtype=torch.float64)
    cols = torch.arange(4).expand(30, 4)[keep]
    expected = F.binary_cross_entropy_with_logits(logits[keep], y[keep], pos_weight=None)
    assert BinaryCrossEntropySetLoss()(logits, y).item() == pytest.approx(expected.item(), rel=1e-12)
    weighted = F.binary_cross_entropy_with_logits(logits[keep], y[keep], reduction="none") * torch.where(
        y[keep] > 0, pos_weight[cols], 1.0
    )
    loss_fn = BinaryCrossEntropySetLoss(pos_weight=pos_weight)
    assert loss_fn(logits, y).item() == pytest.approx(weighted.mean().item(), rel=1e-6)
    reference = (
        F.binary_cross_entropy_with_logits(
            logits, torch.where(keep, y, 0.0), pos_weight=pos_weight, weight=keep.double(), reduction="sum"
        )
        / keep.sum()
    )
    assert loss_fn(logits, y).item() == pytest.approx(reference.item(), rel=1e-6)
    # additive: two batches' statistics give the whole set's loss
    stats = loss_fn.statistics(logits[:11], y[:11]) + loss_fn.statistics(logits[11:], y[11:])
    assert loss_fn.loss_from_statistics(stats).item() == pytest.approx(reference.item(), rel=1e-6)
    with pytest.raises(ValueError, match=r"Expected pos_weight of 4 labels, got 2"):
        BinaryCrossEntropySetLoss(pos_weight=[1.0, 2.0])(logits, y)


def test_logit_adjusted_binary_cross_entropy_and_wce_from_label_priors():
    logits, y, keep = bce_case(1)
    priors = torch.tensor([0.05, 0.3, 0.5, 0.9], dtype=torch.float64)
    la = build_loss("la", multi_label=True, label_priors=priors)
    adjusted = logits + torch.log(priors / (1 - priors))  # Menon et al.'s logit adjustment, per binary label
    expected = F.binary_cross_entropy_with_logits(adjusted[keep], y[keep])
    assert la(logits, y).item() == pytest.approx(expected.item(), rel=1e-6)
    assert la.name == "la" and isinstance(la, BinaryCrossEntropySetLoss)
    wce = build_loss("wce", multi_label=True, label_priors=priors)
    torch.testing.assert_close(wce.pos_weight, ((1 - priors) / priors).float())


def official_asymmetric_loss(x, y, gamma_neg=4.0, gamma_pos=0.0, clip=0.05, eps=1e-8):
    """Ridnik et al.'s ``AsymmetricLoss.forward`` (github.com/Alibaba-MIIL/ASL, losses.py), written out per entry."""
    x_sigmoid = torch.sigmoid(x)
    xs_pos = x_sigmoid
    xs_neg = 1 - x_sigmoid
    if clip is not None and clip > 0:
        xs_neg = (xs_neg + clip).clamp(max=1)
    los_pos = y * torch.log(xs_pos.clamp(min=eps))
    los_neg = (1 - y) * torch.log(xs_neg.clamp(min=eps))
    loss = los_pos + los_neg
    if gamma_neg > 0 or gamma_pos > 0:
        pt0 = xs_pos * y
        pt1 = xs_neg * (1 - y)
        pt = pt0 + pt1
        one_sided_gamma = gamma_pos * y + gamma_neg * (1 - y)
        one_sided_w = torch.pow(1 - pt, one_sided_gamma)
        loss *= one_sided_w
    return -loss


@pytest.mark.parametrize("gammas", [(4.0, 0.0, 0.05), (2.0, 1.0, 0.1), (3.0, 0.5, 0.0)])
def test_asymmetric_loss_equals_the_official_formula(gammas):
    gamma_neg, gamma_pos, clip = gammas
    logits, y, keep = bce_case(2)
    logits = logits.requires_grad_()
    loss_fn = AsymmetricLoss(gamma_neg=gamma_neg, gamma_pos=gamma_pos, clip=clip)
    reference = official_asymmetric_loss(logits[keep], y[keep], gamma_neg, gamma_pos, clip).mean()
    loss = loss_fn(logits, y)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-10)
    (grad,) = torch.autograd.grad(loss, logits)
    (expected,) = torch.autograd.grad(reference, logits)
    torch.testing.assert_close(grad, expected)
    default = build_loss("asl", multi_label=True)
    assert (default.gamma_neg, default.gamma_pos, default.clip) == (4.0, 0.0, 0.05)


# ---- MixedSetLoss and the registry ----
def test_mixed_multilabel_east_plus_bce():
    logits, y, keep = bce_case(3)
    logits = logits.requires_grad_()
    east = MultiLabelEASTLoss("fbeta", temperature=0.15)
    bce = build_loss("wce", multi_label=True, label_priors=[0.2, 0.3, 0.4, 0.5])
    mixed = MixedSetLoss(east, weight=0.25, cross_entropy=bce)
    stats = mixed.statistics(logits[:13], y[:13]) + mixed.statistics(logits[13:], y[13:])
    assert stats.shape == (5, 5)
    reference = east(logits, y) + 0.25 * bce(logits, y)
    assert mixed.loss_from_statistics(stats).item() == pytest.approx(reference.item(), rel=1e-6)
    (grad,) = torch.autograd.grad(mixed(logits, y), logits)
    (expected,) = torch.autograd.grad(reference, logits)
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-8)
    loss, soft = mixed.loss_and_soft_metric(stats)
    assert soft.item() == pytest.approx(1 - east(logits, y).item(), rel=1e-6)
    assert isinstance(MixedSetLoss(east).cross_entropy, BinaryCrossEntropySetLoss)
    with pytest.raises(TypeError, match=r"Expected cross_entropy as a BinaryCrossEntropySetLoss"):
        MixedSetLoss(east, cross_entropy=build_loss("ce"))
    with pytest.raises(TypeError, match=r"Expected cross_entropy as a PerSampleSetLoss"):
        MixedSetLoss(build_loss("east"), cross_entropy=bce)


def test_multilabel_registry():
    assert set(MULTILABEL_LOSSES) == {"east", "ce", "wce", "la", "asl", "focal"}
    east = build_loss("east", multi_label=True, metric="mcc", num_classes=4, temperature=0.1)
    assert isinstance(east, MultiLabelEASTLoss) and east.num_labels == 4 and east.metric == "mcc"
    ce = build_loss("ce", multi_label=True)
    assert isinstance(ce, BinaryCrossEntropySetLoss) and ce.pos_weight is None and ce.name == "ce"
    for call, match in [
        (lambda: build_loss("dice", multi_label=True), r"got 'dice' \(multiclass only\)"),
        (lambda: build_loss("asl"), r"got 'asl' \(the asymmetric loss is multi-label only\)"),
        (lambda: build_loss("wce", multi_label=True), r"Expected the training split's label_priors"),
        (lambda: build_loss("la", multi_label=True, label_priors=[0.5, 1.5]), r"positive rate in \[0, 1\]"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
    assert torch.isfinite(build_loss("la", multi_label=True, label_priors=[0.0, 1.0]).logit_adjustment).all()


# ---- learning ----
def test_a_linear_model_learns_a_separable_multilabel_set():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 6, generator=g)
    true_w, true_b = torch.randn(6, 4, generator=g), torch.tensor([1.0, -1.5, 0.0, -2.5])  # rare labels too
    y = (x @ true_w + true_b > 0).float()
    model = torch.nn.Linear(6, 4)
    loss_fn = MultiLabelEASTLoss("fbeta", average="macro", temperature=0.1)
    before = f1_score(y.long().numpy(), (model(x) > 0).long().numpy(), average="macro", zero_division=0.0)
    weight = model.weight.detach().clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(100):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    after = f1_score(y.long().numpy(), (model(x) > 0).long().numpy(), average="macro", zero_division=0.0)
    assert not torch.equal(weight, model.weight) and after > 0.9 > before
    assert loss.item() < 0.2


@pytest.mark.parametrize("average", ["macro", "micro", "samples"])
def test_a_steady_training_step_reads_nothing_from_the_device(monkeypatch, average):
    """statistics(validate_args=False), the loss and its backward make no host read once the first step has built
    the cached betas (each read would wait for an accelerator)."""
    reads, counting = [], [False]

    def counted(name, original):
        def read(tensor, *args, **kwargs):
            if counting[0]:
                reads.append(name)
            return original(tensor, *args, **kwargs)

        return read

    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
    east = MultiLabelEASTLoss(beta=2.0, average=average, temperature=0.2, confusion_memory=0.5)
    la = build_loss("la", multi_label=True, label_priors=[0.3, 0.2, 0.5])
    logits = torch.randn(8, 3, requires_grad=True)
    labels = (torch.rand(8, 3) < 0.4).float()
    labels[0, 0] = 0.5  # a bad entry: recorded, not raised
    for loss_fn in (MixedSetLoss(east, 0.5, la), AsymmetricLoss()):
        for step in range(2):
            counting[0] = step == 1
            stats = loss_fn.with_memory(loss_fn.statistics(logits, labels, validate_args=False))
            loss, _ = loss_fn.loss_and_soft_metric(stats)
            loss.backward()
            counting[0] = False
        assert reads == [], type(loss_fn).__name__
        with pytest.raises(ValueError, match="got 1 other entries"):
            loss_fn.raise_if_label_fault()
