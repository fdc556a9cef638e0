# Copyright 2025 The east_hf authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Macro F-beta metric with one beta per class (or per label, for multi-label references); numpy only, the formulas
of east_hf's confusion-matrix core."""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """
F-beta weighs recall beta times as much as precision:
F-beta = (1 + beta^2) * TP / ((1 + beta^2) * TP + beta^2 * FN + FP).
This metric computes it per class, with one beta for all classes or one beta per class (beta < 1 favours
precision, beta > 1 recall), and averages it over classes: macro (unweighted mean), weighted (by support),
micro (pooled counts) or binary (the positive class only). It is the metric that EAST (Evaluation Aligned
Surrogate Training) trains for, computed from the same confusion counts with the same formulas as east_hf's core
(`east_hf.core.fbeta`), and equals scikit-learn's `fbeta_score` / `precision_recall_fscore_support` on the same
inputs. The "multilabel" config (`evaluate.load("macro_fbeta", "multilabel")`, the config name evaluate's own
`f1` uses) takes 0/1 indicator rows, one column per label, scores F-beta per label (one beta per label allowed)
and averages it over labels (macro, weighted, micro, samples, or None for the per-label values), equal to
scikit-learn's `fbeta_score` on indicator arrays. The module needs only numpy (besides evaluate and datasets), not
east_hf.
"""


_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): Predicted labels; with the "multilabel" config, rows of 0/1 indicators (one
        column per label).
    references (`list` of `int`): Ground truth labels; with the "multilabel" config, rows of 0/1 indicators.
    beta (`float` or `list` of `float`): F-beta's beta, one for all classes, or one per class in the order of
        `labels` (or of the sorted labels present when `labels` is None). Each must be > 0. Defaults to 1.0.
    average (`string`): How to average over classes. Defaults to `'macro'`.

        - 'macro': the unweighted mean over the scored labels.
        - 'weighted': the mean weighted by support (the number of references of each label).
        - 'micro': pool TP, FP and FN over the scored labels (needs a single beta).
        - 'binary': the score of `pos_label` alone (one-vs-rest if there are more than two labels).
        - 'samples' ("multilabel" only): the mean over rows of each row's F-beta over its labels (needs a single
          beta); a row with no reference and no predicted label scores `zero_division`, as scikit-learn.
        - None ("multilabel" only): no average; `fbeta`, `precision` and `recall` are the per-label lists.
    labels (`list` of `int`): The labels to score, in this order. Labels absent from the data are scored
        (their precision, recall or F-beta takes `zero_division`), labels present but not listed still count as
        errors of the listed ones. Defaults to None: the sorted union of the labels in `references` and
        `predictions`, as scikit-learn. With the "multilabel" config: the columns to score, in this order
        (default: all).
    pos_label (`int`): The label scored by `average='binary'`. Defaults to 1. Not used by the "multilabel" config.
    zero_division (`float`): The value of a ratio whose denominator is zero, 0.0 or 1.0. Defaults to 0.0.
    sample_weight (`list` of `float`): Sample weights (one per row of the "multilabel" config). Defaults to None.

Returns:
    fbeta (`float`): F-beta averaged as `average` says; 0 to 1, higher is better.
    precision (`float`): precision averaged the same way.
    recall (`float`): recall averaged the same way.
    fbeta_per_class (`list` of `float`): F-beta of each label in `labels` (with that label's beta).
    precision_per_class (`list` of `float`): precision of each label in `labels`.
    recall_per_class (`list` of `float`): recall of each label in `labels`.
    labels (`list` of `int`): the scored labels, in the order of the per-class lists.

Examples:

    Example 1-Macro F1 of a three-class problem.
        >>> import evaluate
        >>> macro_fbeta = evaluate.load("macro_fbeta")
        >>> results = macro_fbeta.compute(predictions=[0, 2, 1, 0, 0, 1], references=[0, 1, 2, 0, 1, 2])
        >>> print(round(results["fbeta"], 4), results["labels"])
        0.2667 [0, 1, 2]

    Example 2-One beta per class: recall matters twice as much for class 0.
        >>> results = macro_fbeta.compute(predictions=[0, 0, 1, 1, 2, 2], references=[0, 1, 1, 1, 2, 0],
        ...                               beta=[2.0, 1.0, 1.0])
        >>> print(round(results["fbeta"], 4), [round(f, 4) for f in results["fbeta_per_class"]])
        0.6556 [0.5, 0.8, 0.6667]

    Example 3-Labels given: the absent label 3 is scored (its F-beta is `zero_division`, here 0).
        >>> results = macro_fbeta.compute(predictions=[0, 1, 1], references=[0, 1, 0], labels=[0, 1, 3])
        >>> print(round(results["fbeta"], 4), [round(f, 4) for f in results["fbeta_per_class"]])
        0.4444 [0.6667, 0.6667, 0.0]

    Example 4-Binary F-beta of the positive label, with beta = 0.5 (precision matters more).
        >>> results = macro_fbeta.compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0], beta=0.5,
        ...                               average="binary")
        >>> print(round(results["fbeta"], 4), results["precision"], results["recall"])
        0.5556 0.5 1.0

    Example 5-Multi-label: each row holds several labels; macro F1 over the three labels, and the samples average.
        >>> multilabel_fbeta = evaluate.load("macro_fbeta", "multilabel")
        >>> references = [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
        >>> predictions = [[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 0, 1]]
        >>> results = multilabel_fbeta.compute(predictions=predictions, references=references)
        >>> print(round(results["fbeta"], 4), [round(f, 4) for f in results["fbeta_per_class"]])
        0.7222 [1.0, 0.6667, 0.5]
        >>> results = multilabel_fbeta.compute(predictions=predictions, references=references, average="samples")
        >>> print(round(results["fbeta"], 4))
        0.75
"""


