"""The loss's fast path: softmax, soft-set memberships and confusion statistics in one ``autograd.Function``.

Two outputs, the same Function:

- ``soft_confusion_from_logits``: the (C, C) soft confusion matrix, for metrics that need all of it (a callable of
  the user's) and for ``EASTLoss.confusion_matrix``.
- ``soft_counts_from_logits``: its (3, C) counts, TP (diagonal), support (row sums) and predicted (column sums),
  all that F-beta, MCC, accuracy, precision and recall read. O(C) memory and O(N C) work where the matrix takes
  O(C^2) of both: at C = 100,000 the matrix alone is 40 GB in float32.

Same values and gradients as ``soft_confusion_matrix(logits.softmax(1), ...)`` of ``east_hf.core.surrogate`` and
as ``metrics.confusion_counts`` of it (checked in ``tests/test_fused.py``), with fewer passes over the (N, C) logits;
``EASTLoss`` uses them. The backward of either output starts from u = dL/dg (N, C), the gradient reaching each
sample's memberships: row y_n of dL/dC, or for the counts dL/dpredicted + [j = y_n] dL/dTP_{y_n} (the support does
not depend on the memberships, whose rows sum to one).
"""

from __future__ import annotations

import torch

from east_hf.core.surrogate import confusion_from_memberships, counts_from_memberships, soft_predictions

__all__ = ["soft_confusion_from_logits", "soft_counts_from_logits"]

# ---- The loss's fast path: softmax, memberships and confusion matrix in one Function -------------------------------
#
# On a softmax row the two largest entries sum to at most one, so tau <= 1/2, min(tau, 1 - tau) = tau and
# tau_m = 5T tau. In t = p / tau the breakpoints of Eq. (linear-param) are then fixed, alpha = 1 - 5T/2 and
# beta = 1 + 5T/2, and so are the lower and middle slopes, k1 = T / alpha and k2 = (1 - 2T) / (5T); only the upper
# slope mu = T tau / (1 - beta tau) moves with tau, and only the row's largest entry (v1) can lie above tau. So
#   tau H_j = k1 p_j + (k2 - k1) rho_j + [j = top] (mu - k2) over,
#       rho = relu(p - tau alpha), over = relu(v1 - tau beta)
#   g_j = c (p_j + gamma rho_j) (+ the top's share),   c = k1 / (tau S),  gamma = (k2 - k1) / k1,
# and, since H depends on tau only through t except for mu,
#   dH_j/dtau = -(p_j / tau) dH_j/dp_j + [j = top] mu'(tau) over / tau:
# the gradient reaching tau is a by-product of the one through p. Most entries lie in the lower piece, g_j = c p_j,
# so the sparse path scales p in place and touches only the entries above lo (and the top two) by index.

_BLOCK = 16  # columns per block whose maximum locates the top two entries and the entries above lo (a power of 2)
_SPARSE_MIN_NUMEL = 1 << 17  # below this the dense path's fewer operations are faster (thresholds measured on CPU)
_SPARSE_MIN_CLASSES = 256  # with fewer classes the two best blocks alone are a large share of a row
_SPARSE_MAX_FRACTION = 0.125  # share of blocks holding candidates above which the dense path is faster


def _slopes(T: float) -> tuple[float, float, float]:
    """k1 and k2, the lower and middle slopes of H in t = p / tau, and gamma = (k2 - k1) / k1 = (m2 - m1) / m1."""
    k1, k2 = T / (1.0 - 2.5 * T), (1.0 - 2.0 * T) / (5.0 * T)
    return k1, k2, (k2 - k1) / k1


