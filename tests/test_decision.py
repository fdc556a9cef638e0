"""The decision-rule tuner against brute force (two classes), its own guarantees (more classes) and its inputs."""

import pytest
import torch
from torch import nn

from east_hf.core import METRICS, beta_vector, hard_confusion_matrix
from east_hf.core.decision import rule as decision
from east_hf.core.decision.rule import DecisionRule, fold_offsets_into_bias, tune_logit_offsets


def library_score(logits, labels, metric="fbeta", beta=1.0, ignore_index=-100, **kwargs):
    """The metric of argmax(logits) as a user computes it: the library's metric of the hard confusion matrix."""
    cm = hard_confusion_matrix(logits, labels, ignore_index=ignore_index)
    if metric in ("fbeta", "f1"):
        kwargs["beta"] = beta_vector(beta, cm.shape[0], cm)
    return float(METRICS[metric](cm, **kwargs))


def imbalanced(seed, n, num_classes, *, ties=False, dtype=torch.float32):
    """Labels with a skewed prior, logits that favour the true class and, wrongly, the frequent classes."""
    g = torch.Generator().manual_seed(seed)
    prior = torch.linspace(1.0, 0.15, num_classes)
    labels = torch.multinomial(prior / prior.sum(), n, replacement=True, generator=g)
    logits = torch.randn(n, num_classes, generator=g) + 1.2 * nn.functional.one_hot(labels, num_classes) + 2 * prior
    if ties:  # coarse logits: many samples share a score difference
        logits = (logits * 2).round() / 2
    return logits.to(dtype), labels


# ---- two classes: the exact optimum over every threshold ------------------------------------------------------------

BINARY_CASES = [
    ("fbeta", dict(beta=1.0, average="binary")),
    ("fbeta", dict(beta=0.25, average="binary")),
    ("fbeta", dict(beta=4.0, average="binary")),
    ("mcc", {}),
    ("fbeta", dict(beta=1.0, average="macro")),
]


def brute_force_binary(logits, labels, metric, kwargs):
    """The best metric over every decision a threshold on l_1 - l_0 reaches (the top-i samples positive, for each
    distinct score difference), each scored by the library."""
    d = logits[:, 1].double() - logits[:, 0].double()
    thresholds = torch.cat([d.min().reshape(1) - 1, d.unique()])
    best = -float("inf")
    for thr in thresholds:
        pred = (d > thr).long()
        best = max(best, library_score(nn.functional.one_hot(pred, 2).float(), labels, metric, **kwargs))
    return best


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("metric,kwargs", BINARY_CASES)
def test_binary_is_the_brute_force_optimum(metric, kwargs, ties):
    for seed in range(4):
        logits, labels = imbalanced(seed, 30 + 10 * seed, 2, ties=ties)
        rule = tune_logit_offsets(logits, labels, metric, **kwargs)
        assert rule.score == brute_force_binary(logits, labels, metric, kwargs)
        assert rule.score == library_score(logits + rule.offsets, labels, metric, **kwargs)
        assert rule.baseline_score == library_score(logits, labels, metric, **kwargs)
        assert rule.offsets[0] == 0 and rule.rounds == 1