_CITATION = """
@misc{li2025east,
    title={Aligning Multiclass Neural Network Classifier Criterion with Task Performance Metrics},
    author={Li, Deyuan and Lee, Taesoo Daniel and V{\\'a}zquez, Marynel and Tsoi, Nathan},
    note={Preprint},
    year={2025}
}
"""


AVERAGES = ("macro", "weighted", "micro", "binary")
MULTILABEL_AVERAGES = ("macro", "weighted", "micro", "samples", None)
CONFIG_NAMES = ("default", "binary", "multiclass", "multilabel")


def scored_labels(references, predictions, labels, average, pos_label):
    """(K,) the labels to score, in order: ``labels`` as given, else the sorted labels present in ``references`` or
    ``predictions``; scikit-learn's rules for ``pos_label`` with ``average='binary'``."""
    present = np.union1d(references, predictions)  # sorted
    if labels is not None:
        scored = np.asarray(labels, dtype=np.int64).reshape(-1)
        if scored.size == 0 or np.unique(scored).size != scored.size:
            raise ValueError(f"Expected labels as a non-empty list of distinct labels, got {scored.tolist()}")
        if average == "binary" and pos_label not in scored:
            raise ValueError(
                f"Expected pos_label among labels {scored.tolist()} for average='binary', got {pos_label}"
            )
        return scored
    if average == "binary" and pos_label not in present:
        if present.size >= 2:
            raise ValueError(f"pos_label={pos_label} is not a valid label. It should be one of {present.tolist()}")
        return np.union1d(present, [pos_label])  # scikit-learn scores pos_label alone: zero_division applies
    return present


def per_label_betas(beta, scored, average):
    """(K,) one beta per scored label from a float or a list aligned with ``scored``; each > 0 and finite."""
    if isinstance(beta, bool):
        raise TypeError("Expected beta as a positive float or one value per scored label, got bool")
    betas = np.asarray(beta, dtype=np.float64)
    if betas.ndim == 0:
        betas = np.full(scored.size, float(betas))
    elif betas.size != scored.size:
        raise ValueError(
            f"Expected beta as a float or one value per scored label {scored.tolist()}, got {betas.size} values"
        )
    betas = betas.reshape(-1)
    if not np.all(np.isfinite(betas) & (betas > 0)):
        raise ValueError(f"Expected every beta > 0 and finite, got {betas.tolist()}")
    if average == "micro" and np.unique(betas).size > 1:
        raise ValueError(f"Expected one beta for average='micro' (classes are pooled), got {betas.tolist()}")
    if average == "samples" and np.unique(betas).size > 1:
        raise ValueError(f"Expected one beta for average='samples' (each row pools its labels), got {betas.tolist()}")
    return betas


