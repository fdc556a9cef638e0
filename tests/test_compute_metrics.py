"""The Trainer's compute_metrics against scikit-learn, offline: build_compute_metrics' keys and values and its
batch accumulation, a real Trainer evaluation, and the O(C) counts an evaluation accumulates, scored as the core
scores the (C, C) confusion matrix."""

import re

import numpy as np
import pytest
import torch
from helpers import sk_prf
from sklearn.metrics import accuracy_score, matthews_corrcoef, precision_recall_fscore_support

from east_hf.hf.metrics import ComputeMetrics, build_compute_metrics, safe_name

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning"),
    pytest.mark.filterwarnings("ignore:A single label was found:UserWarning"),
]

AVERAGES = ["macro", "weighted", "micro", "binary"]


# ---- build_compute_metrics: keys, values against scikit-learn, batch accumulation ----
ID2LABEL = {0: "Traffic Light", 1: "car", 2: "T-shirt/top", 3: "dog"}


def eval_set(rng, n, num_classes=4, ignored=5):
    logits = rng.normal(size=(n, num_classes)).astype(np.float32)
    labels = np.where(rng.random(n) < 0.6, logits.argmax(1), rng.integers(0, num_classes, n))
    labels[rng.choice(n, ignored, replace=False)] = -100
    return logits, labels


def sk_metrics(logits, labels, betas, average="macro", pos_label=1):
    keep = labels != -100
    y, p = labels[keep], logits[keep].argmax(1)
    C = logits.shape[1]
    prec, rec, f = sk_prf(y.tolist(), p.tolist(), betas, average, list(range(C)), pos_label)
    return {"accuracy": accuracy_score(y, p), "fbeta": f, "mcc": matthews_corrcoef(y, p), "precision": prec,
            "recall": rec}, y, p  # fmt: skip


@pytest.mark.parametrize("average", AVERAGES)
def test_compute_metrics_matches_sklearn(average):
    rng = np.random.default_rng(50)
    logits, labels = eval_set(rng, 60)
    beta = {"Traffic Light": 0.5, "3": 2.0} if average != "micro" else 0.5
    compute_metrics = build_compute_metrics(4, beta=beta, average=average, pos_label=3, id2label=ID2LABEL)
    out = compute_metrics((logits, labels))
    betas = [0.5, 1.0, 1.0, 2.0] if average != "micro" else 0.5
    ref, y, p = sk_metrics(logits, labels, betas, average, pos_label=3)
    reported = {"micro": [], "binary": [0]}.get(average, [0, 3])  # binary: class 3's scores are the averaged keys
    names = {0: "traffic_light", 3: "dog"}
    per_class = [f"{m}_{names[k]}" for k in reported for m in ("precision", "recall", "fbeta")]
    assert list(out) == ["accuracy", "fbeta", "mcc", "precision", "recall", *per_class]
    for key, value in ref.items():
        assert out[key] == pytest.approx(value, abs=1e-6), key
    for k in reported:
        b = betas[k]
        sk_p, sk_r, sk_f, _ = precision_recall_fscore_support(
            y, p, beta=b, labels=range(4), average=None, zero_division=0
        )
        assert [out[f"precision_{names[k]}"], out[f"recall_{names[k]}"], out[f"fbeta_{names[k]}"]] == pytest.approx(
            [sk_p[k], sk_r[k], sk_f[k]], abs=1e-6
        )
    assert all(isinstance(v, float) for v in out.values())


def test_compute_metrics_report_classes_and_safe_names():
    cm = build_compute_metrics(4, id2label=ID2LABEL, report_classes=["T-shirt/top", "car", 3])
    assert cm.report == {1: "car", 2: "t_shirt_top", 3: "dog"}
    assert build_compute_metrics(4, id2label=ID2LABEL, report_classes=["traffic_light"]).report == {0: "traffic_light"}
    assert build_compute_metrics(3, report_classes="all").report == {0: "0", 1: "1", 2: "2"}
    assert build_compute_metrics(3, beta=[1.0, 1.0, 0.25]).report == {2: "2"}
    assert build_compute_metrics(3, beta=2.0).report == {}  # one beta for all classes: nothing special per class
    assert build_compute_metrics(2, average="binary", pos_label=0).report == {}  # fbeta, precision, recall are its
    assert build_compute_metrics(2, average="binary", report_classes=[1]).report == {1: "1"}  # asked for: reported
    clash = build_compute_metrics(3, id2label={0: "a b", 1: "A-B", 2: "!!"}, report_classes="all")
    assert clash.report == {0: "a_b_0", 1: "a_b_1", 2: "_2"}
    assert safe_name("Über Cat") == "ber_cat"
    for key in clash((np.eye(3), np.array([0, 1, 2]))):
        assert re.fullmatch(r"[0-9a-z_]+", key)


