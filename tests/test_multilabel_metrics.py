"""Multi-label metrics against scikit-learn on indicator arrays: the evaluate modules' "multilabel" config and the
Trainer compute_metrics (MultiLabelComputeMetrics), offline."""

import functools
import shutil

import numpy as np
import pytest
import torch
from helpers import run_without_east_hf
from sklearn.metrics import (
    accuracy_score,
    fbeta_score,
    jaccard_score,
    matthews_corrcoef,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
)

from east_hf.hf.metrics import (
    METRIC_DIR,
    MULTILABEL_METRIC_KEYS,
    MultiLabelComputeMetrics,
    build_compute_metrics,
    load_metric,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning"),
    pytest.mark.filterwarnings("ignore:A single label was found:UserWarning"),
]

AVERAGES = ["macro", "micro", "weighted", "samples", None]
RATES = [0.5, 0.3, 0.1, 0.03, 0.0]  # a common label, rare ones, one never true


def indicator_set(rng, n, rates=RATES, agree=0.7):
    """(N, L) 0/1 references with the given positive rates and (N, L) logits whose sign agrees with them about
    ``agree`` of the time (label 4 is never true, and sometimes predicted)."""
    y = (rng.random((n, len(rates))) < np.array(rates)).astype(np.int64)
    signs = np.where(rng.random(y.shape) < agree, 2 * y - 1, rng.choice([-1, 1], y.shape))
    logits = (signs * rng.uniform(0.1, 3.0, y.shape)).astype(np.float32)
    return logits, y


@functools.cache
def multilabel(name: str):
    """The packaged module ``name``'s "multilabel" config, loaded once and kept in memory."""
    return load_metric(name, config_name="multilabel", keep_in_memory=True)


def sk_per_label_fbeta(y, p, betas, zero_division=0.0, sample_weight=None):
    """scikit-learn's F-beta of each label with its own beta: (L,)."""
    return np.array([
        fbeta_score(y[:, k], p[:, k], beta=b, average="binary", zero_division=zero_division,
                    sample_weight=sample_weight)
        for k, b in enumerate(betas)
    ])  # fmt: skip


def sk_mcc(y, p, average="macro", sample_weight=None):
    """Per-label binary MCC (scikit-learn's matthews_corrcoef of each column), averaged over labels."""
    if average == "micro":
        w = None if sample_weight is None else np.repeat(sample_weight, y.shape[1])
        return matthews_corrcoef(y.ravel(), p.ravel(), sample_weight=w)
    values = np.array([matthews_corrcoef(y[:, k], p[:, k], sample_weight=sample_weight) for k in range(y.shape[1])])
    if average is None:
        return values
    w = np.ones(y.shape[0]) if sample_weight is None else sample_weight
    support = w @ y
    return np.average(values, weights=support) if average == "weighted" and support.sum() > 0 else values.mean()


# ---- the evaluate modules' "multilabel" config ----
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("average", AVERAGES)
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
def test_macro_fbeta_multilabel_matches_sklearn(seed, average, beta):
    rng = np.random.default_rng(seed)
    logits, y = indicator_set(rng, 30 + 20 * seed)
    p = (logits > 0).astype(np.int64)
    for zero_division, w in ((0.0, None), (1.0, rng.random(len(y)))):
        out = multilabel("macro_fbeta").compute(
            predictions=p.tolist(), references=y.tolist(), beta=beta, average=average, zero_division=zero_division,
            sample_weight=None if w is None else w.tolist(),
        )  # fmt: skip
        ref = precision_recall_fscore_support(
            y, p, beta=beta, average=average, zero_division=zero_division, sample_weight=w
        )
        for key, value in zip(("precision", "recall", "fbeta"), ref[:3]):
            np.testing.assert_allclose(out[key], value, rtol=0, atol=1e-12, err_msg=key)
        per_label = precision_recall_fscore_support(
            y, p, beta=beta, average=None, zero_division=zero_division, sample_weight=w
        )
        for key, value in zip(("precision_per_class", "recall_per_class", "fbeta_per_class"), per_label[:3]):
            np.testing.assert_allclose(out[key], value, rtol=0, atol=1e-12, err_msg=key)
        assert out["labels"] == list(range(y.shape[1]))
        if average is not None:
            assert all(isinstance(out[key], float) for key in ("fbeta", "precision", "recall"))


