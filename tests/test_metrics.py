"""The packaged evaluate metrics and the Trainer compute_metrics against scikit-learn, offline."""

import ast
import doctest
import functools
import importlib.util
import re
import shutil

import numpy as np
import pytest
import torch
from helpers import run_without_east_hf
from reference_metrics import fbeta_report, label_confusion_matrix, mcc_report
from sklearn.metrics import accuracy_score, fbeta_score, matthews_corrcoef, precision_recall_fscore_support

from east_hf.hf.metrics import METRIC_DIR, METRIC_NAMES, ComputeMetrics, build_compute_metrics, load_metric, safe_name

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning"),
    pytest.mark.filterwarnings("ignore:A single label was found:UserWarning"),
]

AVERAGES = ["macro", "weighted", "micro", "binary"]


def random_labels(rng, n, values):
    """References and predictions drawn from ``values``; predictions agree with references about half the time."""
    y = rng.choice(values, n)
    p = np.where(rng.random(n) < 0.5, y, rng.choice(values, n))
    return y.tolist(), p.tolist()


def sk_prf(y, p, beta, average, labels=None, pos_label=1, zero_division=0.0, sample_weight=None):
    """scikit-learn's averaged precision, recall and F-beta; per-class beta written out from its per-class values."""
    if average == "binary":
        labels = None
    else:
        pos_label = 1  # scikit-learn warns about a pos_label it ignores
    if np.isscalar(beta):
        out = precision_recall_fscore_support(
            y, p, beta=beta, average=average, labels=labels, pos_label=pos_label,
            zero_division=zero_division, sample_weight=sample_weight,
        )  # fmt: skip
        return out[:3]
    scored = labels if labels is not None else sorted(set(y) | set(p))
    prec, rec, _, support = precision_recall_fscore_support(
        y, p, labels=scored, average=None, zero_division=zero_division, sample_weight=sample_weight
    )
    f = np.array([
        precision_recall_fscore_support(
            y, p, beta=b, labels=scored, average=None, zero_division=zero_division, sample_weight=sample_weight
        )[2][k]
        for k, b in enumerate(beta)
    ])  # fmt: skip
    if average == "binary":
        k = scored.index(pos_label)
        return prec[k], rec[k], f[k]
    w = support if average == "weighted" and support.sum() > 0 else np.ones_like(support)
    return tuple(np.average(v, weights=w) for v in (prec, rec, f))


@functools.cache
def packaged(name: str):
    """The packaged evaluate module ``name``, loaded once and kept in memory."""
    return load_metric(name, keep_in_memory=True)


def assert_same_report(module: dict, core: dict):
    """The evaluate module's numpy result equals the core's (float64 summation order aside: a few ulp)."""
    assert module.keys() == core.keys() and module["labels"] == core["labels"]
    for key in module.keys() - {"labels"}:
        assert module[key] == pytest.approx(core[key], rel=0, abs=1e-15), key


def assert_report_matches_sklearn(y, p, beta, average, labels=None, pos_label=1, zero_division=0.0, w=None):
    """fbeta_report (the core) and the macro_fbeta module against scikit-learn and against each other."""
    ours = fbeta_report(y, p, beta, average, labels, pos_label, zero_division, sample_weight=w)
    module = packaged("macro_fbeta").compute(
        predictions=p, references=y, beta=beta, average=average, labels=labels, pos_label=pos_label,
        zero_division=zero_division, sample_weight=w,
    )  # fmt: skip
    assert_same_report(module, ours)
    ref = sk_prf(y, p, beta, average, labels, pos_label, zero_division, w)
    np.testing.assert_allclose([ours["precision"], ours["recall"], ours["fbeta"]], ref, rtol=0, atol=1e-12)
    scored = labels if labels is not None else ours["labels"]
    betas = [beta] * len(scored) if np.isscalar(beta) else beta
    for k, b in enumerate(betas):
        sk_p, sk_r, sk_f, _ = precision_recall_fscore_support(
            y, p, beta=b, labels=scored, average=None, zero_division=zero_division, sample_weight=w
        )
        assert ours["precision_per_class"][k] == pytest.approx(sk_p[k], abs=1e-12)
        assert ours["recall_per_class"][k] == pytest.approx(sk_r[k], abs=1e-12)
        assert ours["fbeta_per_class"][k] == pytest.approx(sk_f[k], abs=1e-12)
    return ours