def label_counts(references, predictions, scored, sample_weight=None):
    """(K,) weighted true positives, predictions and references of each scored label.

    A label left out of ``scored`` falls into one extra row and column of the confusion matrix ("the rest"): it
    still counts as a false positive or false negative of the scored labels, as in scikit-learn.
    """
    K = scored.size
    order = np.argsort(scored, kind="stable")
    ordered = scored[order]

    def index(x):  # position in ``scored``, or K for any other label
        pos = np.minimum(np.searchsorted(ordered, x), K - 1)
        return np.where(ordered[pos] == x, order[pos], K)

    cells = index(references) * (K + 1) + index(predictions)
    confmat = np.bincount(cells, weights=sample_weight, minlength=(K + 1) ** 2).astype(np.float64)
    confmat = confmat.reshape(K + 1, K + 1)  # (K + 1, K + 1): rows are references, columns predictions
    return confmat.diagonal()[:K], confmat.sum(axis=0)[:K], confmat.sum(axis=1)[:K]


def fbeta_precision_recall(tp, predicted, support, beta, zero_division):
    """(3, ...) F-beta = (1 + b^2) TP / (b^2 (TP + FN) + TP + FP), precision and recall; ``zero_division`` where a
    denominator is 0."""

    def divide(num, den):
        return np.where(den == 0, zero_division, num / np.where(den == 0, 1.0, den))

    b2 = np.asarray(beta, dtype=np.float64) ** 2
    return np.stack([divide((1 + b2) * tp, b2 * support + predicted), divide(tp, predicted), divide(tp, support)])


def weighted_mean(values, weights):
    """(3, K) -> (3,): the mean over K weighted by ``weights`` (K,), the plain mean where they are None or sum to
    0, as scikit-learn."""
    if weights is None or weights.sum() == 0:
        return values.mean(axis=1)
    return (values * weights).sum(axis=1) / weights.sum()


def indicator_rows(predictions, references, sample_weight=None):
    """(N, L) int64 indicator arrays of predictions and references (0/1 rows, one column per label), checked; and
    the (N,) float64 sample weights or None."""
    lengths = sorted({len(row) for row in references} | {len(row) for row in predictions})
    if len(lengths) > 1:
        raise ValueError(
            f"Expected every row of predictions and references with one entry per label, got rows of {lengths} labels"
        )
    references, predictions = np.asarray(references, dtype=np.int64), np.asarray(predictions, dtype=np.int64)
    if references.ndim != 2 or references.size == 0:
        raise ValueError(
            f"Expected at least one row with at least one label, got references of shape {references.shape}"
        )
    if predictions.shape != references.shape:
        raise ValueError(
            f"Expected predictions of shape {references.shape} like the references, got {predictions.shape}"
        )
    values = np.union1d(references, predictions)
    if not np.isin(values, (0, 1)).all():
        raise ValueError(f"Expected predictions and references as 0/1 indicator rows, got values {values.tolist()}")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != references.shape[:1]:
            raise ValueError(
                f"Expected sample_weight of shape {references.shape[:1]}, got shape {sample_weight.shape}"
            )
    return predictions, references, sample_weight


def scored_columns(labels, num_labels):
    """(K,) the label columns to score, in order: ``labels`` as given (distinct, in [0, L)), else all L."""
    if labels is None:
        return np.arange(num_labels)
    scored = np.asarray(labels, dtype=np.int64).reshape(-1)
    if scored.size == 0 or np.unique(scored).size != scored.size or scored.min() < 0 or scored.max() >= num_labels:
        raise ValueError(
            f"Expected labels as distinct column indices in [0, {num_labels - 1}] for multilabel references, got "
            f"{scored.tolist()}"
        )
    return scored