@pytest.mark.parametrize("average", ["macro", "weighted", None])
def test_macro_fbeta_multilabel_per_label_beta_and_labels(average):
    rng = np.random.default_rng(5)
    logits, y = indicator_set(rng, 60)
    p = (logits > 0).astype(np.int64)
    betas = [0.5, 1.0, 2.0, 4.0, 1.0]
    out = multilabel("macro_fbeta").compute(predictions=p, references=y, beta=betas, average=average)
    f = sk_per_label_fbeta(y, p, betas)
    np.testing.assert_allclose(out["fbeta_per_class"], f, rtol=0, atol=1e-12)
    support = y.sum(0)
    expected = f if average is None else np.average(f, weights=support if average == "weighted" else None)
    np.testing.assert_allclose(out["fbeta"], expected, rtol=0, atol=1e-12)
    # labels: the columns scored, in this order (scikit-learn's labels= on indicator arrays)
    out = multilabel("macro_fbeta").compute(predictions=p, references=y, labels=[3, 0], average=average)
    assert out["labels"] == [3, 0]
    ref = fbeta_score(y, p, beta=1.0, labels=[3, 0], average=average, zero_division=0)
    np.testing.assert_allclose(out["fbeta"], ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("average", ["macro", "weighted", "micro", None])
def test_mcc_multilabel_matches_sklearn_per_label(seed, average):
    rng = np.random.default_rng(10 + seed)
    logits, y = indicator_set(rng, 40 + 10 * seed)
    p = (logits > 0).astype(np.int64)
    for w in (None, rng.random(len(y))):
        out = multilabel("mcc").compute(
            predictions=p.tolist(), references=y.tolist(), average=average, sample_weight=None if w is None else w
        )
        assert set(out) == {"mcc"}
        np.testing.assert_allclose(out["mcc"], sk_mcc(y, p, average, w), rtol=0, atol=1e-12)
    assert multilabel("mcc").compute(predictions=y, references=y, average=None)["mcc"] == [1.0, 1.0, 1.0, 1.0, 0.0]


def test_multilabel_modules_add_batch_and_default_config_unchanged():
    rng = np.random.default_rng(20)
    logits, y = indicator_set(rng, 50)
    p = (logits > 0).astype(np.int64)
    metric = multilabel("macro_fbeta")
    metric.add_batch(predictions=p[:20].tolist(), references=y[:20].tolist())
    metric.add_batch(predictions=p[20:].tolist(), references=y[20:].tolist())
    assert metric.compute(average="micro")["fbeta"] == pytest.approx(fbeta_score(y, p, beta=1.0, average="micro"))
    assert "Sequence" in repr(metric.features["predictions"]) or "List" in repr(metric.features["predictions"])
    single = load_metric("macro_fbeta")  # the default config: class ids, as before
    assert single.config_name == "default" and single.features["predictions"].dtype == "int64"
    assert single.compute(predictions=[0, 1, 1], references=[0, 1, 0])["fbeta"] == pytest.approx(2 / 3)


def test_multilabel_modules_refuse_invalid_inputs_in_one_line():
    fbeta, mcc = multilabel("macro_fbeta"), multilabel("mcc")
    rows = {"predictions": [[0, 1, 1], [1, 0, 0]], "references": [[0, 1, 0], [1, 1, 0]]}
    for metric, kwargs, message in [
        (fbeta, {"average": "binary"}, r"Expected average in \('macro', 'weighted', 'micro', 'samples', None\)"),
        (fbeta, {"beta": [1.0, 2.0, 1.0], "average": "samples"}, "Expected one beta for average='samples'"),
        (fbeta, {"beta": [1.0, 2.0, 1.0], "average": "micro"}, "Expected one beta for average='micro'"),
        (fbeta, {"beta": [1.0, 2.0]}, "Expected beta as a float or one value per scored label"),
        (fbeta, {"labels": [0, 3]}, r"Expected labels as distinct column indices in \[0, 2\]"),
        (fbeta, {"sample_weight": [1.0]}, r"Expected sample_weight of shape \(2,\)"),
        (mcc, {"average": "samples"}, "Expected average in"),
    ]:
        with pytest.raises(ValueError, match=message) as raised:
            metric.compute(**rows, **kwargs)
        assert "\n" not in str(raised.value)
    for metric in (fbeta, mcc):
        for kwargs, message in [
            ({"predictions": [[0, 2, 1]], "references": [[0, 1, 1]]}, r"0/1 indicator rows, got values \[0, 1, 2\]"),
            ({"predictions": [[0, 1], [1, 0, 1]], "references": [[0, 1, 1], [1, 0, 1]]}, r"rows of \[2, 3\] labels"),
        ]:
            with pytest.raises(ValueError, match=message) as raised:
                metric.compute(**kwargs)
            assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="Expected a config name in"):
        load_metric("mcc", config_name="multi_label")
    with pytest.raises(ValueError, match="average is for the 'multilabel' config"):
        load_metric("mcc").compute(predictions=[0, 1], references=[0, 1], average="micro")


