"""The paper's surrogate as written (Sec. 4.1-4.2 and Appendix B): H_T, tau, g_T and the soft confusion matrix of
probabilities, in pure torch; ``east_hf.core.fused`` is the same from logits in one pass.

Symbols follow the paper:

- ``tau = tau_avg(p)``: the dynamic threshold, mean of the two largest probabilities of a row (Sec. 4.1).
- ``H_T^l(p, tau)``: the linear Heaviside approximation of Eq. (linear-param), three linear pieces with slopes
  ``m1 = T / (tau - tau_m/2)``, ``m2 = (1 - 2T) / tau_m``, ``m3 = T / (1 - tau - tau_m/2)`` and
  ``tau_m = 5T * min(tau, 1 - tau)``.
- ``g_T(p) = H_T^l(p, tau) / ||H_T^l(p, tau)||_1``: the soft-set memberships (Eq. k_approx).
- The soft confusion matrix: a sample of true class ``i`` adds ``g_T(p)_j`` to entry ``(i, j)``.

``soft_predictions`` is a custom ``torch.autograd.Function`` with a hand-derived backward. It needs few passes over
the ``(N, C)`` probabilities because of one identity: since ``sum_j g_j = 1``, the gradient reaching the threshold
only depends on the entries in the middle and upper pieces of ``H``, which are few (see ``_SoftSetMembership``).
The plain composition ``linear_heaviside(p, dynamic_threshold(p), T)`` followed by the L1 normalisation computes the
same values and gradients with autograd; the tests check one against the other and against a float64 transcription.
``EASTLoss`` goes faster still through ``soft_confusion_from_logits`` (``east_hf.core.fused``): softmax,
memberships and confusion matrix in one Function, with the same values and gradients.

Gradient through the threshold: ``g_T(p) = H(p, tau(p))`` depends on ``p`` both directly and through ``tau``; the
paper's formula implies the gradient flows through both (our default). ``threshold_grad=False`` treats ``tau`` as a
constant (a straight-through threshold), which some users may prefer; both are exact derivatives of what they say.
"""

from __future__ import annotations

import torch

from east_hf.core.validation import MAX_TEMPERATURE, check_temperature

__all__ = [
    "MAX_TEMPERATURE",
    "dynamic_threshold",
    "linear_heaviside",
    "soft_predictions",
    "soft_confusion_matrix",
    "hard_confusion_matrix",
    "check_labels",
    "label_error",
    "check_temperature",
    "confusion_from_memberships",
    "confusion_from_predictions",
    "counts_from_memberships",
    "device_rows",
    "NO_LABEL_FAULT",
    "valid_rows",
]


def _check_probs(probs: torch.Tensor, name: str = "probs") -> None:
    if not isinstance(probs, torch.Tensor):
        raise TypeError(f"Expected {name} as a torch.Tensor of shape (N, C), got {type(probs).__name__}")
    if probs.ndim != 2:
        raise ValueError(f"Expected {name} of shape (N, C), got shape {tuple(probs.shape)}")
    if probs.shape[1] < 2:
        raise ValueError(f"Expected at least 2 classes (C >= 2), got {name} of shape {tuple(probs.shape)}")
    if not probs.is_floating_point():
        raise TypeError(f"Expected floating-point {name}, got dtype {probs.dtype}")


def dynamic_threshold(probs: torch.Tensor) -> torch.Tensor:
    """Sec. 4.1: tau_avg(p), the mean of the two largest probabilities of each row.

    probs: (N, C) -> (N, 1). Only the largest entry of a row lies above it, so thresholding at tau recovers argmax.

    >>> dynamic_threshold(torch.tensor([[0.7, 0.2, 0.1], [0.4, 0.4, 0.2]]))
    tensor([[0.4500],
            [0.4000]])
    """
    _check_probs(probs)
    return probs.topk(2, dim=1).values.mean(dim=1, keepdim=True)


def _pieces(tau: torch.Tensor, temperature: float):
    """Per-row constants of Eq. (linear-param): the breakpoints and the three slopes. tau: (N, 1)."""
    s = torch.minimum(tau, 1.0 - tau)
    tau_m = 5.0 * temperature * s
    lo, hi = tau - 0.5 * tau_m, tau + 0.5 * tau_m
    m1 = temperature / lo
    m2 = (1.0 - 2.0 * temperature) / tau_m
    m3 = temperature / (1.0 - hi)
    return s, lo, hi, m1, m2, m3


