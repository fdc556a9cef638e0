"""The functional core against an independent float64 transcription of the paper, scikit-learn and gradcheck."""

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, fbeta_score, matthews_corrcoef, precision_recall_fscore_support

import east_hf


# ---- an independent float64 transcription of the paper (Eq. linear-param, Eq. k_approx, Sec. 4.2), numpy only ----
def ref_heaviside(p, tau, T):
    tau_m = 5 * T * min(tau, 1 - tau)
    m1 = T / (tau - tau_m / 2)
    m2 = (1 - 2 * T) / tau_m
    m3 = T / (1 - tau - tau_m / 2)
    if p < tau - tau_m / 2:
        return p * m1
    if p > tau + tau_m / 2:
        return p * m3 + (1 - T - m3 * (tau + tau_m / 2))
    return p * m2 + (0.5 - m2 * tau)


def ref_g(p, T):
    tau = np.sort(p)[-2:].mean()
    h = np.array([ref_heaviside(x, tau, T) for x in p])
    return h / np.abs(h).sum()


def ref_confusion(P, y, T):
    C = P.shape[1]
    cm = np.zeros((C, C))
    for p, label in zip(P, y):
        cm[label] += ref_g(p, T)
    return cm


def ref_fbeta_per_class(cm, betas):
    out = []
    for k in range(cm.shape[0]):
        tp, fn, fp = cm[k, k], cm[k].sum() - cm[k, k], cm[:, k].sum() - cm[k, k]
        b2 = betas[k] ** 2
        out.append((1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp))
    return np.array(out)


def random_probs(n, c, scale=3.0, dtype=torch.float64):
    return (torch.randn(n, c, dtype=dtype) * scale).softmax(1)


@pytest.mark.parametrize("T", [0.2, 0.1, 0.05, 0.01, 0.3])
@pytest.mark.parametrize("C", [2, 3, 10])
def test_soft_confusion_matches_float64_transcription(T, C):
    P = random_probs(40, C)
    y = torch.randint(0, C, (40,))
    ours = east_hf.soft_confusion_matrix(P, y, T).numpy()
    np.testing.assert_allclose(ours, ref_confusion(P.numpy(), y.numpy(), T), atol=1e-6, rtol=0)
    # float32 inputs agree with the float64 reference as well
    ours32 = east_hf.soft_confusion_matrix(P.float(), y, T).double().numpy()
    np.testing.assert_allclose(ours32, ref_confusion(P.float().double().numpy(), y.numpy(), T), atol=1e-5)


@pytest.mark.parametrize("T", [0.2, 0.07])
def test_heaviside_and_threshold_match_transcription(T):
    P = random_probs(20, 5)
    tau = east_hf.dynamic_threshold(P)
    np.testing.assert_allclose(tau.squeeze(1).numpy(), np.sort(P.numpy(), 1)[:, -2:].mean(1), atol=1e-12)
    H = east_hf.linear_heaviside(P, tau, T).numpy()
    ref = np.array([[ref_heaviside(x, t, T) for x in row] for row, t in zip(P.numpy(), tau.squeeze(1).numpy())])
    np.testing.assert_allclose(H, ref, atol=1e-12)
    # the fused Function and the plain composition agree
    plain = east_hf.linear_heaviside(P, tau, T)
    np.testing.assert_allclose(
        east_hf.soft_predictions(P, T).numpy(), (plain / plain.sum(1, keepdim=True)).numpy(), atol=1e-12
    )


def test_heaviside_shape_properties():
    tau, T = torch.tensor(0.3, dtype=torch.float64), 0.15
    tau_m = 5 * T * 0.3
    pts = torch.tensor([0.0, 0.3 - tau_m / 2, 0.3, 0.3 + tau_m / 2, 1.0], dtype=torch.float64)
    np.testing.assert_allclose(east_hf.linear_heaviside(pts, tau, T).numpy(), [0, T, 0.5, 1 - T, 1], atol=1e-12)
    grid = torch.linspace(0, 1, 1001, dtype=torch.float64)
    assert bool((east_hf.linear_heaviside(grid, tau, T).diff() >= 0).all())  # non-decreasing, a CDF shape


@pytest.mark.parametrize("C", [2, 4, 7])
def test_gradcheck_soft_predictions(C):
    # through the softmax, so perturbations stay on the simplex (where tau <= 1/2 and min(tau, 1 - tau) = tau)
    logits = (torch.randn(6, C, dtype=torch.float64) * 2).requires_grad_()
    fn = lambda z: east_hf.soft_predictions(z.softmax(1), 0.13)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (logits,))