MULTILABEL_WITHOUT_EAST_HF = """
import evaluate
import numpy as np
from sklearn.metrics import f1_score, matthews_corrcoef
folder = sys.argv[1]
y = [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0]]
p = [[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 0, 1], [0, 0, 0]]
for average in ("macro", "micro", "weighted", "samples"):
    out = evaluate.load(folder + "/macro_fbeta", "multilabel").compute(predictions=p, references=y, average=average)
    assert abs(out["fbeta"] - f1_score(y, p, average=average)) < 1e-12, (average, out)
mcc = evaluate.load(folder + "/mcc", "multilabel").compute(predictions=p, references=y)["mcc"]
expected = np.mean([matthews_corrcoef(np.array(y)[:, k], np.array(p)[:, k]) for k in range(3)])
assert abs(mcc - expected) < 1e-12, (mcc, expected)
assert not [name for name in sys.modules if name.split(".")[0] == "east_hf"], "east_hf was imported"
print("COMPUTED")
"""


def test_multilabel_configs_compute_without_east_hf(tmp_path):
    pushed = tmp_path / "hub"
    for name in ("macro_fbeta", "mcc"):
        shutil.copytree(METRIC_DIR / name, pushed / name, ignore=shutil.ignore_patterns("__pycache__"))
    result = run_without_east_hf(MULTILABEL_WITHOUT_EAST_HF, tmp_path, pushed)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "COMPUTED" in result.stdout


# ---- MultiLabelComputeMetrics: the Trainer compute_metrics over the core's multi-label statistics ----
ID2LABEL = {0: "Traffic Light", 1: "car", 2: "T-shirt/top", 3: "dog", 4: "never"}