class _Pieces:
    """The per-row constants both paths need, from the two largest probabilities V (N, 2); tensors are (N, 1)."""

    def __init__(self, V: torch.Tensor, T: float):
        alpha, beta = 1.0 - 2.5 * T, 1.0 + 2.5 * T
        self.k1, self.k2, self.gamma = _slopes(T)
        self.tau = V.mean(1, keepdim=True)  # tau_avg, Sec. 4.1
        self.lo = self.tau * alpha  # tau - tau_m / 2
        hi = self.tau * beta  # tau + tau_m / 2
        self.over = (V[:, :1] - hi).clamp_min_(0)  # relu(v1 - hi)
        one_hi = torch.rsub(hi, 1.0)
        mu_k2 = torch.div(self.tau, one_hi).mul_(T).sub_(self.k2)  # mu - k2
        self.top = mu_k2 * self.over  # tau (H_top - the middle piece's formula at v1)
        self.zeta = mu_k2.mul_(self.over.sign()).div_(self.k1)  # (dH/dp at an upper top - m1) / m1
        self.dmu = one_hi.square_().reciprocal_().mul_(T / self.k1).mul_(self.over)  # mu'(tau) over / k1
        self.halfV = V * 0.5

    def scale(self, R: torch.Tensor, weight: torch.Tensor | None):
        """c = w m1 / S from R = sum_j rho_j (tau S = k1 + (k2 - k1) R + top, the p_j summing to one), c / w, and c
        with zeros replaced by ones (for a zero weight): three (N, 1) tensors, the same one without weights."""
        c = torch.add(self.top, R, alpha=self.k2 - self.k1).add_(self.k1).reciprocal_().mul_(self.k1)
        if weight is None:
            return c, c, c
        cw = c * weight.unsqueeze(1)
        return cw, c, torch.where(cw == 0, 1.0, cw)


def _top2(p: torch.Tensor):
    """Values and indices (N, 2) of the two largest entries of each row of p (N, C); p is left as it was.

    On CPU topk slows down sharply with the row width, so wider rows take two max sweeps with the first maximum
    masked in place between them.
    """
    if p.shape[1] <= 16:
        return p.topk(2, 1)
    v1, i1 = p.max(1, keepdim=True)
    p.scatter_(1, i1, -1.0)
    v2, i2 = p.max(1, keepdim=True)
    p.scatter_(1, i1, v1)
    return torch.cat([v1, v2], 1), torch.cat([i1, i2], 1)


def _support(labels, weight, C, like):
    """(C,) the weight of the samples of each class: the confusion matrix's row sums, without the memberships."""
    if weight is None:
        return torch.bincount(labels, minlength=C).to(like.dtype)
    return torch.bincount(labels, weights=weight, minlength=C).to(like.dtype)


def _dense_forward(p, labels, weight, T, threshold_grad, counts):
    """Every entry in (N, C) tensors, in few operations (at small sizes their count is the cost): with
    h = tau H / k1 = p + gamma rho + m over (m = (mu - k2) / k1), g = h / S. Returns the confusion matrix (or its
    counts) and what the backward needs: p and G = w g, the two (N, C) tensors, and per-row scalars."""
    k1, k2, gamma = _slopes(T)
    V, idx = _top2(p)
    tau = V.mean(1, keepdim=True)  # (N, 1) tau_avg
    rho = torch.sub(p, tau, alpha=1.0 - 2.5 * T).clamp_min_(0)  # (N, C) relu(p - lo)
    over = torch.sub(p, tau, alpha=1.0 + 2.5 * T).clamp_min_(0)  # (N, C) relu(p - hi), nonzero at the top only
    one_hi = torch.rsub(tau, k1 / T, alpha=(1.0 + 2.5 * T) * k1 / T)  # (k1 / T)(1 - hi)
    m = torch.div(tau, one_hi).sub_(k2 / k1)  # (N, 1) (mu - k2) / k1, mu = T tau / (1 - hi)
    h = torch.add(p, rho, alpha=gamma).addcmul_(over, m)  # (N, C) tau H / k1
    S = h.sum(1, keepdim=True)
    c = None if weight is None else weight.unsqueeze(1) / S  # w / S
    G = h.div_(S) if c is None else h.mul_(c)  # (N, C) w g
    C = p.shape[1]
    if counts:
        tp = G.new_zeros(C).index_add_(0, labels, G.gather(1, labels.unsqueeze(1)).squeeze(1))
        cm = torch.stack([tp, _support(labels, weight, C, G), G.sum(0)])  # (3, C)
    else:
        cm = G.new_zeros(C, C).index_add_(0, labels, G)
    over1 = over.sum(1, keepdim=True)  # (N, 1) relu(v1 - hi)
    top = torch.mul(over1.sign(), m)  # (N, 1) m where the top entry is in the upper piece
    mo = None
    if threshold_grad:  # mu'(tau) relu(v1 - hi) / k1, the top entry's extra dh/dtau
        mo = torch.div(over1, one_hi.square_()).mul_(k1 / T)
    return cm, (p, G, S, c, tau, top, mo, idx[:, :1], idx, V)