@pytest.mark.parametrize("threshold_grad", [True, False])
@pytest.mark.parametrize("T", [0.2, 0.05])
def test_hand_backward_equals_autograd_of_plain_composition(T, threshold_grad):
    logits = torch.randn(64, 9, dtype=torch.float64, requires_grad=True)
    w = torch.randn(64, 9, dtype=torch.float64)
    P = logits.softmax(1)
    (east_hf.soft_predictions(P, T, threshold_grad=threshold_grad) * w).sum().backward()
    fused = logits.grad.clone()
    logits.grad = None
    P = logits.softmax(1)
    tau = P.topk(2, 1).values.mean(1, keepdim=True)
    H = east_hf.linear_heaviside(P, tau if threshold_grad else tau.detach(), T)
    ((H / H.sum(1, keepdim=True)) * w).sum().backward()
    torch.testing.assert_close(fused, logits.grad, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("metric", ["fbeta", "accuracy", "mcc", "precision", "recall"])
def test_gradcheck_loss_end_to_end(metric):
    logits = torch.randn(12, 4, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 1, 2, 3] * 3)
    loss_fn = east_hf.EASTLoss(metric=metric, beta=[1.0, 0.5, 2.0, 1.0] if metric == "fbeta" else 1.0, temperature=0.1)
    assert torch.autograd.gradcheck(lambda z: loss_fn(z, y), (logits,))


@pytest.mark.parametrize("seed", range(5))
def test_small_temperature_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    C, N = int(rng.integers(2, 8)), int(rng.integers(5, 80))
    P = random_probs(N, C, scale=4.0)
    y = torch.from_numpy(rng.integers(0, C, N))
    cm = east_hf.soft_confusion_matrix(P, y, 1e-6)
    hard = east_hf.hard_confusion_matrix(P, y)
    np.testing.assert_allclose(cm.numpy(), hard.numpy(), atol=1e-4)
    yt, yp, labels = y.numpy(), P.argmax(1).numpy(), np.arange(C)
    betas = rng.uniform(0.2, 5.0, C)
    p, r, _, _ = precision_recall_fscore_support(yt, yp, labels=labels, zero_division=0)
    b2 = betas**2
    per_class = np.where((b2 * p + r) > 0, (1 + b2) * p * r / np.where((b2 * p + r) > 0, b2 * p + r, 1), 0)
    assert east_hf.fbeta(cm, betas.tolist()).item() == pytest.approx(per_class.mean(), abs=1e-4)
    for average in ["macro", "weighted", "micro"]:
        expected = fbeta_score(yt, yp, beta=1.5, average=average, labels=labels, zero_division=0)
        assert east_hf.fbeta(cm, 1.5, average=average).item() == pytest.approx(expected, abs=1e-4)
    assert east_hf.accuracy(cm).item() == pytest.approx(accuracy_score(yt, yp), abs=1e-5)
    assert east_hf.mcc(cm).item() == pytest.approx(matthews_corrcoef(yt, yp), abs=1e-4)
    assert east_hf.mcc(hard).item() == pytest.approx(matthews_corrcoef(yt, yp), abs=1e-6)


def test_binary_average_matches_sklearn_positive_class():
    y = torch.tensor([0, 0, 1, 1, 1, 0, 1])
    logits = torch.tensor([[2.0, 0], [0, 1], [0, 3], [1, 0], [0, 2], [3, 0], [0, 1]])
    cm = east_hf.hard_confusion_matrix(logits, y)
    yp = logits.argmax(1).numpy()
    assert east_hf.fbeta(cm, 1.0, average="binary", pos_label=1).item() == pytest.approx(
        fbeta_score(y.numpy(), yp, beta=1.0)
    )
    assert east_hf.precision(cm, average="binary", pos_label=0).item() == pytest.approx(
        precision_recall_fscore_support(y.numpy(), yp, pos_label=0, average="binary")[0]
    )