def sk_multilabel(logits, y, betas, average):
    """The metrics of MultiLabelComputeMetrics computed by scikit-learn on (logits > 0)."""
    p = (logits > 0).astype(np.int64)
    per_label = "macro" if average == "samples" else average  # precision, recall, mcc: macro for samples
    f = fbeta_score(y, p, beta=betas[0], average=average, zero_division=0)
    if len(set(betas)) > 1:
        f = np.average(sk_per_label_fbeta(y, p, betas), weights=y.sum(0) if average == "weighted" else None)
    return {
        "accuracy": accuracy_score(y, p),
        "fbeta": f,
        "mcc": sk_mcc(y, p, per_label),
        "precision": precision_score(y, p, average=per_label, zero_division=0),
        "recall": recall_score(y, p, average=per_label, zero_division=0),
        "jaccard": jaccard_score(y, p, average=average, zero_division=0),
    }


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("average", ["macro", "micro", "weighted", "samples"])
def test_compute_metrics_matches_sklearn_on_hard_predictions(seed, average):
    rng = np.random.default_rng(30 + seed)
    logits, y = indicator_set(rng, 40 + 25 * seed)
    one_beta = average in ("micro", "samples")
    beta = 0.5 if one_beta else {"Traffic Light": 0.5, "dog": 2.0}
    betas = [0.5] * 5 if one_beta else [0.5, 1.0, 1.0, 2.0, 1.0]
    cm = build_compute_metrics(5, multi_label=True, beta=beta, average=average, id2label=ID2LABEL)
    assert isinstance(cm, MultiLabelComputeMetrics)
    out = cm((logits, y))
    reported = [] if one_beta else [(0, "traffic_light"), (3, "dog")]
    per_label = [f"{m}_{name}" for _, name in reported for m in ("precision", "recall", "fbeta")]
    assert list(out) == [*MULTILABEL_METRIC_KEYS, *per_label]
    assert all(isinstance(v, float) for v in out.values())
    for key, value in sk_multilabel(logits, y, betas, average).items():
        assert out[key] == pytest.approx(value, abs=1e-12), key
    p = (logits > 0).astype(np.int64)
    for k, name in reported:
        assert out[f"precision_{name}"] == pytest.approx(precision_score(y[:, k], p[:, k], zero_division=0))
        assert out[f"recall_{name}"] == pytest.approx(recall_score(y[:, k], p[:, k], zero_division=0))
        assert out[f"fbeta_{name}"] == pytest.approx(fbeta_score(y[:, k], p[:, k], beta=betas[k], zero_division=0))


def test_compute_metrics_zero_division_and_report_all():
    rng = np.random.default_rng(35)
    logits, y = indicator_set(rng, 30)
    p = (logits > 0).astype(np.int64)
    cm = build_compute_metrics(5, multi_label=True, report_classes="all", zero_division=1.0, average="samples")
    out = cm((logits, y))
    assert out["fbeta"] == pytest.approx(fbeta_score(y, p, beta=1.0, average="samples", zero_division=1.0))
    assert out["jaccard"] == pytest.approx(jaccard_score(y, p, average="samples", zero_division=1.0))
    f = fbeta_score(y, p, beta=1.0, average=None, zero_division=1.0)
    assert [out[f"fbeta_{k}"] for k in range(5)] == pytest.approx(f.tolist())
    assert cm.report == {k: str(k) for k in range(5)}


def test_counts_add_over_batches_and_predictions_may_be_0_1():
    rng = np.random.default_rng(40)
    logits, y = indicator_set(rng, 70)
    cm = build_compute_metrics(5, multi_label=True, beta=[1.0, 2.0, 1.0, 1.0, 0.5])
    counts = cm.counts(logits, y)
    assert counts.dtype == torch.float64 and counts.shape == (4, 6)
    parts = [cm.counts(logits[s], y[s]) for s in (slice(0, 9), slice(9, 40), slice(40, 70))]
    torch.testing.assert_close(sum(parts), counts, rtol=0, atol=1e-12)
    assert cm.from_counts(sum(parts)) == pytest.approx(cm.from_counts(counts), abs=1e-12)
    hard = (logits > 0).astype(np.int64)
    torch.testing.assert_close(cm.counts(hard, y), counts)  # 0/1 predictions
    torch.testing.assert_close(cm.counts(torch.from_numpy(hard).bool(), torch.from_numpy(y).float()), counts)
    from transformers import EvalPrediction

    whole = cm((logits, y))
    assert cm(EvalPrediction(predictions=logits, label_ids=y)) == whole
    assert cm(((logits, rng.normal(size=(70, 8))), y)) == whole  # several model outputs: the logits come first
    assert cm(([logits[:30], logits[30:]], [y[:30], y[30:]])) == whole  # eval_do_concat_batches=False


