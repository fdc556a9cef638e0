"""The packaged evaluate metrics against scikit-learn, offline: the core's reports (scikit-learn's label semantics)
and the evaluate modules, which load by name and by path and whose examples run from their folder, as on the Hub."""

import ast
import doctest
import functools
import importlib.util
import re
import shutil

import numpy as np
import pytest
import torch
from helpers import run_without_east_hf, sk_prf
from reference_metrics import fbeta_report, label_confusion_matrix, mcc_report
from sklearn.metrics import fbeta_score, matthews_corrcoef, precision_recall_fscore_support

from east_hf.hf.metrics import METRIC_DIR, METRIC_NAMES, load_metric

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