def test_absent_class_and_zero_division_match_sklearn():
    y = np.array([0, 0, 1, 1])
    yp = np.array([0, 1, 1, 1])  # class 2 never appears: its precision, recall and F are 0/0
    cm = east_hf.hard_confusion_matrix(
        torch.nn.functional.one_hot(torch.from_numpy(yp), 3).float(), torch.from_numpy(y)
    )
    expected = fbeta_score(y, yp, beta=1.0, average="macro", labels=[0, 1, 2], zero_division=0)
    assert east_hf.fbeta(cm).item() == pytest.approx(expected)
    assert east_hf.mcc(torch.tensor([[3.0, 0.0], [0.0, 0.0]])).item() == 0.0  # sklearn: single class -> 0
    assert matthews_corrcoef([0, 0, 0], [0, 0, 0]) == 0.0


@pytest.mark.parametrize("metric", ["fbeta", "accuracy", "mcc", "precision", "recall"])
def test_edge_cases_finite(metric):
    loss_fn = east_hf.EASTLoss(metric=metric, temperature=0.2)
    cases = [
        (torch.zeros(4, 3), torch.tensor([0, 1, 2, 0])),  # exact ties between all probabilities
        (torch.tensor([[2.0, 2.0, -1.0]]), torch.tensor([1])),  # tie of the top two, batch of one
        (torch.randn(5, 4), torch.zeros(5, dtype=torch.long)),  # single-class batch, absent classes
        (torch.tensor([[50.0, -50.0, 0.0], [-50.0, 50.0, 0.0]]), torch.tensor([0, 1])),  # saturated softmax
    ]
    for logits, y in cases:
        logits = logits.clone().requires_grad_()
        loss = loss_fn(logits, y)
        loss.backward()
        assert torch.isfinite(loss) and bool(torch.isfinite(logits.grad).all()), (metric, logits)


def test_loss_is_one_minus_metric_and_callable_metric():
    logits, y = torch.randn(30, 4), torch.randint(0, 4, (30,))
    cm = east_hf.soft_confusion_matrix(logits.softmax(1), y, 0.1)
    assert east_hf.EASTLoss("mcc", temperature=0.1)(logits, y).item() == pytest.approx(
        1 - east_hf.mcc(cm).item(), abs=1e-6
    )
    custom = east_hf.EASTLoss(lambda c: c.diagonal().sum() / c.sum(), temperature=0.1)
    assert custom(logits, y).item() == pytest.approx(1 - east_hf.accuracy(cm).item(), abs=1e-6)


def test_ignore_index_and_sample_weight():
    P, y = random_probs(10, 3), torch.randint(0, 3, (10,))
    y_ignored = y.clone()
    y_ignored[:4] = -100
    torch.testing.assert_close(
        east_hf.soft_confusion_matrix(P, y_ignored, 0.2), east_hf.soft_confusion_matrix(P[4:], y[4:], 0.2)
    )
    w = torch.rand(10, dtype=torch.float64)
    weighted = east_hf.soft_confusion_matrix(P, y, 0.2, sample_weight=w)
    assert weighted.sum().item() == pytest.approx(w.sum().item())


def test_threshold_grad_switch_changes_gradient():
    logits = torch.randn(16, 5, requires_grad=True)
    y = torch.randint(0, 5, (16,))
    grads = []
    for flag in (True, False):
        logits.grad = None
        east_hf.EASTLoss(threshold_grad=flag)(logits, y).backward()
        grads.append(logits.grad.clone())
    assert not torch.allclose(grads[0], grads[1])