def test_binary_keeps_argmax_when_it_is_optimal():
    """Of equally good thresholds the one nearest 0 wins: a perfect argmax stays as it is."""
    logits = torch.tensor([[2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    rule = tune_logit_offsets(logits, torch.tensor([0, 0, 1, 1]), "fbeta", average="binary")
    assert rule.score == rule.baseline_score == 1.0
    assert rule.offsets.tolist() == [0.0, 0.0]


def test_binary_threshold_is_a_midpoint():
    """The threshold lies midway between the two score differences it separates: b_1 = -threshold."""
    logits = torch.tensor([[0.0, -3.0], [0.0, -2.0], [0.0, -1.0], [0.0, 2.0]])
    rule = tune_logit_offsets(logits, torch.tensor([0, 1, 1, 1]), "fbeta", average="binary")
    assert rule.offsets.tolist() == [0.0, 2.5] and rule.score == 1.0


# ---- more classes: coordinate ascent --------------------------------------------------------------------------------

MULTI_CASES = [
    ("fbeta", dict(beta=1.0, average="macro")),
    ("fbeta", dict(beta=[0.5, 1.0, 2.0, 1.0, 4.0], average="macro")),
    ("fbeta", dict(beta=2.0, average="weighted")),
    ("fbeta", dict(beta=1.0, average="binary", pos_label=3)),
    ("precision", dict(average="macro", zero_division=1.0)),
    ("recall", dict(average="macro")),
    ("mcc", {}),
    ("accuracy", {}),
]


@pytest.mark.parametrize("metric,kwargs", MULTI_CASES)
def test_multiclass_improves_and_reproduces(metric, kwargs):
    for seed, C in [(0, 5), (1, 4)]:
        if isinstance(kwargs.get("beta"), list):
            kwargs = {**kwargs, "beta": kwargs["beta"][:C]}
        logits, labels = imbalanced(seed, 300, C)
        rule = tune_logit_offsets(logits, labels, metric, **kwargs)
        assert isinstance(rule, DecisionRule) and rule.offsets.shape == (C,) and rule.offsets.dtype == torch.float32
        assert rule.baseline_score == library_score(logits, labels, metric, **kwargs)
        assert rule.score == library_score(logits + rule.offsets, labels, metric, **kwargs)
        assert rule.score >= rule.baseline_score
        assert torch.equal(rule.predict(logits), (logits + rule.offsets).argmax(1))
        again = tune_logit_offsets(logits, labels, metric, **kwargs)
        assert torch.equal(again.offsets, rule.offsets) and again.score == rule.score  # deterministic


def test_multiclass_helps_a_biased_model():
    logits, labels = imbalanced(0, 400, 5)
    rule = tune_logit_offsets(logits, labels, "fbeta", average="macro")
    assert rule.score > rule.baseline_score + 0.05
    assert rule.rounds < 10  # converged: a full round changed nothing


def test_multiclass_is_coordinatewise_optimal():
    """At convergence no single offset, set to any value (every distinct decision, brute force), does better."""
    logits, labels = imbalanced(3, 80, 4, ties=True)
    rule = tune_logit_offsets(logits, labels, "mcc")
    assert rule.rounds < 10
    for k in range(4):
        others = (logits + rule.offsets).index_fill(1, torch.tensor([k]), -torch.inf).max(1).values
        t = (others.double() - logits[:, k].double()).unique()  # critical values of b_k
        for b in torch.cat([t[:1] - 1, (t[1:] + t[:-1]) / 2, t[-1:] + 1]):
            offsets = rule.offsets.clone()
            offsets[k] = float(b)
            assert library_score(logits + offsets, labels, "mcc") <= rule.score


def test_coarse_grid_path(monkeypatch):
    """With a tiny batch budget the sweep scores a grid of candidates, then finer grids: same guarantees."""
    monkeypatch.setattr(decision, "_BATCH_ELEMENTS", 100)
    logits, labels = imbalanced(4, 400, 5, ties=True)
    rule = tune_logit_offsets(logits, labels, "fbeta", beta=2.0)
    assert rule.score == library_score(logits + rule.offsets, labels, "fbeta", beta=2.0)
    assert rule.score > rule.baseline_score
    assert torch.equal(tune_logit_offsets(logits, labels, "fbeta", beta=2.0).offsets, rule.offsets)


def test_stats_scorer_is_the_library_metric():
    """The batched sufficient-statistics formulas that rank candidates equal the library's metrics, zero divisions
    (an absent class, a never-predicted class, perfect predictions) included."""
    g = torch.Generator().manual_seed(0)
    C, n = 4, 40
    cases = [(m, kw) for m, kw in MULTI_CASES if not isinstance(kw.get("beta"), list)]
    cases += [("fbeta", dict(beta=[0.5, 1.0, 2.0, 3.0], average="weighted")), ("fbeta", dict(average="micro"))]
    cases += [("precision", dict(average="micro")), ("recall", dict(average="weighted", zero_division=0.5))]
    for labels in (torch.randint(0, C, (n,), generator=g), torch.tensor([0, 2, 3, 3] * 10)):  # the second: no 1
        preds = torch.randint(0, C, (32, n), generator=g)
        preds[::3] = preds[::3].clamp(max=1)  # classes 2 and 3 never predicted
        preds[::5] = labels  # perfect
        cms = torch.stack([torch.bincount(labels * C + p, minlength=C * C).view(C, C) for p in preds]).double()
        states = torch.cat([cms.diagonal(dim1=1, dim2=2), cms.sum(1)], 1)  # (K, 2C): TP | predicted
        for metric, kwargs in cases:
            args = [kwargs.get("beta", 1.0), kwargs.get("average", "macro"), kwargs.get("pos_label", 1)]
            kw = decision._metric_kwargs(metric, *args, kwargs.get("zero_division", 0.0), cms[0])
            expected = torch.stack([METRICS[metric](cm, **kw) for cm in cms])
            got = decision._StatsScorer(metric, kw, labels, C)(states)
            assert torch.allclose(got, expected, rtol=1e-12, atol=1e-15), (metric, kwargs)


# ---- the sweep: every candidate of a named metric in O(N log N) ----------------------------------------------------


def reference_tuner(logits, labels, metric, max_rounds=10, **kwargs):
    """Coordinate ascent written out: each offset tried at every distinct decision (below, between and above the
    critical values t_n = max_{j != k} (l_nj + b_j) - l_nk), each decision counted from scratch and ranked by the
    statistics' metric, ties to the offset nearest the current; a change kept iff the library's metric improves."""
    C = logits.shape[1]
    args = [kwargs.get("beta", 1.0), kwargs.get("average", "macro"), kwargs.get("pos_label", 1)]
    kw64 = decision._metric_kwargs(metric, *args, kwargs.get("zero_division", 0.0), torch.empty(C).double())
    scorer = decision._StatsScorer(metric, kw64, labels, C)

    def stats(pred):
        return float(scorer(scorer.count(labels, pred)[None])[0])

    offsets, current = torch.zeros(C), library_score(logits, labels, metric, **kwargs)
    current64, rounds = stats(logits.argmax(1)), 0
    while rounds < max_rounds:
        rounds += 1
        changed = False
        for k in [1] if C == 2 else range(C):
            others = (logits + offsets).index_fill(1, torch.tensor([k]), -torch.inf)
            m, alt = others.max(1).values, others.argmax(1)
            t = m.double() - logits[:, k].double()
            u = t.unique()
            margin = 1.0 + float(max(-u[0], u[-1])) * 2.0**-10
            values = torch.cat([u[:1] - margin, (u[1:] + u[:-1]) / 2, u[-1:] + margin])
            scores = torch.tensor([stats(torch.where(t < v, k, alt)) for v in values])
            ties = torch.nonzero(scores == scores.max()).flatten()
            best = ties[(values[ties] - float(offsets[k])).abs().argmin()]
            value = values[best].float()
            if not float(scores[best]) > current64 or value == offsets[k]:
                continue
            zk = logits[:, k] + value
            pred = torch.where((zk > m) | ((zk == m) & (k < alt)), k, alt)
            score = library_score(nn.functional.one_hot(pred, C).float(), labels, metric, **kwargs)
            if score > current:
                offsets[k], current, current64, changed = value, score, stats(pred), True
        if not changed or C == 2:
            break
    return offsets, rounds


SWEEP_CASES = [
    *MULTI_CASES[:1],
    *MULTI_CASES[2:],
    ("fbeta", dict(average="micro")),
    ("recall", dict(average="weighted")),
    ("precision", dict(average="binary", pos_label=0)),
]


@pytest.mark.parametrize("metric,kwargs", SWEEP_CASES)
def test_sweep_is_the_written_out_coordinate_ascent(metric, kwargs):
    """The same offsets, rounds and score as coordinate ascent over every decision scored on its own counts."""
    for seed, n, C, ties in [(0, 120, 4, False), (1, 90, 5, True)]:
        logits, labels = imbalanced(seed, n, C, ties=ties)
        rule = tune_logit_offsets(logits, labels, metric, **kwargs)
        offsets, rounds = reference_tuner(logits, labels, metric, **kwargs)
        assert torch.equal(rule.offsets, offsets) and rule.rounds == rounds, (seed, rule.offsets, offsets)
        assert rule.score == library_score(logits + offsets, labels, metric, **kwargs)


@pytest.mark.parametrize("metric,kwargs", SWEEP_CASES)
def test_sweep_scores_every_position(metric, kwargs):
    """The O(N) sweep equals the statistics' metric of each position's (2C,) counts: bitwise for the sums of
    integers (accuracy, MCC, micro, binary), within float64 rounding for a macro or weighted sum."""
    logits, labels = imbalanced(9, 150, 5, ties=True)
    C = logits.shape[1]
    args = [kwargs.get("beta", 1.0), kwargs.get("average", "macro"), kwargs.get("pos_label", 1)]
    kw64 = decision._metric_kwargs(metric, *args, kwargs.get("zero_division", 0.0), torch.empty(C).double())
    scorer = decision._StatsScorer(metric, kw64, labels, C)
    top = decision._top2(logits + torch.tensor([0.3, -0.2, 0.0, 0.5, -0.4]))
    for k in range(C):
        coord = decision._Coordinate(logits.T.contiguous(), labels, top, k, scorer)
        swept = scorer.sweep(coord)  # (N + 1,)
        groups = torch.arange(len(labels))  # candidate i moves the first i samples
        states = torch.cat([coord.base[None], scorer.states(coord.base, coord.y, coord.alt_sorted, k, groups, 150)])
        if scorer.exact:
            assert torch.equal(swept, scorer(states)), k
        else:
            assert torch.allclose(swept, scorer(states), rtol=0, atol=1e-13), k


@pytest.mark.parametrize("metric,kwargs", SWEEP_CASES)
def test_window_is_the_full_sweep_cut_short(metric, kwargs):
    """A coordinate restricted to a window of rows reaches the same states as the full one at its first positions:
    the same base, the same candidate offsets (the last one midway to the cap), the same scores (bitwise for sums of
    integers)."""
    logits, labels = imbalanced(13, 300, 5, ties=True)
    C = logits.shape[1]
    args = [kwargs.get("beta", 1.0), kwargs.get("average", "macro"), kwargs.get("pos_label", 1)]
    kw64 = decision._metric_kwargs(metric, *args, kwargs.get("zero_division", 0.0), torch.empty(C).double())
    scorer = decision._StatsScorer(metric, kw64, labels, C)
    z = logits + torch.tensor([0.3, -0.2, 0.0, 0.5, -0.4])
    top = decision._top2(z)
    state = scorer.count(labels, top[1])
    columns = logits.T.contiguous()
    for k in range(C):
        full = decision._Coordinate(columns, labels, top, k, scorer)
        for window in (int((top[1] == k).sum()) + 5, int((top[1] == k).sum()) + 60):
            cut = decision._Coordinate(columns, labels, top, k, scorer, window, state)
            assert cut.cap is not None and len(cut.t) <= window, (k, window)
            n = len(cut.positions)
            assert torch.equal(cut.base, full.base) and torch.equal(cut.positions, full.positions[:n])
            idx = torch.arange(1, n)  # position 0: below every t, by a margin of the t swept
            assert torch.equal(cut.values(idx), full.values(idx)) and cut.values(idx[:1] - 1) < full.t[0]
            swept, expected = scorer.sweep(cut)[cut.positions], scorer.sweep(full)[full.positions[:n]]
            if scorer.exact:
                assert torch.equal(swept, expected), (k, window)
            else:
                assert torch.allclose(swept, expected, rtol=0, atol=1e-13), (k, window)


@pytest.mark.parametrize("metric,kwargs", MULTI_CASES[:1] + MULTI_CASES[6:7])
def test_window_tuner_keeps_its_guarantees(monkeypatch, metric, kwargs):
    """Windows forced small (no floor, one support): every sweep is restricted, the rule still never falls below
    argmax, is reproduced by the library, and lands within 0.02 of the full sweep's score."""
    logits, labels = imbalanced(14, 1200, 8)
    full = tune_logit_offsets(logits, labels, metric, **kwargs)
    monkeypatch.setattr(decision, "_WINDOW_MIN_ROWS", 0)
    monkeypatch.setattr(decision, "_WINDOW_FACTOR", 1)
    restricted = []
    init = decision._Coordinate.__init__

    def spy(self, *args, **kw):
        init(self, *args, **kw)
        restricted.append(self.cap is not None)

    monkeypatch.setattr(decision._Coordinate, "__init__", spy)
    rule = tune_logit_offsets(logits, labels, metric, **kwargs)
    assert sum(restricted) >= len(restricted) // 2
    assert rule.score == library_score(logits + rule.offsets, labels, metric, **kwargs)
    assert rule.score > rule.baseline_score and abs(rule.score - full.score) <= 0.02
    if metric == "mcc":  # a callable scores the same windows' candidates: the same rule
        called = tune_logit_offsets(logits, labels, lambda cm: METRICS["mcc"](cm))
        assert torch.equal(called.offsets, rule.offsets) and called.score == rule.score


def test_work_bound_stops_with_the_best_rule_so_far(monkeypatch, caplog):
    """Past ``_MAX_WORK`` the tuner stops between two sweeps, keeps the rule it has (never below argmax) and says so
    in one line naming a cheaper setting."""
    logits, labels = imbalanced(15, 400, 6)
    N, C = logits.shape
    monkeypatch.setattr(decision, "_MAX_WORK", 3 * (2 * N + C))  # three sweeps or so
    with caplog.at_level("WARNING", logger="east_hf.core.decision.rule"):
        rule = tune_logit_offsets(logits, labels, "fbeta")
    assert len(caplog.records) == 1 and "\n" not in caplog.records[0].message
    assert "work bound" in caplog.text and "in round 1" in caplog.text and "a subsample of about" in caplog.text
    assert rule.rounds == 1 and rule.score >= rule.baseline_score
    assert rule.score == library_score(logits + rule.offsets, labels, "fbeta")
    assert (rule.offsets[3:] == 0).all()  # classes 3.. never swept
    caplog.clear()
    monkeypatch.setattr(decision, "_MAX_WORK", C * (3 * N + 2 * C) + 1)  # more than any first round takes
    with caplog.at_level("WARNING", logger="east_hf.core.decision.rule"):
        rule = tune_logit_offsets(logits, labels, "fbeta")
    assert rule.rounds >= 2 and f"max_rounds={rule.rounds - 1} fits it" in caplog.text
    assert rule.score == library_score(logits + rule.offsets, labels, "fbeta") > rule.baseline_score
    monkeypatch.setattr(decision, "_MAX_WORK", 0)
    rule = tune_logit_offsets(logits, labels, "mcc")
    assert (rule.offsets == 0).all() and rule.score == rule.baseline_score


def test_near_ties_beyond_one_batch(monkeypatch):
    """Too many near-best candidates to rescore in one batch: the running sum ranks them; the guarantees hold."""
    monkeypatch.setattr(decision, "_BATCH_ELEMENTS", 8)
    logits, labels = imbalanced(10, 300, 5, ties=True)
    rule = tune_logit_offsets(logits, labels, "fbeta", beta=2.0)
    assert rule.score == library_score(logits + rule.offsets, labels, "fbeta", beta=2.0) > rule.baseline_score


def test_many_classes_check_on_counts(monkeypatch):
    """Above ``_LIBRARY_CHECK_ELEMENTS`` a change is checked on its (2C,) counts: the same rule here."""
    logits, labels = imbalanced(11, 400, 6)
    expected = tune_logit_offsets(logits, labels, "fbeta", average="macro")
    monkeypatch.setattr(decision, "_LIBRARY_CHECK_ELEMENTS", 0)
    rule = tune_logit_offsets(logits, labels, "fbeta", average="macro")
    assert torch.equal(rule.offsets, expected.offsets) and rule.score == expected.score


def test_many_classes_notice_and_refusal(monkeypatch, caplog):
    """Very many classes: a one-line notice naming a cheaper setting; a callable metric is refused in one line."""
    logits, labels = imbalanced(12, 100, 4)
    monkeypatch.setattr(decision, "_NOTICE_ELEMENTS", 100)
    with caplog.at_level("WARNING", logger="east_hf.core.decision.rule"):
        tune_logit_offsets(logits, labels, max_rounds=1)
    assert len(caplog.records) == 1 and "max_rounds=1" in caplog.text and "\n" not in caplog.records[0].message
    monkeypatch.setattr(decision, "_MAX_CALLABLE_CLASSES", 3)
    with pytest.raises(ValueError, match="at most 3 classes for a callable.*got 4; name the metric") as info:
        tune_logit_offsets(logits, labels, lambda cm: METRICS["mcc"](cm))
    assert "\n" not in str(info.value)


# ---- callables, ignore_index, dtypes --------------------------------------------------------------------------------


def test_callable_metric_traced_and_looped():
    """A callable (C, C) -> scalar: vmapped when it traces, looped when it does not; the same rule as the name."""
    logits, labels = imbalanced(5, 200, 4)
    named = tune_logit_offsets(logits, labels, "mcc")
    traced = tune_logit_offsets(logits, labels, lambda cm: METRICS["mcc"](cm))
    looped = tune_logit_offsets(logits, labels, lambda cm: METRICS["mcc"](cm).item())  # a float: vmap cannot
    for rule in (traced, looped):
        assert torch.equal(rule.offsets, named.offsets) and rule.score == named.score


def test_ignore_index_rows_are_dropped():
    logits, labels = imbalanced(6, 150, 3)
    extra = torch.randn(40, 3) * 5
    padded = tune_logit_offsets(torch.cat([logits, extra]), torch.cat([labels, torch.full((40,), -100)]))
    plain = tune_logit_offsets(logits, labels)
    assert torch.equal(padded.offsets, plain.offsets) and padded.score == plain.score
    custom = tune_logit_offsets(torch.cat([logits, extra]), torch.cat([labels, torch.full((40,), 7)]), ignore_index=7)
    assert torch.equal(custom.offsets, plain.offsets)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_logit_dtypes(dtype):
    logits, labels = imbalanced(7, 200, 4, dtype=dtype)
    rule = tune_logit_offsets(logits, labels)
    assert rule.offsets.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert rule.score == library_score(rule.apply(logits), labels) and rule.score >= rule.baseline_score


# ---- bad inputs: one-line errors ------------------------------------------------------------------------------------

LOGITS, LABELS = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])


@pytest.mark.parametrize(
    "args,kwargs,error,match",
    [
        ((LOGITS[0], LABELS), {}, ValueError, "shape \\(N, C\\)"),
        ((LOGITS[:, :1], LABELS), {}, ValueError, "C >= 2"),
        ((LOGITS.long(), LABELS), {}, TypeError, "floating-point logits"),
        ((LOGITS.tolist(), LABELS), {}, TypeError, "torch.Tensor"),
        ((LOGITS, LABELS[:5]), {}, ValueError, "labels of shape \\(6,\\)"),
        ((LOGITS, LABELS.float()), {}, TypeError, "integer class labels"),
        ((LOGITS, torch.tensor([0, 1, 2, 0, 1, 3])), {}, ValueError, "labels in \\[0, 2\\].*got 3"),
        ((LOGITS, torch.tensor([0, 1, 2, 0, 1, -1])), {}, ValueError, "got -1"),
        ((LOGITS, torch.full((6,), -100)), {}, ValueError, "at least one labelled row"),
        ((LOGITS.index_fill(0, torch.tensor([2]), float("nan")), LABELS), {}, ValueError, "finite logits"),
        ((LOGITS, LABELS, "f2"), {}, ValueError, "metric in"),
        ((LOGITS, LABELS, 3), {}, TypeError, "a name or a callable"),
        ((LOGITS, LABELS), dict(average="samples"), ValueError, "average in"),
        ((LOGITS, LABELS), dict(average="binary", pos_label=3), ValueError, "pos_label in \\[0, 2\\]"),
        ((LOGITS, LABELS), dict(beta=[1.0, 2.0]), ValueError, "3 per-class values"),
        ((LOGITS, LABELS), dict(beta=-1.0), ValueError, "beta > 0"),
        ((LOGITS, LABELS), dict(beta=[1.0, 2.0, 1.0], average="micro"), ValueError, "one beta"),
        ((LOGITS, LABELS), dict(max_rounds=0), ValueError, "max_rounds"),
    ],
)
def test_bad_inputs(args, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        tune_logit_offsets(*args, **kwargs)
    assert "\n" not in str(info.value)


# ---- folding into the classifier's bias -----------------------------------------------------------------------------


def test_fold_into_linear_bias():
    logits, labels = imbalanced(8, 200, 4)
    rule = tune_logit_offsets(logits, labels, "mcc")
    head = nn.Linear(16, 4)
    before = nn.Linear(16, 4)
    before.load_state_dict(head.state_dict())
    x = torch.randn(500, 16)
    returned = fold_offsets_into_bias(head, rule)
    assert returned is head.bias and not head.bias.grad_fn
    assert torch.equal(head(x).argmax(1), (before(x) + rule.offsets).argmax(1))
    bias = torch.zeros(4)
    fold_offsets_into_bias(bias, rule.offsets)
    assert torch.equal(bias, rule.offsets)


def test_fold_errors():
    offsets = torch.ones(4)
    with pytest.raises(ValueError, match="output bias") as info:
        fold_offsets_into_bias(nn.Linear(3, 4, bias=False), offsets)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="shape \\(5,\\)"):
        fold_offsets_into_bias(nn.Linear(3, 5), offsets)
    with pytest.raises(TypeError, match="DecisionRule"):
        fold_offsets_into_bias(nn.Linear(3, 4), [1.0] * 4)
    with pytest.raises(TypeError, match="bias tensor"):
        fold_offsets_into_bias("head", offsets)


def test_top2_update_matches_recomputation():
    """The incremental top-two after a column changes equals a fresh ``_top2``, ties in argmax's order included."""
    g = torch.Generator().manual_seed(1)
    z = torch.randint(0, 4, (500, 6), generator=g).float()  # many ties
    top = decision._top2(z)
    for k, shift in [(2, 1.0), (0, -2.0), (5, 3.0), (2, -1.0), (3, 0.0), (1, 0.5), (4, 1.0), (1, 2.0), (0, 9.0)]:
        z[:, k] += shift
        raised = shift >= 0 if k != 2 else None  # a raised column is updated without recomputing rows
        top = decision._update_top2(top, z[:, k], k, lambda rows: z[rows], raised)
        for mine, fresh in zip(top, decision._top2(z)):
            assert torch.equal(mine, fresh), (k, shift)
    assert torch.equal(top[1], z.argmax(1))