def _dense_backward(u, saved, labels, weight, T, threshold_grad):
    """dL/dlogits from u = dL/dg (N, C), which it overwrites."""
    p, G, S, c, tau, top, mo, idx1, idx, V = saved
    gamma = _slopes(T)[2]
    ug = torch.mul(u, G).sum(1, keepdim=True)  # w <u, g>
    if c is None:
        x = u.sub_(ug).div_(S)  # (N, C) dL/dh = (w / S)(u - <u, g>)
    else:
        x = u.mul_(c).sub_(ug.div_(S))
    x1 = x.gather(1, idx1)  # the top entry's
    # dL/dh dh/dp, dh/dp = 1 + gamma [p > lo] + m [top entry above hi]
    x.addcmul_(x, torch.sub(p, tau, alpha=1.0 - 2.5 * T).gt_(0), value=gamma)
    x.scatter_add_(1, idx1, x1 * top)
    lam = torch.mul(x, p).sum(1, keepdim=True)  # sum_j p_j dh_j/dp_j dL/dh_j
    if threshold_grad:
        # dL/dtau = -lam / tau + mu'(tau) over_top dL/dh_top / k1 (h is homogeneous in (p, tau) but for m)
        dtau = x1.mul_(mo).addcdiv_(lam, tau, value=-1.0)
        lam = torch.addcmul(lam, dtau, tau)  # <dp, p> with tau = (v1 + v2) / 2
    dz = x.sub_(lam).mul_(p)  # the softmax backward p (dp - <dp, p>)
    if threshold_grad:
        dz.scatter_add_(1, idx, V * dtau * 0.5)  # tau is the mean of the top two
    return dz


def _block_maxima(p: torch.Tensor, levels: int) -> torch.Tensor:
    """Maxima (N, nb) of the column blocks {k + nb i : i < 2**levels}, nb = C >> levels, of p (N, C)'s first
    nb 2**levels columns: a tree of elementwise maxima of row halves,
    which unlike amax over short blocks vectorizes."""
    x = p[:, : p.shape[1] >> levels << levels]
    for _ in range(levels):
        half = x.shape[1] // 2
        x = torch.maximum(x[:, :half], x[:, half:])
    return x