def test_autocast_bf16_computes_in_float32():
    logits, y = torch.randn(32, 6), torch.randint(0, 6, (32,))
    ref = east_hf.EASTLoss()(logits, y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cm = east_hf.EASTLoss().confusion_matrix(logits.bfloat16(), y)
    assert cm.dtype == torch.float32
    assert (1 - east_hf.fbeta(cm)).item() == pytest.approx(
        ref.item(), abs=2e-2
    )  # only the bf16 rounding of the logits


@pytest.mark.parametrize(
    "kwargs, call, match",
    [
        ({"temperature": 0.4}, None, r"temperature in \(0, 0.4\), got 0.4"),
        ({"temperature": 0.0}, None, r"temperature in \(0, 0.4\), got 0.0"),
        ({"temperature": -1}, None, r"temperature in \(0, 0.4\)"),
        ({"metric": "f2"}, None, "Expected metric in"),
        ({"average": "samples"}, None, "Expected average in"),
        ({"beta": 0.0}, None, "beta > 0"),
        ({"beta": [1.0, -2.0]}, None, "beta > 0"),
        ({"beta": [1.0, 2.0], "num_classes": 3}, None, "3 per-class values, got 2"),
        ({"num_classes": 3}, (torch.randn(4, 5), torch.tensor([0, 1, 2, 0])), r"3 classes.*got shape \(4, 5\)"),
        ({}, (torch.randn(4, 3), torch.tensor([0, 1, 3, 0])), r"labels in \[0, 2\].*got 3"),
        ({}, (torch.randn(4, 3), torch.tensor([0, 1, -1, 0])), r"labels in \[0, 2\].*got -1"),
        ({}, (torch.randn(4, 3), torch.tensor([0, 1, 2])), r"labels of shape \(4,\)"),
        ({}, (torch.randn(4, 1), torch.tensor([0, 0, 0, 0])), "at least 2 classes"),
        ({}, (torch.randn(4), torch.tensor([0, 0, 0, 0])), r"shape \(N, C\)"),
        ({}, (torch.tensor([[0.0, float("nan")], [1.0, 0.0]]), torch.tensor([0, 1])), "finite logits"),
        ({}, (torch.tensor([[0.0, float("inf")], [1.0, 0.0]]), torch.tensor([0, 1])), "finite logits"),
        ({"beta": [1.0, 2.0, 3.0]}, (torch.randn(4, 2), torch.tensor([0, 1, 0, 1])), "2 per-class values, got 3"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(kwargs, call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        loss_fn = east_hf.EASTLoss(**kwargs)
        loss_fn(*call)


def test_bad_input_functional():
    with pytest.raises(TypeError, match="integer class labels"):
        east_hf.soft_confusion_matrix(random_probs(3, 2), torch.tensor([0.0, 1.0, 0.0]), 0.2)
    with pytest.raises(ValueError, match="finite probs"):
        east_hf.soft_confusion_matrix(torch.tensor([[0.5, float("nan")]]), torch.tensor([0]), 0.2)
    with pytest.raises(ValueError, match="pos_label"):
        east_hf.fbeta(torch.eye(3), average="binary", pos_label=3)
    with pytest.raises(ValueError, match="square"):
        east_hf.mcc(torch.ones(2, 3))
    with pytest.raises(ValueError, match="one beta for average='micro'"):
        east_hf.fbeta(torch.eye(2), [1.0, 2.0], average="micro")
    with pytest.raises(TypeError, match="temperature as a float"):
        east_hf.soft_predictions(random_probs(2, 2), "0.2")


def test_loss_learns_on_a_linear_problem():
    torch.manual_seed(0)
    X = torch.randn(256, 5)
    y = (X[:, 0] > 0.8).long() + (X[:, 1] > 1.0).long()  # 3 imbalanced classes
    model = torch.nn.Linear(5, 3)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    loss_fn = east_hf.EASTLoss("fbeta", temperature=0.2)
    before = east_hf.fbeta(east_hf.hard_confusion_matrix(model(X), y)).item()
    for _ in range(150):
        opt.zero_grad()
        loss_fn(model(X), y).backward()
        opt.step()
    after = east_hf.fbeta(east_hf.hard_confusion_matrix(model(X), y)).item()
    assert after > before + 0.2 and after > 0.7, (before, after)


def test_the_core_imports_without_transformers_or_timm():
    """east_hf.core, east_hf.core.loss_registry and east_hf.core.annealing are pure torch:
    a fresh interpreter loads neither."""
    import subprocess
    import sys

    code = (
        "import sys, east_hf.core, east_hf.core.loss_registry, east_hf.core.annealing; "
        "assert 'transformers' not in sys.modules and 'timm' not in sys.modules, "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('transformers', 'timm'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_class_resolver_for_names_safe_names_and_indices():
    from east_hf.core import class_index, resolve_beta

    names = ["airplane", "Traffic Light", "dog"]
    assert [class_index(c, names, 3) for c in ("dog", "traffic_light", "Traffic Light", 0, "1")] == [2, 1, 1, 0, 1]
    assert resolve_beta({"dog": 0.25, "0": 2}, {0: "airplane", 1: "Traffic Light", 2: "dog"}, 3) == [2.0, 1.0, 0.25]
    with pytest.raises(ValueError, match=r"Expected east_beta keys among the class names .* got 'cat'"):
        resolve_beta({"cat": 2}, names, 3)
    with pytest.raises(ValueError, match="got 3"):
        class_index(3, names, 3)


@pytest.mark.parametrize("name", ["east", "ce", "dice"])
def test_set_losses_sum_statistics_over_batches_to_the_loss_of_the_whole_set(name):
    """Every loss the trainer takes is additive statistics + a loss of them: batches summed = the whole set."""
    from east_hf.core.loss_registry import build_loss

    g = torch.Generator().manual_seed(0)
    logits, labels = torch.randn(40, 4, generator=g), torch.randint(0, 4, (40,), generator=g)
    labels[3] = -100
    loss = build_loss(name)
    batches = sum(loss.statistics(logits[i : i + 16], labels[i : i + 16]) for i in range(0, 40, 16))
    assert loss.loss_from_statistics(batches).item() == pytest.approx(loss(logits, labels).item(), rel=1e-5)


def test_baseline_set_losses_equal_hand_computed_values():
    from east_hf.core import soft_dice_loss
    from east_hf.core.loss_registry import CrossEntropySetLoss, SoftDiceLoss

    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0], [-1.0, 1.0, 3.0], [0.0, 0.0, 0.0]])
    labels = torch.tensor([0, 1, 2, -100])
    p = logits[:3].softmax(1)
    expected_ce = -(p[0, 0].log() + p[1, 1].log() + p[2, 2].log()) / 3
    assert CrossEntropySetLoss()(logits, labels).item() == pytest.approx(expected_ce.item(), rel=1e-6)
    weight = torch.tensor([1.0, 3.0, 0.0, 5.0])
    weighted = (-(p[0, 0].log() * 1 + p[1, 1].log() * 3)) / 4
    assert CrossEntropySetLoss()(logits, labels, weight).item() == pytest.approx(weighted.item(), rel=1e-6)
    dice = [2 * p[k, k] / ((p[:, k] ** 2).sum() + 1 + 1e-6) for k in range(3)]  # one sample per class
    assert SoftDiceLoss()(logits, labels).item() == pytest.approx(1 - sum(dice).item() / 3, rel=1e-6)
    assert SoftDiceLoss()(logits, labels).item() == pytest.approx(soft_dice_loss(logits, labels).item(), rel=1e-6)
    with pytest.raises(ValueError, match=r"Expected labels in \[0, 2\]"):
        CrossEntropySetLoss()(logits, torch.tensor([0, 1, 3, 0]))


def test_east_loss_resolves_beta_by_class_name():
    loss = east_hf.EASTLoss(beta={"dog": 0.25}, num_classes=3, class_names=["cat", "dog", "frog"])
    assert loss.beta == [1.0, 0.25, 1.0]
    with pytest.raises(ValueError, match="num_classes"):
        east_hf.EASTLoss(beta={"dog": 0.25})


def test_wce_and_la_equal_hand_computed_cross_entropies():
    from east_hf.core.loss_registry import build_loss

    counts = [6, 3, 1]  # N = 10 training samples
    logits = torch.tensor([[1.0, 0.0, -1.0], [0.0, 2.0, 0.5], [0.3, 0.1, 0.2], [-1.0, 0.0, 1.0]])
    labels = torch.tensor([0, 1, 2, 2])
    w = [10 / (3 * 6), 10 / (3 * 3), 10 / (3 * 1)]  # N / (C n_k): mean weight of a training sample is 1
    assert sum(n * wk for n, wk in zip(counts, w)) / 10 == pytest.approx(1.0)
    logp = logits.log_softmax(1)
    nll = [-logp[i, y].item() for i, y in enumerate(labels.tolist())]
    weights = [w[y] for y in labels.tolist()]
    expected_wce = sum(a * b for a, b in zip(weights, nll)) / sum(weights)
    assert build_loss("wce", class_counts=counts)(logits, labels).item() == pytest.approx(expected_wce, rel=1e-6)
    adjusted = (logits + torch.tensor([0.6, 0.3, 0.1]).log()).log_softmax(1)  # logits + tau log(prior), tau = 1
    expected_la = -sum(adjusted[i, y].item() for i, y in enumerate(labels.tolist())) / 4
    assert build_loss("la", class_counts=counts)(logits, labels).item() == pytest.approx(expected_la, rel=1e-6)
    with pytest.raises(ValueError, match="class_counts"):
        build_loss("la")
    with pytest.raises(ValueError, match="3 classes, got 2"):
        build_loss("wce", class_counts=[1, 1])(logits, labels)