def test_compute_metrics_inputs_shapes():
    rng = np.random.default_rng(51)
    logits, labels = eval_set(rng, 30, num_classes=3)
    cm = build_compute_metrics(3)
    ref = cm((logits, labels))
    # EvalPrediction, several model outputs (a tuple), per-batch lists, class ids, torch tensors
    from transformers import EvalPrediction

    assert cm(EvalPrediction(predictions=logits, label_ids=labels)) == ref
    assert cm(EvalPrediction(predictions=(logits, rng.normal(size=(30, 8))), label_ids=labels)) == ref
    assert cm(([logits[:7], logits[7:]], [labels[:7], labels[7:]])) == ref
    assert cm((logits.argmax(1), labels)) == ref
    assert cm((torch.from_numpy(logits).bfloat16(), torch.from_numpy(labels))) == cm(
        (torch.from_numpy(logits).bfloat16().float().numpy(), labels)
    )
    with pytest.raises(ValueError, match=r"logits \(N, 3\)"):
        cm((logits[:, :2], labels))
    with pytest.raises(ValueError, match="class ids in"):
        cm((np.full(30, 3), labels))


def test_compute_metrics_rejects_invalid_settings():
    with pytest.raises(ValueError, match="one beta for average='micro'"):
        build_compute_metrics(3, beta=[1.0, 2.0, 1.0], average="micro")
    with pytest.raises(ValueError, match="pos_label"):
        build_compute_metrics(2, average="binary", pos_label=2)
    with pytest.raises(ValueError, match="report_classes"):
        build_compute_metrics(3, id2label={0: "a", 1: "b", 2: "c"}, report_classes=["d"])
    with pytest.raises(ValueError, match="east_beta keys"):
        build_compute_metrics(3, beta={"d": 2.0}, id2label={0: "a", 1: "b", 2: "c"})
    with pytest.raises(ValueError, match="num_classes"):
        build_compute_metrics(1)


def test_batch_eval_metrics_accumulates_until_compute_result():
    rng = np.random.default_rng(52)
    logits, labels = eval_set(rng, 40)
    cm = build_compute_metrics(4, beta=[1.0, 2.0, 1.0, 1.0], id2label=ID2LABEL)
    whole = cm((logits, labels))
    batches = [slice(0, 7), slice(7, 14), slice(14, 21), slice(21, 40)]
    for _ in range(2):  # a second evaluation starts afresh
        outs = [
            cm((torch.from_numpy(logits[s]), torch.from_numpy(labels[s])), compute_result=s.stop == 40)
            for s in batches
        ]
        assert outs[:-1] == [{}, {}, {}]
        assert outs[-1] == pytest.approx(whole, abs=1e-12)
    cm((logits[:7], labels[:7]), compute_result=False)
    cm.reset()  # an interrupted evaluation leaves nothing behind
    assert cm((logits, labels), compute_result=True) == pytest.approx(whole, abs=1e-12)


# ---- a real Trainer evaluation ----
class TinyClassifier(torch.nn.Module):
    def __init__(self, num_features=5, num_classes=4):
        super().__init__()
        self.linear = torch.nn.Linear(num_features, num_classes)

    def forward(self, x, labels=None):
        logits = self.linear(x)
        if labels is None:
            return {"logits": logits}
        return {"loss": torch.nn.functional.cross_entropy(logits, labels, ignore_index=-100), "logits": logits}


