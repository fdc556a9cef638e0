"""The loss's fused path (softmax, memberships and confusion statistics in one Function) against the plain
composition: the (C, C) matrix, and its (3, C) counts against ``confusion_counts`` of the plain matrix."""

import pytest
import torch

import east_hf
from east_hf.core import fused
from east_hf.core.fused import soft_confusion_from_logits, soft_counts_from_logits
from east_hf.core.metrics import confusion_counts
from east_hf.core.surrogate import confusion_from_memberships, counts_from_memberships

OUTPUTS = {  # the fused statistics, and their plain reference from the (C, C) matrix
    "matrix": (soft_confusion_from_logits, lambda cm: cm, lambda c: (c, c)),
    "counts": (soft_counts_from_logits, confusion_counts, lambda c: (3, c)),
}


def plain(logits, labels, weight, T, threshold_grad):
    """softmax -> linear_heaviside(p, dynamic_threshold(p)) -> L1 normalisation -> confusion matrix, all autograd."""
    p = logits.softmax(1)
    tau = east_hf.dynamic_threshold(p)
    H = east_hf.linear_heaviside(p, tau if threshold_grad else tau.detach(), T)
    return confusion_from_memberships(H / H.sum(1, keepdim=True), labels, weight)


@pytest.fixture(params=["dense", "sparse"])
def path(request, monkeypatch):
    """Run a test on each path: the sparse one is forced (small blocks, any size, any number of candidates)."""
    if request.param == "sparse":
        monkeypatch.setattr(fused, "_SPARSE_MIN_NUMEL", 0)
        monkeypatch.setattr(fused, "_SPARSE_MIN_CLASSES", 2)
        monkeypatch.setattr(fused, "_SPARSE_MAX_FRACTION", 1.0)
        monkeypatch.setattr(fused, "_BLOCK", 4)
    return request.param


def took(logits, labels, counts=False):
    """The path the fused Function chose for these inputs."""
    cm = fused._SoftConfusion.apply(logits.detach().requires_grad_(), labels, None, 0.2, True, counts)
    return "sparse" if cm.grad_fn.sparse else "dense"


CASES = {
    "random": lambda n, c: torch.randn(n, c) * 3.0,
    "near_uniform": lambda n, c: torch.randn(n, c) * 0.01,  # every entry in the middle piece
    "saturated": lambda n, c: torch.randn(n, c) * 40.0,  # probabilities at 1 and at (or near) 0
    "top_two_tied": lambda n, c: torch.randn(n, c).index_fill_(1, torch.tensor([3, 5]), 4.0),
    "all_tied": lambda n, c: torch.zeros(n, c),
}