def test_batch_eval_metrics_equals_one_call():
    rng = np.random.default_rng(41)
    logits, y = indicator_set(rng, 45)
    cm = build_compute_metrics(5, multi_label=True, average="samples")
    whole = cm((logits, y))
    batches = [slice(0, 8), slice(8, 16), slice(16, 30), slice(30, 45)]
    for _ in range(2):  # a second evaluation starts afresh
        outs = [
            cm((torch.from_numpy(logits[s]), torch.from_numpy(y[s])), compute_result=s.stop == 45) for s in batches
        ]
        assert outs[:-1] == [{}, {}, {}]
        assert outs[-1] == pytest.approx(whole, abs=1e-12)
    cm((logits[:8], y[:8]), compute_result=False)
    cm.reset()  # an interrupted evaluation leaves nothing behind
    assert cm((logits, y), compute_result=True) == pytest.approx(whole, abs=1e-12)


@pytest.mark.parametrize("average", ["macro", "micro", "weighted", "samples"])
def test_ignored_entries_count_for_nothing(average):
    rng = np.random.default_rng(42)
    logits, y = indicator_set(rng, 60)
    labels = y.copy()
    ignored = rng.random(y.shape) < 0.15  # single entries
    labels[ignored] = -100
    labels[[5, 17]] = -100  # whole rows: they are not rows of the set
    kept = np.ones(len(y), bool)
    kept[[5, 17]] = False
    cm = build_compute_metrics(5, multi_label=True, average=average, report_classes="all")
    out = cm((logits, labels))
    p = (logits > 0).astype(np.int64)
    # per label: scikit-learn on that label's labelled rows
    for k in range(5):
        rows = labels[:, k] != -100
        assert out[f"fbeta_{k}"] == pytest.approx(fbeta_score(y[rows, k], p[rows, k], beta=1.0, zero_division=0))
        assert out[f"recall_{k}"] == pytest.approx(recall_score(y[rows, k], p[rows, k], zero_division=0))
    # per row: an ignored entry is as an entry neither true nor predicted (it changes no row's TP, FP, FN or match)
    y0, p0 = np.where(labels == -100, 0, y)[kept], np.where(labels == -100, 0, p)[kept]
    assert out["accuracy"] == pytest.approx(accuracy_score(y0, p0), abs=1e-12)
    if average == "samples":
        assert out["fbeta"] == pytest.approx(fbeta_score(y0, p0, beta=1.0, average="samples", zero_division=0))
        assert out["jaccard"] == pytest.approx(jaccard_score(y0, p0, average="samples", zero_division=0))
    if average == "micro":  # TP, FP, FN pooled over the labelled entries
        assert out["fbeta"] == pytest.approx(fbeta_score(y0, p0, beta=1.0, average="micro", zero_division=0))
    if average == "macro":
        mcc = [matthews_corrcoef(y[labels[:, k] != -100, k], p[labels[:, k] != -100, k]) for k in range(5)]
        assert out["mcc"] == pytest.approx(np.mean(mcc), abs=1e-12)