@pytest.mark.parametrize("batch_eval_metrics", [False, True])
def test_trainer_evaluation_matches_sklearn_on_gathered_predictions(tmp_path, batch_eval_metrics):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    gen = torch.Generator().manual_seed(60)
    x = torch.randn(30, 5, generator=gen)
    labels = torch.randint(0, 4, (30,), generator=gen)
    labels[[3, 17]] = -100
    data = Dataset.from_dict({"x": x.tolist(), "labels": labels.tolist()})
    args = TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], per_device_eval_batch_size=7,
        batch_eval_metrics=batch_eval_metrics,
    )  # fmt: skip
    calls = []

    class Spy(ComputeMetrics):
        def __call__(self, eval_pred, compute_result=None):
            calls.append(compute_result)
            return super().__call__(eval_pred, compute_result)

    compute_metrics = Spy(4, beta={"dog": 2.0}, id2label=ID2LABEL)
    trainer = Trainer(model=TinyClassifier(), args=args, eval_dataset=data, compute_metrics=compute_metrics)
    result = trainer.predict(data)
    assert result.predictions.shape == (30, 4)
    assert calls == ([False] * 4 + [True] if batch_eval_metrics else [None])  # 30 samples in batches of 7
    ref, _, _ = sk_metrics(result.predictions, result.label_ids, [1.0, 1.0, 1.0, 2.0])
    for key, value in ref.items():
        assert result.metrics[f"test_{key}"] == pytest.approx(value, abs=1e-6), key
    assert {"test_precision_dog", "test_recall_dog", "test_fbeta_dog"} <= set(result.metrics)
    metrics = trainer.evaluate()
    assert metrics["eval_fbeta"] == pytest.approx(ref["fbeta"], abs=1e-6)
    assert "eval_fbeta_dog" in metrics


# ---- counts: the O(C) statistics evaluation accumulates, scored as the core scores the (C, C) matrix ----
def random_confusion_matrix(rng, num_classes, n, empty=()):
    """A hard (C, C) float64 confusion matrix of ``n`` samples; the classes in ``empty`` never occur as a true
    class nor as a prediction (zero rows and columns: the zero_division cases)."""
    y, p = rng.integers(0, num_classes, n), rng.integers(0, num_classes, n)
    p = np.where(rng.random(n) < 0.5, y, p)
    keep = ~np.isin(y, empty) & ~np.isin(p, empty)
    confmat = np.zeros((num_classes, num_classes))
    np.add.at(confmat, (y[keep], p[keep]), 1)
    return torch.from_numpy(confmat)


@pytest.mark.parametrize("average", AVERAGES)
@pytest.mark.parametrize("zero_division", [0.0, 1.0])
def test_scores_from_counts_equal_the_core_on_the_confusion_matrix_bit_for_bit(average, zero_division):
    from east_hf.hf.metrics.counts import counts_of_confusion_matrix

    rng = np.random.default_rng(70)
    for num_classes, n, empty in [(2, 50, ()), (7, 300, (2, 5)), (40, 2000, (0, 13, 39)), (5, 0, ())]:
        if average == "binary" and num_classes != 2:
            continue
        beta = 0.5 if average == "micro" else rng.uniform(0.25, 3.0, num_classes).tolist()
        cm = ComputeMetrics(num_classes, beta=beta, average=average, report_classes="all", zero_division=zero_division)
        confmat = random_confusion_matrix(rng, num_classes, n, empty)
        assert cm.from_counts(counts_of_confusion_matrix(confmat)) == cm.from_confusion_matrix(confmat)


def test_counts_of_logits_and_class_ids_are_those_of_the_confusion_matrix():
    from east_hf.hf.metrics.counts import counts_of_confusion_matrix

    rng = np.random.default_rng(71)
    logits, labels = eval_set(rng, 50)
    cm = build_compute_metrics(4)
    counts = cm.counts(logits, labels)
    assert counts.dtype == torch.int64 and counts.shape == (3, 4)
    assert torch.equal(counts, counts_of_confusion_matrix(cm.confusion_matrix(logits, labels)))
    assert torch.equal(cm.counts(logits.argmax(1), labels), counts)
    assert torch.equal(cm.counts(logits[:20], labels[:20]) + cm.counts(logits[20:], labels[20:]), counts)
    assert int(counts[1].sum()) == int((labels != -100).sum())  # ignored rows are not counted
    bad = logits.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="Expected finite"):
        cm.counts(bad, labels)
    with pytest.raises(ValueError, match=r"labels in \[0, 3\]"):
        cm.counts(logits, np.where(labels == 2, 4, labels))


def test_compute_metrics_holds_counts_not_a_confusion_matrix_between_batches():
    rng = np.random.default_rng(72)
    logits, labels = eval_set(rng, 40, num_classes=1000, ignored=3)
    cm = build_compute_metrics(1000)
    cm((logits[:20], labels[:20]), compute_result=False)
    assert cm._counts.shape == (3, 1000) and cm._counts.dtype == torch.int64  # O(C), not (C, C)
    assert cm((logits[20:], labels[20:]), compute_result=True) == cm.from_confusion_matrix(
        cm.confusion_matrix(logits, labels)
    )
