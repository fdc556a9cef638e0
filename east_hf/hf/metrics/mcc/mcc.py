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
"""Multiclass (and per-label, multi-label) Matthews correlation coefficient; numpy only, the formula of east_hf's
confusion-matrix core."""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """
The Matthews correlation coefficient (MCC) of a multiclass confusion matrix (Gorodkin's R_K):
MCC = (c * s - sum_k t_k * p_k) / sqrt((s^2 - sum_k p_k^2) * (s^2 - sum_k t_k^2)),
with c the number of correct predictions, s the number of samples, t_k the number of references of class k and
p_k the number of predictions of class k. It ranges from -1 to +1: +1 is a perfect prediction, 0 no better than
chance (and the value when the denominator is zero, e.g. a single class), below 0 worse than chance. It uses the
whole confusion matrix and stays informative under class imbalance. It is one of the metrics that EAST (Evaluation
Aligned Surrogate Training) trains for, computed from the same confusion matrix with the same formula as east_hf's
core (`east_hf.core.mcc`), and equals scikit-learn's `matthews_corrcoef` on the same inputs. The "multilabel" config
(`evaluate.load("mcc", "multilabel")`, the config name evaluate's own `f1` uses) takes 0/1 indicator rows, one
column per label, computes the binary MCC of each label (scikit-learn's `matthews_corrcoef` of that column) and
averages it over labels (macro by default; weighted, micro, or None for the per-label values). The module needs
only numpy (besides evaluate and datasets), not east_hf.
"""


_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): Predicted labels; with the "multilabel" config, rows of 0/1 indicators (one
        column per label).
    references (`list` of `int`): Ground truth labels; with the "multilabel" config, rows of 0/1 indicators.
    sample_weight (`list` of `float`): Sample weights (one per row of the "multilabel" config). Defaults to None.
    average (`string`, "multilabel" only): How to average the per-label MCC. Defaults to `'macro'`.

        - 'macro': the unweighted mean over labels.
        - 'weighted': the mean weighted by support (the number of references of each label).
        - 'micro': the MCC of the 2x2 counts pooled over labels.
        - None: no average; `mcc` is the list of per-label values.

Returns:
    mcc (`float`): the Matthews correlation coefficient, from -1 to +1; higher is better (a list of per-label
        values for the "multilabel" config with `average=None`).