def multilabel_report(predictions, references, beta, average, labels, zero_division, sample_weight):
    """F-beta, precision and recall of (N, L) indicator rows per label and averaged over labels (or over rows for
    ``average='samples'``), as scikit-learn's ``precision_recall_fscore_support`` on indicator arrays."""
    if average not in MULTILABEL_AVERAGES:
        raise ValueError(f"Expected average in {MULTILABEL_AVERAGES} for multilabel references, got {average!r}")
    predictions, references, sample_weight = indicator_rows(predictions, references, sample_weight)
    scored = scored_columns(labels, references.shape[1])
    predictions, references = predictions[:, scored], references[:, scored]  # (N, K)
    betas = per_label_betas(beta, scored, average)
    w = np.ones(references.shape[0]) if sample_weight is None else sample_weight
    weighted = (references * predictions, predictions, references)  # TP, predicted, support indicators
    tp, predicted, support = (np.einsum("n,nk->k", w, x.astype(np.float64)) for x in weighted)  # (K,) each
    values = fbeta_precision_recall(tp, predicted, support, betas, zero_division)  # (3, K)
    if average is None:
        averaged = values
    elif average == "micro":  # TP, FP and FN pooled over the scored labels
        averaged = fbeta_precision_recall(tp.sum(), predicted.sum(), support.sum(), betas[0], zero_division)
    elif average == "samples":  # each row's own F-beta, precision and recall over its labels, weighted by row
        rows = (w * x.sum(axis=1) for x in weighted)  # (N,) each: weighted as scikit-learn's samplewise counts
        averaged = weighted_mean(fbeta_precision_recall(*rows, betas[0], zero_division), sample_weight)
    else:
        averaged = weighted_mean(values, support if average == "weighted" else None)
    return result(averaged, values, scored, per_label=average is None)


def result(averaged, values, scored, per_label: bool = False) -> dict:
    """The module's output: the averaged F-beta, precision and recall (lists per label where ``per_label``), each
    per class (or label), and the classes scored."""
    f, p, r = (v.tolist() if per_label else float(v) for v in averaged)
    return {
        "fbeta": f,
        "precision": p,
        "recall": r,
        "fbeta_per_class": values[0].tolist(),
        "precision_per_class": values[1].tolist(),
        "recall_per_class": values[2].tolist(),
        "labels": scored.tolist(),
    }


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MacroFbeta(evaluate.Metric):
    def _info(self):
        if self.config_name not in CONFIG_NAMES:
            raise ValueError(f"Expected a config name in {CONFIG_NAMES}, got {self.config_name!r}")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("int32")),
                    "references": datasets.Sequence(datasets.Value("int32")),
                }
                if self.config_name == "multilabel"
                else {
                    "predictions": datasets.Value("int64"),
                    "references": datasets.Value("int64"),
                }
            ),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.fbeta_score.html"],
        )

    def _compute(
        self,
        predictions,
        references,
        beta=1.0,
        average="macro",
        labels=None,
        pos_label=1,
        zero_division=0.0,
        sample_weight=None,
    ):
        if (
            isinstance(zero_division, bool)
            or not isinstance(zero_division, (int, float))
            or not 0 <= zero_division <= 1
        ):
            raise ValueError(f"Expected zero_division as a float in [0, 1], got {zero_division!r}")
        if self.config_name == "multilabel":
            return multilabel_report(
                predictions, references, beta, average, labels, float(zero_division), sample_weight
            )
        if average not in AVERAGES:
            raise ValueError(f"Expected average in {AVERAGES}, got {average!r}")
        references, predictions = np.asarray(references, dtype=np.int64), np.asarray(predictions, dtype=np.int64)
        if references.size == 0:
            raise ValueError("Expected at least one prediction, got none")
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != references.shape:
                raise ValueError(
                    f"Expected sample_weight of shape {references.shape}, got shape {sample_weight.shape}"
                )
        scored = scored_labels(references, predictions, labels, average, pos_label)
        betas = per_label_betas(beta, scored, average)
        tp, predicted, support = label_counts(references, predictions, scored, sample_weight)
        values = fbeta_precision_recall(tp, predicted, support, betas, float(zero_division))  # (3, K)
        if average == "micro":  # TP, FP and FN pooled over the scored labels
            averaged = fbeta_precision_recall(tp.sum(), predicted.sum(), support.sum(), betas[0], float(zero_division))
        elif average == "binary":
            averaged = values[:, list(scored).index(pos_label)]
        elif average == "weighted" and support.sum() > 0:
            averaged = (values * support).sum(axis=1) / support.sum()
        else:  # macro; weighted without any reference of a scored label falls back to it, as scikit-learn
            averaged = values.mean(axis=1)
        return result(averaged, values, scored)