# ---- fbeta_report and mcc_report (the core) and the evaluate modules (numpy) against scikit-learn ----
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("average", AVERAGES)
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
def test_fbeta_matches_sklearn_fbeta_score(seed, average, beta):
    rng = np.random.default_rng(seed)
    values = [0, 1] if average == "binary" else [0, 1, 2, 3, 4][: 2 + seed]
    y, p = random_labels(rng, 25 + 10 * seed, values)
    ours = fbeta_report(y, p, beta=beta, average=average)
    assert ours["fbeta"] == pytest.approx(fbeta_score(y, p, beta=beta, average=average, zero_division=0), abs=1e-12)
    assert_report_matches_sklearn(y, p, beta, average)
    w = rng.random(len(y)).tolist()
    assert_report_matches_sklearn(y, p, beta, average, w=w, zero_division=1.0)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("average", ["macro", "weighted", "binary"])
def test_per_class_beta_matches_sklearn_by_hand(seed, average):
    rng = np.random.default_rng(10 + seed)
    values = [0, 1] if average == "binary" else [0, 1, 2, 3]
    y, p = random_labels(rng, 40, values)
    betas = rng.uniform(0.25, 4.0, len(set(y) | set(p))).tolist()
    assert_report_matches_sklearn(y, p, betas, average)


@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
@pytest.mark.parametrize("zero_division", [0.0, 1.0])
def test_labels_none_is_the_sorted_union_of_labels_present(average, zero_division):
    # label 9 is only predicted, label 5 only referenced: both are scored, in sorted order
    y, p = [3, 3, 5, 7, 7, 7, 3], [3, 9, 7, 7, 3, 7, 3]
    ours = assert_report_matches_sklearn(y, p, 1.0, average, zero_division=zero_division)
    assert ours["labels"] == [3, 5, 7, 9]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
@pytest.mark.parametrize(
    "labels",
    [[0, 1, 2, 3, 4, 5], [5, 2, 0, 1, 3], [2, 0], [1], [3, 6]],
    ids=["absent", "reordered_absent", "subset", "single", "one_absent_one_present"],
)
def test_labels_given_are_scored_in_order_absent_ones_included(seed, average, labels):
    rng = np.random.default_rng(20 + seed)
    y, p = random_labels(rng, 30, [0, 1, 2, 3])
    w = rng.random(len(y)).tolist() if seed == 2 else None
    for zero_division in (0.0, 1.0):
        ours = assert_report_matches_sklearn(y, p, 1.5, average, labels, zero_division=zero_division, w=w)
        assert ours["labels"] == labels


def test_subset_labels_with_no_references_falls_back_to_the_plain_mean_as_sklearn():
    y, p = [0, 0, 1, 1], [0, 2, 2, 1]
    assert_report_matches_sklearn(y, p, 1.0, "weighted", labels=[2], zero_division=1.0)
    assert_report_matches_sklearn(y, p, [2.0, 0.5], "weighted", labels=[2, 3])


@pytest.mark.parametrize("average", AVERAGES)
@pytest.mark.parametrize("zero_division", [0.0, 1.0])
def test_single_class_inputs(average, zero_division):
    for y, p in (([1, 1, 1], [1, 1, 1]), ([0, 0], [0, 0])):
        ours = assert_report_matches_sklearn(y, p, 1.0, average, zero_division=zero_division)
        assert ours["labels"] == ([0, 1] if average == "binary" and y[0] == 0 else [y[0]])
        assert mcc_report(y, p)["mcc"] == matthews_corrcoef(y, p) == 0.0
        assert packaged("mcc").compute(predictions=p, references=y) == {"mcc": 0.0}