def test_invalid_inputs_and_settings_raise_one_line_errors():
    rng = np.random.default_rng(43)
    logits, y = indicator_set(rng, 20)
    cm = build_compute_metrics(5, multi_label=True)
    nan = logits.copy()
    nan[3, 1] = np.nan
    for predictions, labels, message in [
        (logits, np.where(y == 1, 2, y), r"Expected multi-label labels of 0, 1 \(or ignore_index=-100\), got 2"),
        (logits, y * 0.5, "Expected multi-label labels of 0, 1"),
        (logits, y[:, :4], r"Expected labels of shape \(20, 5\) \(N, L\) like the predictions, got shape \(20, 4\)"),
        (logits, y[:19], r"Expected labels of shape \(20, 5\)"),
        (logits[:, :4], y[:, :4], r"Expected predictions as logits or 0/1 predictions \(N, 5\), got shape \(20, 4\)"),
        (logits.argmax(1), y, r"Expected predictions as logits or 0/1 predictions \(N, 5\), got shape \(20,\)"),
        (np.full((20, 5), 2), y, "Expected 0/1 predictions or float logits, got values"),
        (nan, y, "Expected finite logits"),
    ]:
        with pytest.raises(ValueError, match=message) as raised:
            cm((predictions, labels))
        assert "\n" not in str(raised.value)
    for settings, message in [
        ({"average": "binary"}, "for multi-label labels, got 'binary'"),
        ({"average": "micro", "beta": [1.0, 2.0, 1.0, 1.0, 1.0]}, "Expected one beta for average='micro'"),
        ({"average": "samples", "beta": {"3": 2.0}}, "Expected one beta for average='samples'"),
        ({"beta": [1.0, 2.0]}, "Expected beta as a float or 5 per-class values"),
        ({"beta": 0.0}, "beta"),
        ({"report_classes": ["cat"], "id2label": ID2LABEL}, "report_classes"),
        ({"pos_label": 1}, "pos_label"),
    ]:
        with pytest.raises((ValueError, TypeError), match=message) as raised:
            build_compute_metrics(5, multi_label=True, **settings)
        assert "\n" not in str(raised.value)


def test_single_label_build_compute_metrics_is_unchanged():
    cm = build_compute_metrics(3)
    assert not isinstance(cm, MultiLabelComputeMetrics)
    assert list(cm((np.eye(3), np.array([0, 1, 2])))) == ["accuracy", "fbeta", "mcc", "precision", "recall"]
    assert build_compute_metrics(1, multi_label=True).num_labels == 1  # one binary label is a multi-label set


class TinyTagger(torch.nn.Module):
    def __init__(self, num_features=5, num_labels=3):
        super().__init__()
        self.linear = torch.nn.Linear(num_features, num_labels)

    def forward(self, x, labels=None):
        logits = self.linear(x)
        if labels is None:
            return {"logits": logits}
        labelled = labels != -100  # binary cross-entropy over the labelled entries
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits[labelled], labels[labelled])
        return {"loss": loss, "logits": logits}


@pytest.mark.parametrize("batch_eval_metrics", [False, True])
def test_trainer_predict_matches_sklearn(tmp_path, batch_eval_metrics):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    gen = torch.Generator().manual_seed(50)
    x = torch.randn(30, 5, generator=gen)
    labels = (torch.rand(30, 3, generator=gen) < 0.4).float()
    labels[4, 1] = -100
    data = Dataset.from_dict({"x": x.tolist(), "labels": labels.tolist()})
    args = TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], per_device_eval_batch_size=7,
        batch_eval_metrics=batch_eval_metrics,
    )  # fmt: skip
    cm = build_compute_metrics(3, multi_label=True, id2label={0: "a", 1: "b", 2: "c"}, report_classes=["c"])
    trainer = Trainer(model=TinyTagger(), args=args, compute_metrics=cm)
    result = trainer.predict(data)
    assert result.predictions.shape == (30, 3)
    direct = cm((result.predictions, result.label_ids))
    assert {key: result.metrics[f"test_{key}"] for key in direct} == pytest.approx(direct, abs=1e-12)
    p = (result.predictions > 0).astype(np.int64)
    y = result.label_ids
    keep = y[:, 2] != -100
    assert result.metrics["test_fbeta_c"] == pytest.approx(fbeta_score(y[keep, 2], p[keep, 2], beta=1.0))
