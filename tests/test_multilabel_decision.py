"""The per-label decision tuner (east_hf.core.decision.multilabel.tune_label_offsets) against a brute-force search
and scikit-learn: ties, coupled averages ending at a coordinate optimum, never below the untuned rule, and bad input
refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score, jaccard_score, matthews_corrcoef

from east_hf.core.decision.multilabel import tune_label_offsets
from east_hf.core.multilabel import multilabel_metric_from_statistics, multilabel_statistics

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning"),
    pytest.mark.filterwarnings("ignore:A single label was found:UserWarning"),
]


# ---- tune_label_offsets ----
def tuning_case(seed: int, n: int = 40, num_labels: int = 3, shift: float = 0.0):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, num_labels, generator=g) < 0.35).double()
    logits = (2 * y - 1) * 0.6 + torch.randn(n, num_labels, generator=g, dtype=torch.float64) + shift
    return logits, y


def sk_of(rule, logits, y, score, **kwargs):
    return score(y.long().numpy(), rule.predict(logits).numpy(), **kwargs)


@pytest.mark.parametrize("metric", ["f1", "mcc", "jaccard"])
def test_per_label_tuning_equals_a_brute_force_search(metric):
    logits, y = tuning_case(0, shift=-0.4)
    rule = tune_label_offsets(logits, y, metric, average=None)
    own = {"f1": lambda a, b: f1_score(a, b, zero_division=0.0), "mcc": matthews_corrcoef,
           "jaccard": lambda a, b: jaccard_score(a, b, zero_division=0.0)}[metric]  # fmt: skip
    for k in range(y.shape[1]):
        zk, yk = logits[:, k].numpy(), y[:, k].long().numpy()
        candidates = np.concatenate([zk - 1e-9, zk + 1e-9, [-np.inf, np.inf]])
        best = max(own(yk, (zk > t).astype(int)) for t in candidates)
        assert own(yk, rule.predict(logits)[:, k].numpy()) == pytest.approx(best, abs=1e-12)
    macro = tune_label_offsets(logits, y, "f1")
    assert macro.score == pytest.approx(sk_of(macro, logits, y, f1_score, average="macro", zero_division=0.0))
    assert macro.score > macro.baseline_score
    if metric == "f1":  # macro F1 is tuned label by label: the per-label optimum
        torch.testing.assert_close(macro.offsets, rule.offsets)


def test_ties_keep_the_offset_nearest_zero_and_the_untuned_rule_where_it_is_best():
    logits = torch.tensor([[3.0, -3.0], [2.0, -2.0], [-2.0, 2.0], [-3.0, 3.0]])
    labels = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    for average in ("macro", "micro", "samples"):
        rule = tune_label_offsets(logits, labels, average=average)
        assert rule.offsets.tolist() == [0.0, 0.0] and rule.score == rule.baseline_score == 1.0


COUPLED_SK = {
    ("fbeta", "micro"): lambda y, p: f1_score(y, p, average="micro", zero_division=0.0),
    ("fbeta", "samples"): lambda y, p: f1_score(y, p, average="samples", zero_division=0.0),
    ("jaccard", "micro"): lambda y, p: jaccard_score(y, p, average="micro", zero_division=0.0),
    ("jaccard", "samples"): lambda y, p: jaccard_score(y, p, average="samples", zero_division=0.0),
    ("accuracy", "samples"): accuracy_score,
    ("mcc", "micro"): lambda y, p: matthews_corrcoef(y.ravel(), p.ravel()),
}


@pytest.mark.parametrize("metric, average", list(COUPLED_SK))
def test_coupled_averages_improve_and_end_at_a_coordinate_optimum(metric, average):
    logits, y = tuning_case(1, n=30, shift=-1.0)  # most positives below 0: the untuned rule misses them
    rule = tune_label_offsets(logits, y, metric, average=average)
    assert rule.score > rule.baseline_score and rule.rounds >= 1
    assert rule.score == pytest.approx(COUPLED_SK[metric, average](y.long().numpy(), rule.predict(logits).numpy()))

    def score_of(offsets):
        stats = multilabel_statistics(((logits + offsets) > 0).double(), y)
        return multilabel_metric_from_statistics(stats, metric, average=average).item()

    # no single label's threshold does better (the ascent stopped at a coordinate optimum)
    for k in range(y.shape[1]):
        for t in torch.cat([logits[:, k] - 1e-7, logits[:, k] + 1e-7]):
            offsets = rule.offsets.double().clone()
            offsets[k] = -t
            assert score_of(offsets) <= rule.score + 1e-12
    # ignored entries count for nothing: the rule tuned with -100 where the labels were is scored without them
    y[3, 1] = y[7, 0] = -100
    masked = tune_label_offsets(logits, y, metric, average=average)
    assert masked.score == pytest.approx(score_of(masked.offsets.double())) and masked.score >= masked.baseline_score


@pytest.mark.parametrize("seed", range(4))
def test_tuning_is_never_below_the_untuned_rule(seed):
    logits, y = tuning_case(seed + 10, n=25, num_labels=4, shift=float(seed - 2))
    for metric, average in [("fbeta", "macro"), ("fbeta", "weighted"), ("fbeta", "micro"), ("fbeta", "samples"),
                            ("mcc", "macro"), ("accuracy", "macro"), ("precision", "micro")]:  # fmt: skip
        rule = tune_label_offsets(logits, y, metric, average=average)
        assert rule.score >= rule.baseline_score
        assert rule.offsets.dtype == torch.float64 and rule.offsets.shape == (4,)
    half = tune_label_offsets(logits.half(), y)
    assert half.offsets.dtype == torch.float32 and half.score >= half.baseline_score


def test_tuning_refuses_bad_input_in_one_line():
    logits, y = tuning_case(0)
    for call, match in [
        (lambda: tune_label_offsets(logits, y[:, :2]), r"Expected multi-label labels of shape \(40, 3\)"),
        (lambda: tune_label_offsets(logits, y, average="binary"), r"got 'binary'"),
        (lambda: tune_label_offsets(logits, y, "mcc", average="samples"), r"for metric='mcc'"),
        (lambda: tune_label_offsets(logits, y, beta=[1.0, 2.0, 3.0], average="samples"), r"one beta"),
        (lambda: tune_label_offsets(logits * torch.nan, y), r"Expected finite logits"),
    ]:
        with pytest.raises(ValueError, match=match) as error:
            call()
        assert "\n" not in str(error.value)