def _candidates(p, T):
    """Flat indices (K,) and values of the entries of p (N, C) that may be among the top two or at or above lo;
    None when they fill too many blocks (near-uniform rows)."""
    N, C = p.shape
    B = _BLOCK
    bmax = _block_maxima(p, B.bit_length() - 1)  # (N, nb): block k holds columns k + nb i
    nb = bmax.shape[1]
    tail = p[:, nb * B :]  # (N, C - nb B) columns left over, candidates by themselves
    both = torch.cat([bmax, tail.amax(1, keepdim=True)], 1) if tail.shape[1] else bmax
    v1, j1 = both.max(1, keepdim=True)  # the row maximum, exactly
    v2b = both.scatter_(1, j1, -1.0).amax(1, keepdim=True)  # the second block maximum (v1 again at a tie) <= v2
    both.scatter_(1, j1, v1)
    lo_low = (v1 + v2b) * (0.5 - 1.25 * T)  # <= lo
    keep_at = torch.minimum(lo_low, v2b)  # entries at or above it hold the top two and every entry >= lo
    # v2b = 0: every block but the top one is all zeros, whose entries all stay candidates
    blocks = (bmax >= torch.where(v2b > 0, keep_at, lo_low)).nonzero()  # (Kb, 2): row, block
    if blocks.shape[0] > _SPARSE_MAX_FRACTION * bmax.numel():
        return None
    rows, blk = blocks.unbind(1)
    vals = p[:, : nb * B].view(N, B, nb).transpose(1, 2)[rows, blk]  # (Kb, B) the blocks' entries
    kb, i = (vals >= keep_at.view(-1)[rows].unsqueeze(1)).nonzero().unbind(1)
    flat, pv = rows[kb] * C + blk[kb] + nb * i, vals[kb, i]
    if tail.shape[1]:
        rt, jt = (tail >= keep_at).nonzero().unbind(1)
        flat, pv = torch.cat([flat, rt * C + nb * B + jt]), torch.cat([pv, tail[rt, jt]])
    return flat, pv


def _sparse_forward(p, labels, weight, T, counts):
    """The lower piece dense and in place, the candidates by flat index; None if they are too many."""
    N, C = p.shape
    found = _candidates(p, T)
    if found is None:
        return None
    flat, pv = found
    rows = flat.div(C, rounding_mode="floor")
    # the top two among the candidates (the first index among ties)
    big = N * C
    v1 = pv.new_full((N,), -1.0).scatter_reduce_(0, rows, pv, "amax")
    i1 = flat.new_full((N,), big).scatter_reduce_(0, rows, torch.where(pv == v1[rows], flat, big), "amin")
    pv2 = torch.where(flat == i1[rows], -1.0, pv)
    v2 = pv.new_full((N,), -1.0).scatter_reduce_(0, rows, pv2, "amax").clamp_min_(0)
    i2 = flat.new_full((N,), big).scatter_reduce_(0, rows, torch.where(pv2 == v2[rows], flat, big), "amin")
    i2 = torch.where(i2 == big, i1, i2)  # no second candidate: v2 = 0 and its gradient term vanishes
    idx = torch.stack([i1, i2], 1) - (torch.arange(N, device=p.device) * C).unsqueeze(1)  # (N, 2) columns
    k = _Pieces(torch.stack([v1, v2], 1), T)
    dK = pv - k.lo.view(-1)[rows]
    rhoK = dK.clamp_min(0)  # (K,) relu(p - lo)
    sK = dK.sign_().add_(1).clamp_max_(1).mul_(pv)  # (K,) p [p >= lo]
    c, cu, c_nz = k.scale(torch.zeros_like(k.tau).index_add_(0, rows, rhoK.unsqueeze(1)), weight)
    q = p.mul_(c)  # (N, C) w g on the lower piece, in place of p
    extra = torch.cat([rhoK * c.view(-1)[rows] * k.gamma, (k.top * c).view(-1) / k.k1])  # g past the lower piece
    if counts:
        cols = torch.cat([flat - rows * C, idx[:, 0]])  # the extras' columns, and their rows' classes
        true = torch.cat([labels[rows], labels])
        tp = q.new_zeros(C).index_add_(0, labels, q.gather(1, labels.unsqueeze(1)).squeeze(1))
        tp.index_add_(0, true, extra * (cols == true))
        cm = torch.stack([tp, _support(labels, weight, C, q), q.sum(0).index_add_(0, cols, extra)])  # (3, C)
    else:
        cm = q.new_zeros(C, C).index_add_(0, labels, q)
        at = torch.cat([flat + ((labels - torch.arange(N, device=p.device)) * C)[rows], labels * C + idx[:, 0]])
        cm.view(-1).index_add_(0, at, extra)
    return cm, (q, flat, rows, rhoK, sK, idx, k.tau, k.top, k.zeta, k.dmu, k.halfV, c, cu, c_nz)