def linear_heaviside(p: torch.Tensor, tau: torch.Tensor, temperature: float) -> torch.Tensor:
    """Eq. (linear-param), the linear Heaviside approximation H_T^l(p, tau), elementwise.

    p: any shape; tau broadcastable to p (e.g. (N, 1) against (N, C)). Equals T at ``tau - tau_m/2``, 0.5 at
    ``tau`` and ``1 - T`` at ``tau + tau_m/2``; 0 at p = 0 and 1 at p = 1. Differentiable in both p and tau.

    >>> linear_heaviside(torch.tensor([0.0, 0.45, 1.0]), torch.tensor(0.45), 0.2)
    tensor([0.0000, 0.5000, 1.0000])
    """
    temperature = check_temperature(temperature)
    _, lo, hi, m1, m2, m3 = _pieces(tau, temperature)
    lower = p * m1
    upper = p * m3 + (1.0 - temperature - m3 * hi)
    middle = p * m2 + (0.5 - m2 * tau)
    return torch.where(p < lo, lower, torch.where(p > hi, upper, middle))


class _SoftSetMembership(torch.autograd.Function):
    """g_T(p) of Eq. (k_approx) with a hand-derived backward. probs: (N, C) float -> (N, C).

    Backward, per row, with S = sum_j H_j and dg the incoming gradient:
      dH_j   = (dg_j - <dg, g>) / S
      dp_j   = a_j dH_j + 1/2 dtau [j in top-2],   a_j in {m1, m2, m3} by piece
      dtau   = sum_j dH_j dH_j/dtau.
    dH_j/dtau is affine in H_j on each piece: -H k1 (lower), -(H - 1/2) k2 - m2 (middle), (H - 1) k3 (upper), with
    k1 = lo'/lo, k2 = s'/s, k3 = hi'/(1 - hi). Because sum_j dH_j H_j = sum_j (dg_j - <dg, g>) g_j = 0, the lower
    piece's share is minus the rest, so dtau only needs the (few) entries above ``lo``.
    """

    @staticmethod
    def forward(ctx, probs: torch.Tensor, temperature: float, threshold_grad: bool):
        top2 = probs.topk(2, dim=1)
        tau = top2.values.mean(dim=1, keepdim=True)  # (N, 1)
        s, lo, hi, m1, m2, m3 = _pieces(tau, temperature)
        upper = probs > hi  # (N, C) bool
        middle = (probs >= lo) & ~upper
        # H = p*m1 on the lower piece, p*m2 + (0.5 - m2 tau) in the middle, p*m3 + (1 - T - m3 hi) above.
        H = torch.where(
            middle,
            torch.addcmul(0.5 - m2 * tau, probs, m2),
            torch.where(upper, probs * m3 + (1.0 - temperature - m3 * hi), probs * m1),
        )
        S = H.sum(dim=1, keepdim=True)  # (N, 1), >= 1/2 since the top entry is at or above tau
        g = H / S
        ctx.save_for_backward(g, S, middle, upper, top2.indices, tau, s, lo, hi, m1, m2, m3)
        ctx.temperature, ctx.threshold_grad = temperature, threshold_grad
        return g

    @staticmethod
    def backward(ctx, dg: torch.Tensor):
        g, S, middle, upper, top_idx, tau, s, lo, hi, m1, m2, m3 = ctx.saved_tensors
        T = ctx.temperature
        inv_S = 1.0 / S
        v = torch.linalg.vecdot(dg, g, dim=1).unsqueeze(1)  # <dg, g>: (N, 1)
        dH = torch.addcmul(-v * inv_S, dg, inv_S)  # (N, C)
        slope = torch.where(middle, m2, torch.where(upper, m3, m1))
        dp = dH * slope
        if ctx.threshold_grad:
            ds = torch.where(tau <= 0.5, 1.0, -1.0)  # d min(tau, 1 - tau) / d tau (tau <= 1/2 for a probability row)
            k1 = (1.0 - 2.5 * T * ds) / lo
            k2 = ds / s
            k3 = (1.0 + 2.5 * T * ds) / (1.0 - hi)
            H = g * S
            # Contribution of the middle and upper pieces, shifted by the lower piece's -k1 H (whose total is zero).
            coef = torch.where(middle, (k1 - k2) * H + (0.5 * k2 - m2), (k1 + k3) * H - k3)
            coef = torch.where(middle | upper, coef, 0.0)
            dtau = torch.linalg.vecdot(dH, coef, dim=1).unsqueeze(1)  # (N, 1)
            dp.scatter_add_(1, top_idx, (0.5 * dtau).expand(-1, 2))
        return dp, None, None


