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
"""Macro F-beta metric with one beta per class, computed by east_hf's functional core."""

import datasets
import evaluate

from east_hf.hf.metrics.labels import fbeta_report

_DESCRIPTION = """
F-beta weighs recall beta times as much as precision:
F-beta = (1 + beta^2) * TP / ((1 + beta^2) * TP + beta^2 * FN + FP).
This metric computes it per class, with one beta for all classes or one beta per class (beta < 1 favours
precision, beta > 1 recall), and averages it over classes: macro (unweighted mean), weighted (by support),
micro (pooled counts) or binary (the positive class only). It is the metric that EAST (Evaluation Aligned
Surrogate Training) trains for, computed by the same confusion-matrix code, and equals scikit-learn's
`fbeta_score` / `precision_recall_fscore_support` on the same inputs.
"""


_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): Predicted labels.
    references (`list` of `int`): Ground truth labels.
    beta (`float` or `list` of `float`): F-beta's beta, one for all classes, or one per class in the order of
        `labels` (or of the sorted labels present when `labels` is None). Each must be > 0. Defaults to 1.0.
    average (`string`): How to average over classes. Defaults to `'macro'`.

        - 'macro': the unweighted mean over the scored labels.
        - 'weighted': the mean weighted by support (the number of references of each label).
        - 'micro': pool TP, FP and FN over the scored labels (needs a single beta).
        - 'binary': the score of `pos_label` alone (one-vs-rest if there are more than two labels).
    labels (`list` of `int`): The labels to score, in this order. Labels absent from the data are scored
        (their precision, recall or F-beta takes `zero_division`), labels present but not listed still count as
        errors of the listed ones. Defaults to None: the sorted union of the labels in `references` and
        `predictions`, as scikit-learn.
    pos_label (`int`): The label scored by `average='binary'`. Defaults to 1.
    zero_division (`float`): The value of a ratio whose denominator is zero, 0.0 or 1.0. Defaults to 0.0.
    sample_weight (`list` of `float`): Sample weights. Defaults to None.

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
        >>> from east_hf.hf.metrics import load_metric
        >>> macro_fbeta = load_metric("macro_fbeta")
        >>> results = macro_fbeta.compute(predictions=[0, 2, 1, 0, 0, 1], references=[0, 1, 2, 0, 1, 2])
        >>> print(round(results["fbeta"], 4), results["labels"])
        0.2667 [0, 1, 2]

    Example 2-One beta per class: recall matters twice as much for class 0.
        >>> results = macro_fbeta.compute(predictions=[0, 0, 1, 1, 2, 2], references=[0, 1, 1, 1, 2, 0], beta=[2.0, 1.0, 1.0])
        >>> print(round(results["fbeta"], 4), [round(f, 4) for f in results["fbeta_per_class"]])
        0.6556 [0.5, 0.8, 0.6667]

    Example 3-Labels given: the absent label 3 is scored (its F-beta is `zero_division`, here 0).
        >>> results = macro_fbeta.compute(predictions=[0, 1, 1], references=[0, 1, 0], labels=[0, 1, 3])
        >>> print(round(results["fbeta"], 4), [round(f, 4) for f in results["fbeta_per_class"]])
        0.4444 [0.6667, 0.6667, 0.0]

    Example 4-Binary F-beta of the positive label, with beta = 0.5 (precision matters more).
        >>> results = macro_fbeta.compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0], beta=0.5, average="binary")
        >>> print(round(results["fbeta"], 4), results["precision"], results["recall"])
        0.5556 0.5 1.0
"""


_CITATION = """
@misc{li2025east,
    title={Aligning Multiclass Neural Network Classifier Criterion with Task Performance Metrics},
    author={Li, Deyuan and Lee, Taesoo Daniel and V{\\'a}zquez, Marynel and Tsoi, Nathan},
    note={Preprint},
    year={2025}
}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MacroFbeta(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
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
        return fbeta_report(
            references, predictions, beta, average, labels, pos_label, zero_division, sample_weight=sample_weight
        )