def _sparse_backward(u, saved, labels, weight, T, threshold_grad):
    """dL/dlogits from u = dL/dg (N, C), which it overwrites."""
    q, flat, rows, rhoK, sK, idx, tau, top, zeta, dmu, halfV, c, cu, c_nz = saved
    N, C = q.shape
    k1, _, gamma = _slopes(T)
    uK = u.view(-1)[flat]
    u1 = u.gather(1, idx[:, :1])
    q1 = q.gather(1, idx[:, :1])  # c v1
    t = u.mul_(q)
    A = t.sum(1, keepdim=True)  # <u, q> = c <u, p>
    # v = <u, g> = (c / w) (<u, p> + gamma sum_K u rho + u_top top / k1)
    S1 = torch.zeros_like(A).index_add_(0, rows, (uK * rhoK).unsqueeze(1))
    v = torch.add(A / c_nz, S1, alpha=gamma).addcmul_(u1, top, value=1.0 / k1).mul_(cu)
    x1 = u1 - v
    xK = uK - v.view(-1)[rows]
    # lam = w sum_j p_j dH_j/dp_j dH_j = <x, q>, x = (u - v)(1 + gamma [p >= lo]) + zeta x1 at the top
    S2 = torch.zeros_like(A).index_add_(0, rows, (sK * xK).unsqueeze(1))
    lam = (A - v * c).addcmul_(S2, c, value=gamma).addcmul_(zeta * x1, q1)
    if threshold_grad:
        dtau = dmu * c * x1 - lam / tau  # w dL/dtau
        lam = torch.addcmul(lam, dtau, tau)  # tau = (v1 + v2) / 2
    dz = t.addcmul_(q, -(v + lam / c_nz))  # the lower piece: q (u - v - lam / c)
    row_start = torch.arange(N, device=q.device) * C
    at = [flat, row_start + idx[:, 0]]
    vals = [sK * xK * c.view(-1)[rows] * gamma, (zeta * x1 * q1).view(-1)]
    if threshold_grad:
        tv = halfV * dtau  # tau is the mean of the top two
        at.append(row_start + idx[:, 1])
        vals = [vals[0], vals[1] + tv[:, 0], tv[:, 1]]
    return dz.view(-1).index_add_(0, torch.cat(at), torch.cat(vals)).view(N, C)


def _membership_gradient(dout, labels, counts):
    """u = dL/dg (N, C): row y_n of dL/dC, or from the counts' gradient (3, C) dL/dpredicted_j + [j = y_n] dL/dTP_j
    (dL/dsupport adds a constant to a row of u, which the memberships' normalisation cancels)."""
    if not counts:
        return dout.index_select(0, labels)
    dtp, _, dpr = dout.unbind(0)
    u = dpr.expand(labels.shape[0], -1).clone()
    return u.scatter_add_(1, labels.unsqueeze(1), dtp.index_select(0, labels).unsqueeze(1))


