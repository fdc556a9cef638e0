"""The multi-label statistics of the core (east_hf.core.multilabel) against scikit-learn: the metrics of hard
predictions for every average, degenerate sets, a beta per label, MCC and subset accuracy, sample weights, ignored
entries, statistics additive over batches, and bad input refused in one line."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    fbeta_score,
    jaccard_score,
    matthews_corrcoef,
    precision_score,
    recall_score,
)

from east_hf.core.multilabel import multilabel_metric_from_statistics, multilabel_statistics, soft_label_predictions
from east_hf.core.multilabel_losses import MultiLabelEASTLoss

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning"),
    pytest.mark.filterwarnings("ignore:A single label was found:UserWarning"),
]


SK_AVERAGES = ["macro", "micro", "weighted", "samples", None]


def indicator_arrays(seed: int, n: int = 60, num_labels: int = 6):
    """Random (n, L) 0/1 labels and predictions with a rare label, a label never true, a label never predicted and
    empty rows (no true and no predicted label)."""
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.2, 0.6, num_labels)
    rates[0] = 0.04  # rare
    y = (rng.random((n, num_labels)) < rates).astype(np.int64)
    p = np.where(rng.random((n, num_labels)) < 0.7, y, 1 - y)
    y[:, 1] = 0  # never true
    p[:, 2] = 0  # never predicted
    y[:4], p[:4] = 0, 0  # empty rows
    return y, p


def stats_of(y, p, **kwargs):
    return multilabel_statistics(torch.tensor(p, dtype=torch.float64), torch.tensor(y, dtype=torch.float64), **kwargs)


def ours(stats, metric, **kwargs):
    value = multilabel_metric_from_statistics(stats, metric, **kwargs)
    return value.numpy() if value.ndim else value.item()


SK_SCORES = {
    "fbeta": lambda y, p, **kw: fbeta_score(y, p, beta=0.5, **kw),
    "f1": f1_score,
    "precision": precision_score,
    "recall": recall_score,
    "jaccard": jaccard_score,
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("zero_division", [0.0, 1.0])
@pytest.mark.parametrize("average", SK_AVERAGES)
@pytest.mark.parametrize("metric", list(SK_SCORES))
def test_metrics_of_hard_predictions_equal_scikit_learn(metric, average, zero_division, seed):
    y, p = indicator_arrays(seed)
    beta = 0.5 if metric == "fbeta" else 1.0
    expected = SK_SCORES[metric](y, p, average=average, zero_division=zero_division)
    if average == "samples" and metric in ("precision", "recall"):
        # a row's precision is its F-beta at beta = 0, its recall the limit beta -> inf
        stats = stats_of(y, p, samples_beta=0.0 if metric == "precision" else math.inf, zero_division=zero_division)
        got = ours(stats, "fbeta", average="samples", zero_division=zero_division)
        with pytest.raises(ValueError, match=r"samples_beta"):
            multilabel_metric_from_statistics(stats, metric, average="samples")
    else:
        stats = stats_of(y, p, samples_beta=beta, zero_division=zero_division)
        got = ours(stats, metric, beta=beta, average=average, zero_division=zero_division)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("zero_division", [0.0, 1.0])
@pytest.mark.parametrize("case", ["no positive", "nothing predicted", "all empty"])
def test_degenerate_sets_follow_scikit_learn(case, zero_division):
    y, p = indicator_arrays(6, n=12, num_labels=3)
    if case in ("no positive", "all empty"):
        y[:] = 0
    if case in ("nothing predicted", "all empty"):
        p[:] = 0
    stats = stats_of(y, p, zero_division=zero_division)
    for metric, average in itertools.product(SK_SCORES, SK_AVERAGES):
        if average == "samples" and metric in ("precision", "recall"):
            continue
        expected = SK_SCORES[metric](y, p, average=average, zero_division=zero_division)
        beta = 0.5 if metric == "fbeta" else 1.0
        got = ours(stats_of(y, p, samples_beta=beta, zero_division=zero_division), metric, beta=beta,
                   average=average, zero_division=zero_division)  # fmt: skip
        np.testing.assert_allclose(got, expected, atol=1e-12, err_msg=f"{metric} {average}")
    assert ours(stats, "accuracy") == accuracy_score(y, p)


@pytest.mark.parametrize("average", ["macro", "weighted", None])
def test_per_label_beta_equals_scikit_learn_label_by_label(average):
    y, p = indicator_arrays(3)
    betas = [0.5, 1.0, 2.0, 0.25, 1.0, 3.0]
    per_label = np.array([fbeta_score(y[:, k], p[:, k], beta=b, zero_division=0.0) for k, b in enumerate(betas)])
    support = y.sum(0)
    expected = {"macro": per_label.mean(), "weighted": np.average(per_label, weights=support), None: per_label}
    got = ours(stats_of(y, p), "fbeta", beta=betas, average=average)
    np.testing.assert_allclose(got, expected[average], rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_mcc_per_label_and_its_averages_and_subset_accuracy_equal_scikit_learn(seed):
    y, p = indicator_arrays(seed)
    stats = stats_of(y, p)
    per_label = np.array([matthews_corrcoef(y[:, k], p[:, k]) for k in range(y.shape[1])])
    np.testing.assert_allclose(ours(stats, "mcc", average=None), per_label, atol=1e-12)
    assert ours(stats, "mcc", average="macro") == pytest.approx(per_label.mean(), abs=1e-12)
    assert ours(stats, "mcc", average="weighted") == pytest.approx(np.average(per_label, weights=y.sum(0)), abs=1e-12)
    assert ours(stats, "mcc", average="micro") == pytest.approx(matthews_corrcoef(y.ravel(), p.ravel()), abs=1e-12)
    for average in ("macro", "micro", "samples", None):
        assert ours(stats, "accuracy", average=average) == pytest.approx(accuracy_score(y, p), abs=1e-12)


def test_sample_weights_match_scikit_learn():
    y, p = indicator_arrays(4)
    w = np.random.default_rng(0).uniform(0.1, 2.0, len(y))
    stats = stats_of(y, p, sample_weight=torch.tensor(w))
    for average in SK_AVERAGES:
        expected = f1_score(y, p, average=average, sample_weight=w, zero_division=0.0)
        np.testing.assert_allclose(ours(stats, "f1", average=average), expected, rtol=1e-12)
    assert ours(stats, "accuracy") == pytest.approx(accuracy_score(y, p, sample_weight=w), rel=1e-12)


def test_ignored_entries_count_for_nothing():
    """Entries labelled -100 drop out: each label's scores are scikit-learn's on its labelled rows, a row's on its
    labelled entries."""
    y, p = indicator_arrays(5)
    rng = np.random.default_rng(1)
    ignored = rng.random(y.shape) < 0.2
    ignored[10] = True  # a row with no labelled entry counts for nothing in "samples"
    y_ignored = np.where(ignored, -100, y)
    stats = stats_of(y_ignored, p)
    for k in range(y.shape[1]):
        keep = ~ignored[:, k]
        yk, pk = y[keep, k], p[keep, k]
        assert ours(stats, "f1", average=None)[k] == pytest.approx(f1_score(yk, pk, zero_division=0.0), abs=1e-12)
        assert ours(stats, "mcc", average=None)[k] == pytest.approx(matthews_corrcoef(yk, pk), abs=1e-12)
        assert ours(stats, "jaccard", average=None)[k] == pytest.approx(jaccard_score(yk, pk, zero_division=0.0))
    rows = [r for r in range(len(y)) if (~ignored[r]).any()]
    f_rows = [f1_score(y[r, ~ignored[r]], p[r, ~ignored[r]], zero_division=0.0) for r in rows]
    assert ours(stats, "f1", average="samples") == pytest.approx(np.mean(f_rows), abs=1e-12)
    exact = [np.array_equal(y[r, ~ignored[r]], p[r, ~ignored[r]]) for r in rows]
    assert ours(stats, "accuracy") == pytest.approx(np.mean(exact), abs=1e-12)
    # the ignored entries' predictions change nothing
    flipped = np.where(ignored, 1 - p, p)
    torch.testing.assert_close(stats_of(y_ignored, flipped), stats)


def test_statistics_are_additive_over_batches():
    torch.manual_seed(0)
    logits = torch.randn(50, 5, dtype=torch.float64)
    labels = (torch.rand(50, 5) < 0.3).double()
    labels[torch.rand(50, 5) < 0.1] = -100
    w = torch.rand(50, dtype=torch.float64)
    soft = soft_label_predictions(logits, 0.1)
    whole = multilabel_statistics(soft, labels, w, samples_beta=2.0)
    parts = sum(multilabel_statistics(soft[i : i + 7], labels[i : i + 7], w[i : i + 7], samples_beta=2.0)
                for i in range(0, 50, 7))  # fmt: skip
    torch.testing.assert_close(parts, whole)
    assert whole.shape == (4, 6) and whole.dtype == torch.float64
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert multilabel_statistics(soft.bfloat16(), labels).dtype == torch.float32


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: stats_of(np.full((3, 2), 2), np.zeros((3, 2))), r"Expected multi-label labels of 0, 1 .*got 2"),
        (lambda: stats_of(np.zeros((3, 2)), np.zeros((3, 3))), r"Expected multi-label labels of shape \(3, 3\)"),
        (lambda: stats_of(np.zeros((3, 2)), np.full((3, 2), 3.0)), r"Expected predictions in \[0, 1\]"),
        (lambda: ours(torch.zeros(4, 3), "fbeta", beta=[1, 2, 3]), r"Expected beta as a float or 2 per-class"),
        (lambda: ours(torch.zeros(4, 3), "fbeta", beta=[1, 2], average="samples"), r"one beta for average='samples'"),
        (lambda: ours(torch.zeros(4, 3), "fbeta", beta=[1, 2], average="micro"), r"one beta for average='micro'"),
        (lambda: ours(torch.zeros(4, 3), "mcc", average="samples"), r"for metric='mcc'.*got 'samples'"),
        (lambda: ours(torch.zeros(4, 3), "f1", average="binary"), r"\('macro', 'micro', 'weighted', 'samples'\)"),
        (lambda: ours(torch.zeros(3, 3), "f1"), r"Expected multi-label statistics of shape \(4, L \+ 1\)"),
        (lambda: MultiLabelEASTLoss(beta=[1.0, 2.0], average="samples"), r"one beta for average='samples'"),
        (lambda: MultiLabelEASTLoss(beta=[1.0, 2.0], num_labels=3), r"Expected beta as a float or 3"),
        (lambda: MultiLabelEASTLoss(average="binary"), r"got 'binary'"),
        (lambda: MultiLabelEASTLoss(metric="accuracy"), r"Expected metric in"),
    ],
)
def test_bad_input_is_refused_in_one_line(call, match):
    with pytest.raises(ValueError, match=match) as error:
        call()
    assert "\n" not in str(error.value)