def test_binary_checks_pos_label_as_sklearn():
    with pytest.raises(ValueError, match="pos_label=1 is not a valid label"):
        fbeta_report([0, 2, 2], [2, 0, 2], average="binary")
    with pytest.raises(ValueError, match="pos_label=1 is not a valid label"):
        fbeta_score([0, 2, 2], [2, 0, 2], beta=1.0, average="binary")
    assert_report_matches_sklearn([0, 2, 2], [2, 0, 2], 1.0, "binary", pos_label=2)
    with pytest.raises(ValueError, match="Expected pos_label among labels"):
        fbeta_report([0, 1], [0, 1], average="binary", labels=[0, 2])


def test_binary_on_multiclass_data_scores_pos_label_one_vs_rest():
    y, p = [0, 1, 2, 1, 2, 0, 1], [0, 1, 1, 1, 2, 2, 0]
    ours = fbeta_report(y, p, beta=2.0, average="binary", pos_label=2)
    assert ours["fbeta"] == pytest.approx(fbeta_score(y, p, beta=2.0, labels=[2], average="macro"), abs=1e-12)


def test_invalid_inputs_raise_with_a_message():
    with pytest.raises(ValueError, match="one beta for average='micro'"):
        fbeta_report([0, 1, 2], [0, 1, 1], beta=[1.0, 2.0, 1.0], average="micro")
    with pytest.raises(ValueError, match="one value per scored label"):
        fbeta_report([0, 1, 2], [0, 1, 1], beta=[1.0, 2.0])
    assert fbeta_report([0, 1, 1], [0, 1, 0], beta=np.float32(2.0)) == fbeta_report([0, 1, 1], [0, 1, 0], beta=2.0)
    assert fbeta_report([0, 1], [0, 1], beta=np.array([2.0, 0.5]))["fbeta"] == 1.0
    with pytest.raises(ValueError, match="every beta > 0"):
        fbeta_report([0, 1], [0, 1], beta=0.0)
    with pytest.raises(ValueError, match="as many predictions as references"):
        fbeta_report([0, 1], [0])
    with pytest.raises(ValueError, match="distinct labels"):
        fbeta_report([0, 1], [0, 1], labels=[0, 0])
    with pytest.raises(ValueError, match="average in"):
        fbeta_report([0, 1], [0, 1], average="samples")
    with pytest.raises(ValueError, match="zero_division"):
        fbeta_report([0, 1], [0, 1], zero_division="warn")
    with pytest.raises(TypeError, match="integer class labels"):
        mcc_report([0.5, 1.0], [0, 1])


@pytest.mark.parametrize("seed", range(5))
def test_mcc_matches_sklearn(seed):
    rng = np.random.default_rng(30 + seed)
    y, p = random_labels(rng, 20 + 15 * seed, [0, 1, 2, 3, 4, 5][: 2 + seed])
    assert mcc_report(y, p)["mcc"] == pytest.approx(matthews_corrcoef(y, p), abs=1e-12)
    w = rng.random(len(y))
    assert mcc_report(y, p, w)["mcc"] == pytest.approx(matthews_corrcoef(y, p, sample_weight=w), abs=1e-12)
    assert mcc_report(y, y)["mcc"] == pytest.approx(1.0)
    for weight in (None, w.tolist()):  # the numpy module equals the core
        module = packaged("mcc").compute(predictions=p, references=y, sample_weight=weight)["mcc"]
        assert module == pytest.approx(mcc_report(y, p, weight)["mcc"], rel=0, abs=1e-15)


def test_label_confusion_matrix_pools_unscored_labels_and_pads_a_single_class():
    cm, labels = label_confusion_matrix(torch.tensor([4, 4, 8]), torch.tensor([4, 8, 8]), labels=[4])
    assert labels == [4] and cm.tolist() == [[1.0, 1.0], [0.0, 1.0]]  # 8 pooled as "the rest"
    cm, labels = label_confusion_matrix(torch.tensor([4, 4]), torch.tensor([4, 4]))
    assert labels == [4] and cm.tolist() == [[2.0, 0.0], [0.0, 0.0]]  # padding class


# ---- the evaluate modules: loaded offline, equal to the core and to scikit-learn, examples run ----
@pytest.fixture(scope="module")
def loaded():
    return {name: load_metric(name) for name in METRIC_NAMES}