class _SoftConfusion(torch.autograd.Function):
    """C_T(softmax(logits), labels) of Sec. 4.2 in one Function: logits (N, C) -> (C, C), or its (3, C) counts.

    Forward and backward of the softmax, the soft-set memberships g_T and the confusion statistics together: the
    graph holds one (N, C) tensor on the sparse path (as cross-entropy's does) and two on the dense one, instead of the
    plain composition's four, and the backward is a gather of u = dL/dg followed by a few passes. The sparse path
    serves large inputs whose rows have few entries above lo; the dense one small inputs and near-uniform rows.
    Backward, per row with S = sum_j H_j, dH = (u - <u, g>) / S:
      lam  = sum_j p_j dH_j/dp_j dH_j,
      dtau = (mu'(tau) relu(t_top - beta) dH_top - lam) / tau,                      (with threshold_grad)
      dz   = p (dH/dp dH - lam - dtau (v1 + v2) / 2) + p dtau / 2 at the top two,
    times the sample weight. Values and gradients equal those of softmax -> linear_heaviside(p, dynamic_threshold(p))
    -> L1 normalisation -> index_add (tests/test_fused.py).
    """

    @staticmethod
    def forward(ctx, logits, labels, weight, temperature, threshold_grad, counts):
        p = torch.softmax(logits, 1)
        out = None
        # the sparse path's nonzero and size check wait for the device, which the dense path never does
        if p.device.type == "cpu" and p.numel() >= _SPARSE_MIN_NUMEL and p.shape[1] >= _SPARSE_MIN_CLASSES:
            out = _sparse_forward(p, labels, weight, temperature, counts)
        ctx.sparse = out is not None
        if out is None:
            out = _dense_forward(p, labels, weight, temperature, threshold_grad, counts)
        cm, saved = out
        ctx.save_for_backward(labels, weight, *saved)
        ctx.temperature, ctx.threshold_grad, ctx.counts = temperature, threshold_grad, counts
        return cm

    @staticmethod
    def backward(ctx, dout):
        labels, weight, *saved = ctx.saved_tensors
        backward = _sparse_backward if ctx.sparse else _dense_backward
        u = _membership_gradient(dout, labels, ctx.counts)  # (N, C) dL/dg
        dz = backward(u, saved, labels, weight, ctx.temperature, ctx.threshold_grad)
        return dz, None, None, None, None, None


def _soft_statistics(logits, labels, sample_weight, temperature, threshold_grad, counts):
    with torch.autocast(logits.device.type, enabled=False):
        if logits.dtype not in (torch.float32, torch.float64):
            logits = logits.float()
        weight = None if sample_weight is None else sample_weight.to(logits.dtype)
        if logits.shape[0] == 0 or (weight is not None and weight.requires_grad):
            g = soft_predictions(logits.softmax(1), temperature, threshold_grad=threshold_grad)
            return (counts_from_memberships if counts else confusion_from_memberships)(g, labels, weight)
        return _SoftConfusion.apply(logits, labels, weight, temperature, bool(threshold_grad), counts)


def soft_confusion_from_logits(
    logits: torch.Tensor,
    labels: torch.Tensor,
    sample_weight: torch.Tensor | None,
    temperature: float,
    threshold_grad: bool = True,
) -> torch.Tensor:
    """The soft confusion matrix of softmax(logits): (N, C) logits, (N,) labels in [0, C) -> (C, C).

    Equal to ``confusion_from_memberships(soft_predictions(logits.softmax(1), T), labels, sample_weight)``, computed
    in float32 (float64 for float64 logits) with autocast off, faster and with less memory (``_SoftConfusion``).
    Inputs are expected validated (labels in range, ignored rows removed), as ``EASTLoss.confusion_matrix`` does.
    """
    return _soft_statistics(logits, labels, sample_weight, temperature, threshold_grad, False)


def soft_counts_from_logits(
    logits: torch.Tensor,
    labels: torch.Tensor,
    sample_weight: torch.Tensor | None,
    temperature: float,
    threshold_grad: bool = True,
) -> torch.Tensor:
    """The (3, C) counts of the soft confusion matrix of softmax(logits): TP, support and predicted (its diagonal,
    row sums and column sums), never forming the matrix. (N, C) logits, (N,) labels in [0, C) -> (3, C).

    Equal to ``metrics.confusion_counts(soft_confusion_from_logits(...))`` in value and gradient, with O(C) memory
    beyond the logits' own (N, C); the support is the (weighted) count of each class's samples. Inputs as
    ``soft_confusion_from_logits``.
    """
    return _soft_statistics(logits, labels, sample_weight, temperature, threshold_grad, True)