Examples:

    Example 1-A multiclass example.
        >>> import evaluate
        >>> mcc = evaluate.load("mcc")
        >>> results = mcc.compute(references=[1, 3, 2, 0, 3, 2], predictions=[1, 2, 2, 0, 3, 3])
        >>> print(round(results["mcc"], 4))
        0.5385

    Example 2-The same example with sample weights.
        >>> results = mcc.compute(references=[1, 3, 2, 0, 3, 2], predictions=[1, 2, 2, 0, 3, 3],
        ...                       sample_weight=[0.5, 3, 1, 1, 1, 2])
        >>> print(round(results["mcc"], 4))
        0.0978

    Example 3-A single class in references and predictions: the denominator is zero and MCC is 0.
        >>> print(mcc.compute(references=[1, 1, 1], predictions=[1, 1, 1]))
        {'mcc': 0.0}

    Example 4-Multi-label: the binary MCC of each label, averaged over labels, or per label.
        >>> multilabel_mcc = evaluate.load("mcc", "multilabel")
        >>> references = [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
        >>> predictions = [[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 0, 1]]
        >>> print(round(multilabel_mcc.compute(predictions=predictions, references=references)["mcc"], 4))
        0.5258
        >>> results = multilabel_mcc.compute(predictions=predictions, references=references, average=None)
        >>> print([round(m, 4) for m in results["mcc"]])
        [1.0, 0.5774, 0.0]
"""


_CITATION = """
@misc{li2025east,
    title={Aligning Multiclass Neural Network Classifier Criterion with Task Performance Metrics},
    author={Li, Deyuan and Lee, Taesoo Daniel and V{\\'a}zquez, Marynel and Tsoi, Nathan},
    note={Preprint},
    year={2025}
}
@article{gorodkin2004comparing,
    title={Comparing two K-category assignments by a K-category correlation coefficient},
    author={Gorodkin, Jan},
    journal={Computational Biology and Chemistry},
    volume={28},
    number={5-6},
    pages={367--374},
    year={2004}
}
"""


def matthews_from_confusion(confmat):
    """Gorodkin's R_K of a (C, C) confusion matrix (rows: references, columns: predictions); 0 when the
    denominator is 0, as scikit-learn."""
    t, p = confmat.sum(axis=1), confmat.sum(axis=0)  # references and predictions of each class
    c, s = confmat.trace(), confmat.sum()  # correct predictions, samples
    cov_tp = c * s - (t * p).sum()
    den = (s * s - (p * p).sum()) * (s * s - (t * t).sum())
    return float(cov_tp / np.sqrt(den)) if den > 0 else 0.0


MULTILABEL_AVERAGES = ("macro", "weighted", "micro", None)
CONFIG_NAMES = ("default", "binary", "multiclass", "multilabel")


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


def multilabel_mcc(predictions, references, sample_weight=None, average="macro"):
    """The binary MCC of each label of (N, L) indicator rows (its 2x2 confusion matrix), averaged over labels."""
    if average not in MULTILABEL_AVERAGES:
        raise ValueError(f"Expected average in {MULTILABEL_AVERAGES} for multilabel references, got {average!r}")
    predictions, references, sample_weight = indicator_rows(predictions, references, sample_weight)
    N, L = references.shape
    w = np.ones(N) if sample_weight is None else sample_weight
    cells = (references * 2 + predictions) + 4 * np.arange(L)  # (N, L): label k's cell (reference, prediction)
    weights = np.broadcast_to(w[:, None], (N, L))
    confmats = np.bincount(cells.ravel(), weights=weights.ravel(), minlength=4 * L).reshape(L, 2, 2)  # (L, 2, 2)
    if average == "micro":  # one 2x2 matrix pooled over labels
        return {"mcc": matthews_from_confusion(confmats.sum(axis=0))}
    values = np.array([matthews_from_confusion(c) for c in confmats])  # (L,)
    if average is None:
        return {"mcc": values.tolist()}
    support = confmats[:, 1, :].sum(axis=1)  # (L,) weighted references of each label
    if average == "weighted" and support.sum() > 0:
        return {"mcc": float((values * support).sum() / support.sum())}
    return {"mcc": float(values.mean())}  # macro; weighted without any reference falls back to it, as F-beta


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Mcc(evaluate.Metric):
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
            reference_urls=[
                "https://scikit-learn.org/stable/modules/generated/sklearn.metrics.matthews_corrcoef.html"
            ],
        )

    def _compute(self, predictions, references, sample_weight=None, average="macro"):
        if self.config_name == "multilabel":
            return multilabel_mcc(predictions, references, sample_weight, average)
        if average != "macro":
            raise ValueError(
                f"Expected no average for multiclass MCC (one coefficient of the whole confusion matrix; average is "
                f"for the 'multilabel' config), got average={average!r}"
            )
        references, predictions = np.asarray(references, dtype=np.int64), np.asarray(predictions, dtype=np.int64)
        if references.size == 0:
            raise ValueError("Expected at least one prediction, got none")
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != references.shape:
                raise ValueError(
                    f"Expected sample_weight of shape {references.shape}, got shape {sample_weight.shape}"
                )
        classes, index = np.unique(np.concatenate([references, predictions]), return_inverse=True)
        C, n = classes.size, references.size
        cells = index[:n] * C + index[n:]
        confmat = np.bincount(cells, weights=sample_weight, minlength=C * C).astype(np.float64).reshape(C, C)
        return {"mcc": matthews_from_confusion(confmat)}