def soft_predictions(probs: torch.Tensor, temperature: float, *, threshold_grad: bool = True) -> torch.Tensor:
    """Eq. (k_approx): g_T(p) = H_T^l(p, tau_avg(p)) / ||H_T^l(p, tau_avg(p))||_1, rows summing to one.

    probs: (N, C) -> (N, C). Computed in float32 at least, whatever the autocast context; the result has the
    dtype of that computation (float32 for half inputs, float64 for float64 inputs). ``threshold_grad`` chooses
    whether the gradient flows through tau_avg(p) (default, as the paper's H(p, tau(p)) implies).

    >>> g = soft_predictions(torch.tensor([[0.7, 0.2, 0.1]]), 0.2)
    >>> g.sum().item(), g.argmax().item()
    (1.0, 0)
    """
    _check_probs(probs)
    temperature = check_temperature(temperature)
    with torch.autocast(probs.device.type, enabled=False):
        probs = probs if probs.dtype == torch.float64 else probs.float()
        return _SoftSetMembership.apply(probs, temperature, bool(threshold_grad))


def _check_label_tensor(labels: torch.Tensor, n: int) -> None:
    """The checks of labels that read no value: type, dtype and shape."""
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"Expected labels as a torch.Tensor of shape (N,), got {type(labels).__name__}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"Expected integer class labels, got dtype {labels.dtype}")
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"Expected labels of shape ({n},) to match predictions, got shape {tuple(labels.shape)}")


def label_error(label: int, num_classes: int, ignore_index: int | None) -> ValueError:
    """The one-line error of a label out of range, raised at once by ``valid_rows`` or later for ``device_rows``."""
    return ValueError(f"Expected labels in [0, {num_classes - 1}] (or ignore_index={ignore_index}), got {label}")


def _checked_labels(labels: torch.Tensor, n: int, num_classes: int, ignore_index: int | None):
    """(mask of the rows to keep or None for every row, whether that is every row), with one host synchronisation
    for both checks."""
    _check_label_tensor(labels, n)
    if n and (ignore_index is None or ignore_index < 0):
        # the common case in three operations: a negative ignore_index lies below every label in range, so
        # labels in [0, C) are also all kept (the mask is built only for check_labels, off the hot path)
        low, high = torch.stack(torch.aminmax(labels)).tolist()
        if low >= 0 and high < num_classes:
            return None, True
    valid = labels != ignore_index if ignore_index is not None else torch.ones_like(labels, dtype=torch.bool)
    if not n:
        return valid, True
    kept = torch.where(valid, labels, torch.zeros((), dtype=labels.dtype, device=labels.device))  # ignored -> 0
    low, high, every = torch.stack([kept.min(), kept.max(), valid.all().to(labels.dtype)]).tolist()
    if low < 0 or high >= num_classes:
        raise label_error(low if low < 0 else high, num_classes, ignore_index)
    return valid, bool(every)


def check_labels(labels: torch.Tensor, n: int, num_classes: int, ignore_index: int | None = -100) -> torch.Tensor:
    """Validate (N,) integer class labels against N rows of C scores; returns the (N,) mask of rows to keep.

    Rows labelled ``ignore_index`` are dropped (as ``nn.CrossEntropyLoss``); every other label must lie in
    ``[0, num_classes)``. One host synchronisation (the range check).
    """
    valid, _ = _checked_labels(labels, n, num_classes, ignore_index)
    return torch.ones_like(labels, dtype=torch.bool) if valid is None else valid


_NARROW_INTS = (torch.uint8, torch.int8, torch.int16)