def test_modules_load_offline_and_match_sklearn(loaded):
    rng = np.random.default_rng(40)
    y, p = random_labels(rng, 50, [0, 1, 2, 3])
    out = loaded["macro_fbeta"].compute(predictions=p, references=y, beta=0.5, average="weighted")
    assert_same_report(out, fbeta_report(y, p, beta=0.5, average="weighted"))
    assert out["fbeta"] == pytest.approx(fbeta_score(y, p, beta=0.5, average="weighted"), abs=1e-12)
    assert set(out) == {"fbeta", "precision", "recall", "fbeta_per_class", "precision_per_class",
                        "recall_per_class", "labels"}  # fmt: skip
    out = loaded["mcc"].compute(predictions=p, references=y)
    assert out == {"mcc": pytest.approx(matthews_corrcoef(y, p), abs=1e-12)}
    # incremental use: add_batch twice, then compute over both
    metric = loaded["macro_fbeta"]
    metric.add_batch(predictions=p[:20], references=y[:20])
    metric.add_batch(predictions=p[20:], references=y[20:])
    assert metric.compute(labels=[0, 1, 2, 3, 4])["fbeta"] == pytest.approx(
        fbeta_score(y, p, beta=1.0, labels=[0, 1, 2, 3, 4], average="macro", zero_division=0), abs=1e-12
    )


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_evaluate_load_by_path(name):
    import evaluate

    by_dir = evaluate.load(str(METRIC_DIR / name))
    by_file = evaluate.load(str(METRIC_DIR / name / f"{name}.py"))
    kwargs = {"predictions": [0, 2, 1, 1], "references": [0, 1, 1, 2]}
    assert by_dir.compute(**kwargs) == by_file.compute(**kwargs)
    assert "Aligning Multiclass Neural Network Classifier Criterion" in by_dir.citation
    assert set(by_dir.features) == {"predictions", "references"}


def test_load_metric_takes_the_config_name_as_evaluate_load_does():
    """``load_metric(name, "multilabel")``, as the metric's README writes ``evaluate.load(name, "multilabel")``."""
    metric = load_metric("macro_fbeta", "multilabel", keep_in_memory=True)
    predictions, references = [[1, 0, 0], [0, 1, 1]], [[1, 0, 1], [0, 1, 1]]
    expected = fbeta_score(np.array(references), np.array(predictions), beta=1.0, average="macro", zero_division=0)
    assert metric.compute(predictions=predictions, references=references)["fbeta"] == pytest.approx(expected)


def test_load_metric_rejects_unknown_names():
    with pytest.raises(ValueError, match="Expected a metric name"):
        load_metric("f1")


def run_examples(text, name):
    """Run the ``>>>`` examples of ``text`` as a doctest; return (failed, attempted)."""
    test = doctest.DocTestParser().get_doctest(text, {}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    return runner.summarize(verbose=False)


def test_modules_refuse_invalid_inputs_in_one_line():
    metric = packaged("macro_fbeta")
    kwargs = {"predictions": [0, 1, 1], "references": [0, 1, 2]}
    for settings, error, message in [
        ({"beta": [1.0, 2.0, 1.0], "average": "micro"}, ValueError, "Expected one beta for average='micro'"),
        ({"beta": [1.0, 2.0]}, ValueError, r"Expected beta as a float or one value per scored label \[0, 1, 2\]"),
        ({"beta": 0.0}, ValueError, r"Expected every beta > 0 and finite, got \[0.0, 0.0, 0.0\]"),
        ({"beta": True}, TypeError, "Expected beta as a positive float"),
        ({"labels": [0, 0]}, ValueError, "Expected labels as a non-empty list of distinct labels"),
        ({"average": "samples"}, ValueError, "Expected average in"),
        ({"zero_division": "warn"}, ValueError, "Expected zero_division as a float in"),
        ({"average": "binary", "labels": [0, 2]}, ValueError, "Expected pos_label among labels"),
        ({"average": "binary", "pos_label": 7}, ValueError, "pos_label=7 is not a valid label"),
        ({"sample_weight": [1.0]}, ValueError, r"Expected sample_weight of shape \(3,\), got shape \(1,\)"),
    ]:
        with pytest.raises(error, match=message) as raised:
            metric.compute(**kwargs, **settings)
        assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match=r"Expected sample_weight of shape \(3,\)"):
        packaged("mcc").compute(**kwargs, sample_weight=[1.0, 2.0])


