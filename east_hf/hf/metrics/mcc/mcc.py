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
"""Multiclass Matthews correlation coefficient, computed by east_hf's functional core."""

import datasets
import evaluate

from east_hf.hf.metrics.labels import mcc_report

_DESCRIPTION = """
The Matthews correlation coefficient (MCC) of a multiclass confusion matrix (Gorodkin's R_K):
MCC = (c * s - sum_k t_k * p_k) / sqrt((s^2 - sum_k p_k^2) * (s^2 - sum_k t_k^2)),
with c the number of correct predictions, s the number of samples, t_k the number of references of class k and
p_k the number of predictions of class k. It ranges from -1 to +1: +1 is a perfect prediction, 0 no better than
chance (and the value when the denominator is zero, e.g. a single class), below 0 worse than chance. It uses the
whole confusion matrix and stays informative under class imbalance. It is one of the metrics that EAST (Evaluation
Aligned Surrogate Training) trains for, computed by the same confusion-matrix code, and equals scikit-learn's
`matthews_corrcoef` on the same inputs.
"""


_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): Predicted labels.
    references (`list` of `int`): Ground truth labels.
    sample_weight (`list` of `float`): Sample weights. Defaults to None.

Returns:
    mcc (`float`): the Matthews correlation coefficient, from -1 to +1; higher is better.

Examples:

    Example 1-A multiclass example.
        >>> from east_hf.hf.metrics import load_metric
        >>> mcc = load_metric("mcc")
        >>> results = mcc.compute(references=[1, 3, 2, 0, 3, 2], predictions=[1, 2, 2, 0, 3, 3])
        >>> print(round(results["mcc"], 4))
        0.5385

    Example 2-The same example with sample weights.
        >>> results = mcc.compute(references=[1, 3, 2, 0, 3, 2], predictions=[1, 2, 2, 0, 3, 3], sample_weight=[0.5, 3, 1, 1, 1, 2])
        >>> print(round(results["mcc"], 4))
        0.0978

    Example 3-A single class in references and predictions: the denominator is zero and MCC is 0.
        >>> print(mcc.compute(references=[1, 1, 1], predictions=[1, 1, 1]))
        {'mcc': 0.0}
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


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Mcc(evaluate.Metric):
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
            reference_urls=[
                "https://scikit-learn.org/stable/modules/generated/sklearn.metrics.matthews_corrcoef.html"
            ],
        )

    def _compute(self, predictions, references, sample_weight=None):
        return mcc_report(references, predictions, sample_weight=sample_weight)