def valid_rows(
    scores: torch.Tensor,
    labels: torch.Tensor,
    sample_weight: torch.Tensor | None = None,
    *,
    ignore_index: int | None = -100,
    name: str = "scores",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The input formatting every loss, confusion matrix and tuner shares: (scores, labels, sample_weight) of the
    kept rows.

    scores: (N, C) logits or probabilities (``name`` in the errors); labels: (N,) integer classes, rows labelled
    ``ignore_index`` dropped; sample_weight: None or (N,), finite and >= 0. Labels of a narrow integer dtype (uint8,
    int8, int16) are cast to int64. Raises a one-line error for a wrong shape, a non-integer label or one out of
    range, a negative weight.

    >>> s, y, w = valid_rows(torch.zeros(3, 2), torch.tensor([1, -100, 0]))
    >>> tuple(s.shape), y.tolist(), w
    ((2, 2), [1, 0], None)
    """
    _check_probs(scores, name)
    if isinstance(labels, torch.Tensor) and labels.dtype in _NARROW_INTS:
        labels = labels.long()  # uint8 / int8 / int16 class ids: index_add_ and cross_entropy need int64 or int32
    valid, every = _checked_labels(labels, scores.shape[0], scores.shape[1], ignore_index)
    sample_weight = _check_weight(sample_weight, scores.shape[0])
    if every:
        return scores, labels, sample_weight
    return scores[valid], labels[valid], None if sample_weight is None else sample_weight[valid]


NO_LABEL_FAULT = torch.iinfo(torch.int64).min  # ``device_rows``'s fault where every label is in range or ignored


def device_rows(
    scores: torch.Tensor,
    labels: torch.Tensor,
    sample_weight: torch.Tensor | None = None,
    *,
    ignore_index: int | None = -100,
    name: str = "scores",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``valid_rows`` without a host read, for a training step: (scores, labels, weight, fault).

    Shapes and dtypes are checked as ``valid_rows`` checks them; label values are checked on the device. Every row
    stays, so no size depends on a value: a row labelled ``ignore_index`` or out of [0, C) gets weight 0 (and a label
    in range), and contributes nothing to any statistic. weight: (N,) float32 (float64 for float64 scores),
    ``sample_weight`` (not checked for sign) times the kept rows' mask. fault: () int64, the largest label out of
    range, ``NO_LABEL_FAULT`` where there is none; the caller raises ``label_error`` for it when it next reads the
    device.

    >>> s, y, w, fault = device_rows(torch.zeros(3, 2), torch.tensor([1, -100, 7]))
    >>> y.tolist(), w.tolist(), fault.item()
    ([1, 0, 1], [1.0, 0.0, 0.0], 7)
    """
    _check_probs(scores, name)
    if isinstance(labels, torch.Tensor) and labels.dtype in _NARROW_INTS:
        labels = labels.long()
    n, C = scores.shape
    _check_label_tensor(labels, n)
    if sample_weight is not None and (not isinstance(sample_weight, torch.Tensor) or sample_weight.shape != (n,)):
        shape = tuple(sample_weight.shape) if isinstance(sample_weight, torch.Tensor) else type(sample_weight).__name__
        raise ValueError(f"Expected sample_weight of shape ({n},), got {shape}")
    inside = labels.clamp(0, C - 1)  # (N,) the labels in range as they are; the others weigh 0
    keep = inside == labels
    if ignore_index is None:
        ok = keep
    else:
        ignored = labels == ignore_index
        if 0 <= ignore_index < C:
            keep = keep & ~ignored
        ok = keep | ignored
    fault = torch.where(ok, NO_LABEL_FAULT, labels.long()).amax() if n else labels.new_full((), NO_LABEL_FAULT).long()
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    weight = keep.to(dtype) if sample_weight is None else keep.to(dtype) * sample_weight.to(dtype)
    return scores, inside, weight, fault


def confusion_from_memberships(
    memberships: torch.Tensor, labels: torch.Tensor, sample_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Sum rows of ``memberships`` (N, C) into a (C, C) matrix at their true class: row i += memberships[n]."""
    if sample_weight is not None:
        memberships = memberships * sample_weight.to(memberships.dtype).unsqueeze(1)
    C = memberships.shape[1]
    return memberships.new_zeros(C, C).index_add_(0, labels, memberships)  # (C, C)


def counts_from_memberships(
    memberships: torch.Tensor, labels: torch.Tensor, sample_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """The (3, C) counts of ``confusion_from_memberships``: TP (its diagonal), support (row sums, the weight of each
    class's samples) and predicted (column sums), without the (C, C) matrix."""
    w = None if sample_weight is None else sample_weight.to(memberships.dtype)
    G = memberships if w is None else memberships * w.unsqueeze(1)  # (N, C)
    C = memberships.shape[1]
    tp = G.new_zeros(C).index_add_(0, labels, G.gather(1, labels.unsqueeze(1)).squeeze(1))
    support = G.new_zeros(C).index_add_(0, labels, torch.ones_like(labels, dtype=G.dtype) if w is None else w)
    return torch.stack([tp, support, G.sum(0)])  # (3, C)


def confusion_from_predictions(
    labels: torch.Tensor, predictions: torch.Tensor, num_classes: int, sample_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Count decisions already taken: (N,) true classes and (N,) predicted classes -> (C, C) float32, entry (i, j)
    the (weighted) number of samples of class i predicted as j.

    >>> confusion_from_predictions(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 0]), 2)
    tensor([[1., 1.],
            [1., 0.]])
    """
    C = num_classes
    weight = torch.ones(len(labels), device=labels.device) if sample_weight is None else sample_weight.float()
    flat = labels * C + predictions
    return torch.zeros(C * C, device=labels.device).index_add_(0, flat, weight).view(C, C)  # (C, C)


def soft_confusion_matrix(
    probs: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    *,
    sample_weight: torch.Tensor | None = None,
    ignore_index: int | None = -100,
    threshold_grad: bool = True,
) -> torch.Tensor:
    """Sec. 4.2, the soft-set confusion matrix: rows are true classes, columns predicted classes.

    probs: (N, C) probabilities; labels: (N,) integer classes, rows labelled ``ignore_index`` contribute nothing;
    sample_weight: optional (N,). Returns (C, C) float32 (float64 for float64 probs) whose entries sum to the total
    weight. As T -> 0 it tends to ``hard_confusion_matrix(probs, labels)``.

    >>> p = torch.tensor([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1]])
    >>> soft_confusion_matrix(p, torch.tensor([0, 2]), 1e-6).round()
    tensor([[1., 0., 0.],
            [0., 0., 0.],
            [0., 1., 0.]])
    """
    _check_probs(probs)
    temperature = check_temperature(temperature)
    _check_distribution(probs)
    probs, labels, sample_weight = valid_rows(probs, labels, sample_weight, ignore_index=ignore_index)
    g = soft_predictions(probs, temperature, threshold_grad=threshold_grad)
    return confusion_from_memberships(g, labels, sample_weight)


def hard_confusion_matrix(
    probs_or_logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    sample_weight: torch.Tensor | None = None,
    ignore_index: int | None = -100,
) -> torch.Tensor:
    """The argmax confusion matrix (the T -> 0 limit). (N, C) scores and (N,) labels -> (C, C) float32.

    >>> hard_confusion_matrix(torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]]), torch.tensor([0, 0, 1]))
    tensor([[1., 1.],
            [1., 0.]])
    """
    _check_probs(probs_or_logits, "probs_or_logits")
    _check_finite(probs_or_logits, "probs_or_logits")  # argmax of a NaN row is 0: it would count as class 0
    scores, labels, sample_weight = valid_rows(probs_or_logits, labels, sample_weight, ignore_index=ignore_index)
    return confusion_from_predictions(labels, scores.argmax(dim=1), scores.shape[1], sample_weight)


def _check_finite(x: torch.Tensor, name: str) -> None:
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"Expected finite {name}, got NaN or inf in a tensor of shape {tuple(x.shape)}")


def _check_distribution(probs: torch.Tensor, atol: float = 1e-3) -> None:
    """Rows of probabilities: finite, in [0, 1], summing to 1 (logits would give negative memberships). One sync."""
    ok = ((probs >= 0) & (probs <= 1)).all() & ((probs.sum(dim=1) - 1).abs() <= atol).all()
    if not bool(ok):
        _check_finite(probs, "probs")
        raise ValueError(
            f"Expected probabilities (rows in [0, 1] summing to 1), got values in [{probs.min().item():.4g}, "
            f"{probs.max().item():.4g}] (logits? pass logits.softmax(1))"
        )


def _check_weight(sample_weight: torch.Tensor | None, n: int) -> torch.Tensor | None:
    if sample_weight is None:
        return None
    if not isinstance(sample_weight, torch.Tensor) or sample_weight.shape != (n,):
        shape = tuple(sample_weight.shape) if isinstance(sample_weight, torch.Tensor) else type(sample_weight).__name__
        raise ValueError(f"Expected sample_weight of shape ({n},), got {shape}")
    if n and not bool(((sample_weight >= 0) & torch.isfinite(sample_weight)).all()):  # NaN fails >= 0 too
        raise ValueError(f"Expected every sample_weight finite and >= 0, got min {sample_weight.min().item()}")
    return sample_weight
