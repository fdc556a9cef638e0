"""The decision tuner on logits written to disk (``LogitsFile``): the reads equal the tensor's, the tuned rule equals
the in-memory rule bit for bit, and the temporary files are removed, also after an error."""

import pytest
import torch
from test_decision import imbalanced, library_score

from east_hf.core.decision import rule as decision
from east_hf.core.decision.logits import TensorLogits
from east_hf.core.decision.rule import LogitsFile, tune_logit_offsets


def written(folder, logits, batch=7, dtype=torch.float32):
    """A finished ``LogitsFile`` of ``logits`` under ``folder``, appended ``batch`` rows at a time."""
    stored = LogitsFile(folder, dtype=dtype)
    for part in logits.split(batch):
        stored.append(part)
    return stored.finish()


def test_reads_equal_the_tensor(tmp_path):
    logits = torch.randn(53, 6)
    stored, memory = written(tmp_path, logits), TensorLogits(logits)
    assert stored.shape == memory.shape == (53, 6) and stored.dtype == torch.float32
    for k in range(6):
        assert torch.equal(stored.columns[k], memory.columns[k])
    for index in ([0, 52, 3], [4, 5, 6, 9, 10], [17], []):
        index = torch.tensor(index, dtype=torch.int64)
        assert torch.equal(stored.rows(index), memory.rows(index))
    assert torch.equal(stored.block(40, 60), logits[40:]) and stored.block(60, 70).shape == (0, 6)
    stored.close()


def test_small_transposition_blocks(tmp_path, monkeypatch):
    """The transposed file is written a block of rows at a time: blocks of one row give the same columns."""
    from east_hf.core.decision import logits as decision_logits

    monkeypatch.setattr(decision_logits, "_TRANSPOSE_ELEMENTS", 1)
    logits = torch.randn(11, 4, dtype=torch.float64)
    stored = written(tmp_path, logits.to(torch.bfloat16).double(), batch=3, dtype=torch.float64)
    assert all(torch.equal(stored.columns[k], logits.to(torch.bfloat16).double()[:, k]) for k in range(4))
    stored.close()


CASES = [
    (2, "fbeta", dict(average="binary", beta=0.5)),
    (2, "mcc", {}),
    (5, "fbeta", dict(average="macro", beta=2.0)),
    (5, "mcc", {}),
    (6, "fbeta", dict(average="weighted")),
    (6, "precision", dict(average="micro")),
    (4, "accuracy", {}),
]


@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize("num_classes, metric, kwargs", CASES)
def test_file_gives_the_rule_of_the_tensor(tmp_path, monkeypatch, num_classes, metric, kwargs, window):
    """The same offsets, scores and rounds bit for bit; with ``window`` each sweep covers a window of rows, and with
    a tiny block every read of rows spans several blocks."""
    if window:
        monkeypatch.setattr(decision, "_WINDOW_MIN_ROWS", 3)
        monkeypatch.setattr(decision, "_WINDOW_FACTOR", 1)
        monkeypatch.setattr(decision, "_BATCH_ELEMENTS", 64)
    logits, labels = imbalanced(num_classes, 300, num_classes)
    expected = tune_logit_offsets(logits, labels, metric, **kwargs)
    with LogitsFile.temporary(dir=tmp_path) as stored:
        for part in logits.split(64):
            stored.append(part)
        rule = tune_logit_offsets(stored, labels, metric, **kwargs)
    assert torch.equal(rule.offsets, expected.offsets)
    assert (rule.score, rule.baseline_score, rule.rounds) == (expected.score, expected.baseline_score, expected.rounds)
    assert rule.score == library_score(logits + rule.offsets, labels, metric, **kwargs)


def test_file_gives_the_rule_of_the_tensor_for_a_callable_and_many_classes(tmp_path, monkeypatch):
    """A callable metric, and a named one whose scores are read from counts (``_LIBRARY_CHECK_ELEMENTS``)."""
    logits, labels = imbalanced(8, 400, 7)

    def balanced_accuracy(cm):
        return (cm.diagonal() / cm.sum(1).clamp_min(1)).mean()

    monkeypatch.setattr(decision, "_LIBRARY_CHECK_ELEMENTS", 0)
    for metric in (balanced_accuracy, "mcc"):
        expected = tune_logit_offsets(logits, labels, metric)
        with LogitsFile.temporary(dir=tmp_path) as stored:
            stored.append(logits)
            rule = tune_logit_offsets(stored, labels, metric)
        assert torch.equal(rule.offsets, expected.offsets) and rule.score == expected.score


def test_scores_from_counts_equal_the_matrix_scores(monkeypatch):
    """Above ``_LIBRARY_CHECK_ELEMENTS`` a named metric's reported scores come from float32 counts: the same values
    as from the (C, C) matrix, at argmax and at tuned offsets."""
    logits, labels = imbalanced(9, 500, 6)
    monkeypatch.setattr(decision, "_LIBRARY_CHECK_ELEMENTS", 0)
    for metric, beta in (("fbeta", [1.0, 2.0, 0.5, 1.0, 1.0, 3.0]), ("mcc", 1.0), ("recall", 1.0)):
        metric_fn = decision._library_metric(metric, (beta, "macro", 1, 0.0), 6, logits.device)
        for offsets in (None, tune_logit_offsets(logits, labels, metric, beta=beta).offsets):
            matrix = decision._library_score(TensorLogits(logits), labels, metric_fn, offsets)
            assert decision._library_score(TensorLogits(logits), labels, metric_fn, offsets, name=metric) == matrix


def test_temporary_files_are_removed(tmp_path):
    with LogitsFile.temporary(dir=tmp_path) as stored:
        stored.append(torch.randn(5, 3))
        stored.finish()
        folder = stored.directory
        assert (folder / "rows.bin").is_file() and (folder / "columns.bin").is_file()
    assert not folder.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(ZeroDivisionError):
        with LogitsFile.temporary(dir=tmp_path) as stored:
            stored.append(torch.randn(5, 3))
            folder = stored.directory
            tune_logit_offsets(stored, torch.tensor([0, 1, 2, 0, 1]), lambda cm: 1 / 0)
    assert not folder.exists() and list(tmp_path.iterdir()) == []


def test_file_errors(tmp_path):
    stored = LogitsFile(tmp_path / "a", num_classes=3)
    with pytest.raises(ValueError, match="shape \\(b, 3\\)"):
        stored.append(torch.randn(2, 4))
    with pytest.raises(ValueError, match="finite logits"):
        stored.append(torch.tensor([[0.0, float("nan"), 1.0]]))
    with pytest.raises(ValueError, match="at least one labelled row"):
        tune_logit_offsets(stored, torch.zeros(0, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="before it is finished.*after it is finished"):
        stored.append(torch.randn(2, 3))
    stored.close()
    with pytest.raises(RuntimeError, match="an open LogitsFile, got a closed one"):
        stored.columns[0]
    stored = LogitsFile(tmp_path / "b")
    stored.append(torch.randn(4, 3))
    with pytest.raises(ValueError, match="every row of a LogitsFile labelled.*1 of 4"):
        tune_logit_offsets(stored, torch.tensor([0, 1, -100, 2]))
    with pytest.raises(ValueError, match="labels in \\[0, 2\\].*got 3"):
        tune_logit_offsets(stored, torch.tensor([0, 1, 3, 2]))
    stored.close()
    with pytest.raises(ValueError, match="float32 or torch.float64"):
        LogitsFile(tmp_path / "c", dtype=torch.float16)
    with pytest.raises(ValueError, match="num_classes >= 2"):
        LogitsFile(tmp_path / "d", num_classes=1)