def test_modules_import_only_their_listed_requirements():
    """What evaluate checks before running a module pushed to the Hub: every library it imports is installed. Each
    folder's requirements.txt and README.md list what its script imports, and east_hf is none of them."""
    for name in METRIC_NAMES:
        folder = METRIC_DIR / name
        tree = ast.parse((folder / f"{name}.py").read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
        assert imported == {"datasets", "evaluate", "numpy"}, name
        requirements = {re.split(r"[<>=~ ]", line)[0] for line in (folder / "requirements.txt").read_text().split()}
        assert requirements == imported, name
        card = (folder / "README.md").read_text()
        assert all(f"`{library}`" in card.split("## Requirements")[1].split("##")[0] for library in imported), name


BLOCKED_METRICS = """
import evaluate
from sklearn.metrics import fbeta_score, matthews_corrcoef
folder = sys.argv[1]
y, p = [0, 1, 2, 0, 1, 2, 2, 1], [0, 2, 1, 0, 1, 2, 2, 2]
fbeta = evaluate.load(folder + "/macro_fbeta").compute(predictions=p, references=y, beta=[0.5, 1.0, 2.0])
expected = sum(fbeta_score(y, p, beta=b, labels=[k], average="macro") for k, b in enumerate([0.5, 1.0, 2.0])) / 3
assert abs(fbeta["fbeta"] - expected) < 1e-12, (fbeta, expected)
mcc = evaluate.load(folder + "/mcc").compute(predictions=p, references=y, sample_weight=[1, 2, 1, 1, 3, 1, 1, 1])
expected = matthews_corrcoef(y, p, sample_weight=[1, 2, 1, 1, 3, 1, 1, 1])
assert abs(mcc["mcc"] - expected) < 1e-12, (mcc, expected)
assert not [name for name in sys.modules if name.split(".")[0] == "east_hf"], "east_hf was imported"
print("COMPUTED", round(fbeta["fbeta"], 6), round(mcc["mcc"], 6))
"""


def test_modules_compute_without_east_hf(tmp_path):
    """Each module folder, copied as it would be pushed to the Hub, loads by path and computes where east_hf cannot
    be imported, equal to scikit-learn."""
    pushed = tmp_path / "hub"
    for name in METRIC_NAMES:
        shutil.copytree(METRIC_DIR / name, pushed / name, ignore=shutil.ignore_patterns("__pycache__"))
        assert {p.name for p in (pushed / name).iterdir()} == {f"{name}.py", "README.md", "requirements.txt", "app.py"}
    result = run_without_east_hf(BLOCKED_METRICS, tmp_path, pushed)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "COMPUTED" in result.stdout


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_kwargs_description_examples_run(name, loaded, monkeypatch):
    monkeypatch.chdir(METRIC_DIR)  # the examples' evaluate.load("<name>") finds ./<name>/<name>.py, as on the Hub
    text = loaded[name].inputs_description  # evaluate's copy of _KWARGS_DESCRIPTION
    spec = importlib.util.spec_from_file_location(f"east_metric_{name}", METRIC_DIR / name / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the script also imports as a plain module (pytest --doctest-modules does)
    assert text == module._KWARGS_DESCRIPTION
    failed, attempted = run_examples(text, name)
    assert attempted >= 4 and failed == 0


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_readme_examples_run(name, loaded, monkeypatch):
    monkeypatch.chdir(METRIC_DIR)
    card = (METRIC_DIR / name / "README.md").read_text()
    assert card.startswith("---\n") and "# Metric Card for" in card
    blocks = re.findall(r"```python\n(.*?)```", card, flags=re.S)
    failed, attempted = run_examples("\n".join(b for b in blocks if ">>>" in b), f"{name}/README.md")
    assert attempted >= 4 and failed == 0


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