@pytest.mark.parametrize("output", sorted(OUTPUTS))
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("threshold_grad", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n, c", [(9, 18), (1, 16), (6, 21)])  # 21: a last block shorter than the others
def test_fused_equals_autograd_of_plain_composition(path, output, case, threshold_grad, weighted, n, c):
    fn, of_matrix, shape = OUTPUTS[output]
    logits = CASES[case](n, c).double().requires_grad_()
    labels = torch.randint(0, c, (n,))
    weight = None
    if weighted:  # a zero weight, and a negative one where there is room
        weight = torch.rand(n, dtype=torch.float64).index_fill_(0, torch.tensor([0]), 0.0)
        weight[1:2] = -0.5
    readout = torch.randn(*shape(c), dtype=torch.float64)
    assert took(logits, labels, output == "counts") == path
    fused = fn(logits, labels, weight, 0.2, threshold_grad)
    (grad_fused,) = torch.autograd.grad((fused * readout).sum(), logits)
    ref = of_matrix(plain(logits, labels, weight, 0.2, threshold_grad))
    (grad_ref,) = torch.autograd.grad((ref * readout).sum(), logits)
    torch.testing.assert_close(fused, ref, atol=1e-12, rtol=1e-10)
    if case in ("top_two_tied", "all_tied") and threshold_grad:
        # at a tie tau's subgradient is a choice (which two entries topk returns); only finiteness is defined
        assert bool(torch.isfinite(grad_fused).all())
    else:
        torch.testing.assert_close(grad_fused, grad_ref, atol=1e-12, rtol=1e-9)


@pytest.mark.parametrize("output", sorted(OUTPUTS))
@pytest.mark.parametrize("case", ["random", "near_uniform", "saturated"])
@pytest.mark.parametrize("T", [0.2, 0.05, 0.35])
def test_gradcheck_fused(path, output, case, T):
    torch.manual_seed(1)
    fused_fn, _, shape = OUTPUTS[output]
    logits = (CASES[case](4, 18) / (10.0 if case == "saturated" else 1.0)).double().requires_grad_()
    labels = torch.tensor([0, 3, 3, 17])
    weight = torch.tensor([1.0, 0.5, 2.0, 0.0], dtype=torch.float64)
    readout = torch.randn(*shape(18), dtype=torch.float64)
    fn = lambda z: (fused_fn(z, labels, weight, T) * readout).sum()  # noqa: E731
    assert torch.autograd.gradcheck(fn, (logits,))


@pytest.mark.parametrize("output", sorted(OUTPUTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_float32_matches_float64_and_is_finite(path, output, case):
    fn, of_matrix, shape = OUTPUTS[output]
    logits = CASES[case](32, 20)
    labels = torch.randint(0, 20, (32,))
    ref = of_matrix(plain(logits.double(), labels, None, 0.2, True))
    z = logits.clone().requires_grad_()
    cm = fn(z, labels, None, 0.2)
    assert cm.dtype == torch.float32
    torch.testing.assert_close(cm.double(), ref, atol=2e-5, rtol=1e-4)
    (cm * torch.randn(*shape(20))).sum().backward()
    assert bool(torch.isfinite(z.grad).all())


def test_default_thresholds_choose_each_path():
    # a large batch with a spread of logits takes the sparse path; near-uniform rows fall back to the dense one
    labels = torch.randint(0, 1000, (256,))
    assert took(torch.randn(256, 1000) * 3.0, labels) == "sparse"
    assert took(torch.randn(256, 1000) * 0.01, labels) == "dense"
    assert took(torch.randn(64, 10), labels[:64] % 10) == "dense"


def test_counts_of_the_memberships_and_of_an_empty_batch_equal_those_of_the_matrix():
    # the support is the weight of each class's samples, the row sums of memberships that sum to one
    z = torch.rand(7, 5, dtype=torch.float64).requires_grad_()
    g = z.softmax(1)
    labels, weight = torch.tensor([0, 4, 4, 1, 0, 2, 4]), torch.rand(7, dtype=torch.float64)
    readout = torch.randn(3, 5, dtype=torch.float64)
    got = counts_from_memberships(g, labels, weight)
    ref = confusion_counts(confusion_from_memberships(g, labels, weight))
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-14)
    grads = [torch.autograd.grad((x * readout).sum(), z, retain_graph=True)[0] for x in (got, ref)]
    torch.testing.assert_close(*grads, rtol=1e-12, atol=1e-14)
    empty = soft_counts_from_logits(torch.zeros(0, 5, requires_grad=True), torch.zeros(0, dtype=torch.long), None, 0.2)
    assert empty.shape == (3, 5) and empty.sum().item() == 0.0


def test_counts_at_many_classes_take_the_sparse_path_and_equal_the_matrix():
    torch.manual_seed(0)
    logits = (torch.randn(300, 1000, dtype=torch.float64) * 3.0).requires_grad_()
    labels = torch.randint(0, 1000, (300,))
    assert took(logits, labels, counts=True) == "sparse"
    readout = torch.randn(3, 1000, dtype=torch.float64)
    counts = soft_counts_from_logits(logits, labels, None, 0.2)
    ref = confusion_counts(soft_confusion_from_logits(logits, labels, None, 0.2))
    torch.testing.assert_close(counts, ref, rtol=1e-10, atol=1e-12)
    grads = [torch.autograd.grad((x * readout).sum(), logits)[0] for x in (counts, ref)]
    torch.testing.assert_close(*grads, rtol=1e-9, atol=1e-12)


def test_loss_path_matches_soft_confusion_matrix_and_keeps_graph_reusable():
    logits = (torch.randn(300, 300) * 3.0).requires_grad_()  # large enough for the sparse path
    labels = torch.randint(0, 300, (300,))
    weight = torch.rand(300)
    cm = soft_confusion_from_logits(logits, labels, weight, 0.1)
    ref = east_hf.soft_confusion_matrix(logits.softmax(1), labels, 0.1, sample_weight=weight)
    torch.testing.assert_close(cm, ref, atol=1e-5, rtol=1e-4)
    readout = torch.randn(300, 300)
    (first,) = torch.autograd.grad((cm * readout).sum(), logits, retain_graph=True)
    (second,) = torch.autograd.grad((cm * readout).sum(), logits)  # saved tensors were not modified in place
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_bf16_autocast_and_empty_batch():
    logits, labels = torch.randn(8, 5), torch.randint(0, 5, (8,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cm = soft_confusion_from_logits(logits.bfloat16(), labels, None, 0.2)
    assert cm.dtype == torch.float32
    empty = torch.zeros(0, 5, requires_grad=True)
    cm = soft_confusion_from_logits(empty, torch.zeros(0, dtype=torch.long), None, 0.2)
    assert cm.shape == (5, 5) and cm.sum().item() == 0.0


def test_second_entry_below_lo_next_to_the_top_one_while_the_rest_underflow(path):
    # float32 softmax gives exact zeros at logits 200 below the top; the second entry (p ~ 0.02, far below lo) shares
    # the top entry's block (columns k + 4 i with blocks of 4 on the sparse path), every other block is all zeros
    logits = torch.full((3, 16), -200.0)
    logits[:, 0], logits[:, 4] = 10.0, 6.0
    logits[2, 4] = 10.0  # and a tie of the top two in the same block
    labels = torch.tensor([0, 4, 9])
    z = logits.clone().requires_grad_()
    cm = soft_confusion_from_logits(z, labels, None, 0.2)
    ref = plain(logits.double(), labels, None, 0.2, True)
    torch.testing.assert_close(cm.double(), ref, atol=1e-6, rtol=1e-5)
    readout = torch.randn(16, 16)
    (cm * readout).sum().backward()
    zr = logits.double().requires_grad_()
    (plain(zr, labels, None, 0.2, True) * readout.double()).sum().backward()
    torch.testing.assert_close(z.grad[:2].double(), zr.grad[:2], atol=1e-6, rtol=1e-5)  # row 2: a tie, a choice
