"""EASTTrainer evaluation from per-batch counts: the metrics of the full gather, without keeping any logit (one and two
processes)."""

import json

import pytest
import torch
from helpers import (
    IgnoredRows,
    PlainClassifier,
    TinyTabular,
    east_args,
)

from east_hf import EASTTrainer

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- evaluation from per-batch counts: the metrics of the full gather, without keeping any logit ----
_TIMING = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_model_preparation_time", "epoch")


def _full_gather_metrics(compute_metrics):
    """A plain-function ``compute_metrics``: the Trainer gathers every logit and calls it once, and it scores the
    (C, C) confusion matrix with the core (the evaluation path that keeps all logits)."""

    def score(pred):
        confmat = compute_metrics.confusion_matrix(pred.predictions, pred.label_ids)
        return compute_metrics.from_confusion_matrix(confmat)

    return score


def _two_trainers(tmp_path, loss, num_classes, average, **more):
    """The same model and data twice: east_hf's ComputeMetrics (scored from counts) and the full gather."""
    from east_hf.hf.metrics import build_compute_metrics

    beta = 0.5 if average == "micro" else [1.0] * (num_classes - 1) + [2.0]
    args = east_args(tmp_path, east_loss=loss, east_average=average, east_beta=beta, per_device_eval_batch_size=8)
    torch.manual_seed(0)
    model = PlainClassifier(num_classes=num_classes)
    data = IgnoredRows(slice(5, 8), n=41, num_classes=num_classes, seed=3, noise=2.0)  # uneven last batch
    trainers = []
    for counted in (True, False):
        metrics = build_compute_metrics(num_classes, beta=beta, average=average, report_classes="all")
        trainers.append(
            EASTTrainer(
                model=model,
                args=args,
                train_dataset=TinyTabular(num_classes=num_classes),
                eval_dataset=data,
                compute_metrics=metrics if counted else _full_gather_metrics(metrics),
                **more,
            )
        )
    return trainers


@pytest.mark.parametrize(
    "loss, num_classes, average",
    [("east", 3, "macro"), ("east", 3, "weighted"), ("ce", 3, "micro"), ("dice", 3, "macro"), ("east", 2, "binary")],
)
def test_evaluation_from_counts_reports_every_key_of_the_full_gather_exactly(tmp_path, loss, num_classes, average):
    counted, gathered = _two_trainers(tmp_path, loss, num_classes, average)
    new, old = counted.evaluate(), gathered.evaluate()
    for key in _TIMING:
        new.pop(key, None), old.pop(key, None)
    assert new == old and list(new) == list(old)  # every value exactly, in the Trainer's order
    per_class = {f"eval_{m}_{k}" for m in ("precision", "recall", "fbeta") for k in range(num_classes)}
    expected = {"eval_loss", "eval_fbeta", "eval_mcc", "eval_accuracy", counted.args.east_anneal_key} | per_class
    assert expected <= set(new)


def test_evaluation_from_counts_keeps_no_logits_and_predict_still_returns_them(tmp_path):
    counted, gathered = _two_trainers(tmp_path, "east", 3, "macro")
    seen = {}

    def spy(trainer, name):
        gather = trainer.gather_function

        def counting(tensors):
            seen[name] = seen.get(name, 0) + 1
            return gather(tensors)

        trainer.gather_function = counting

    for trainer, name in ((counted, "counted"), (gathered, "gathered")):
        spy(trainer, name)
        trainer.evaluate()
    assert "counted" not in seen and seen["gathered"] > 0  # nothing is gathered: no logits, no batch losses
    metrics = counted.evaluate()
    predicted = counted.predict(counted.eval_dataset, metric_key_prefix="eval")
    assert predicted.predictions.shape == (41, 3) and predicted.label_ids.shape == (41,)
    assert {k: v for k, v in predicted.metrics.items() if k not in _TIMING} == {
        k: v for k, v in metrics.items() if k.startswith("eval_") and k not in _TIMING
    }


def test_evaluation_from_counts_applies_preprocess_logits_for_metrics(tmp_path):
    def argmax(logits, labels):
        return logits.argmax(dim=1)

    counted, gathered = _two_trainers(tmp_path, "ce", 3, "macro", preprocess_logits_for_metrics=argmax)
    new, old = counted.evaluate(), gathered.evaluate()
    assert {k: v for k, v in new.items() if k not in _TIMING} == {k: v for k, v in old.items() if k not in _TIMING}


_TWO_PROCESS_EVALUATION = """
import json, sys
import torch
from helpers import PlainClassifier, TinyTabular, east_args
from east_hf import EASTTrainer
from east_hf.hf.metrics import build_compute_metrics

out, loss = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = PlainClassifier()
data = TinyTabular(29, seed=3, noise=2.0)  # 2 processes x 4 rows a batch: the last batch holds 5 of 8
data.y[[2, 11]] = -100
args = east_args(out, east_loss=loss, per_device_eval_batch_size=4)
metrics = build_compute_metrics(3, report_classes="all")
def full_gather(pred):
    return metrics.from_confusion_matrix(metrics.confusion_matrix(pred.predictions, pred.label_ids))
results, gathers = {}, {}
for name, compute in (("counted", metrics), ("gathered", full_gather)):
    trainer = EASTTrainer(
        model=model, args=args, train_dataset=TinyTabular(), eval_dataset=data, compute_metrics=compute
    )
    gather, sizes = trainer.accelerator.gather, []
    trainer.accelerator.gather = lambda t: sizes.append(t.numel()) or gather(t)
    results[name] = {k: v for k, v in trainer.evaluate().items() if not k.endswith(("_time", "_runtime", "_second"))}
    gathers[name] = max(sizes, default=0)  # the largest tensor gathered
predicted = trainer.predict(data)
results["world_size"] = trainer.accelerator.num_processes
results["predicted_rows"] = len(predicted.predictions)
results["gathers"] = gathers
if trainer.is_world_process_zero():
    json.dump(results, open(f"{out}/result.json", "w"))
import torch.distributed as dist
dist.destroy_process_group()
"""


@pytest.mark.parametrize("loss", ["east", "ce"])
def test_two_process_evaluation_from_counts_equals_the_full_gather(tmp_path, loss):
    """Two CPU processes over an uneven evaluation set: the repeated rows of the last batch are counted once, as
    gather_for_metrics drops them; every hard metric equals the full gather's exactly, eval_loss up to float32
    summation order; and no logit is gathered."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    script = tmp_path / "evaluate_two.py"
    script.write_text(_TWO_PROCESS_EVALUATION)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node", "2", str(script), str(tmp_path), loss],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["world_size"] == 2 and result["predicted_rows"] == 29
    new, old = result["counted"], result["gathered"]
    assert new.pop("eval_loss") == pytest.approx(old.pop("eval_loss"), rel=1e-6)
    assert new == old
    assert result["gathers"]["counted"] <= 1  # a flag at most (a non-finite training step), never a logit
    assert result["gathers"]["gathered"] >= 4 * 3  # a batch of logits


# ---- bounded temporaries: the statistics of a batch a chunk of rows at a time ----


@pytest.mark.parametrize("loss", ["east", "ce", "dice"])
def test_evaluation_in_chunks_of_rows_equals_whole_batches(tmp_path, monkeypatch, loss):
    """One row a chunk (``_CHUNK_ELEMENTS`` below C) against whole batches: every hard metric exactly, eval_loss up to
    float32 summation order; the loss never sees more than a chunk of rows at once."""
    from east_hf.hf.training import evaluation

    counted, _ = _two_trainers(tmp_path, loss, 3, "macro")
    whole = counted.evaluate()
    predicted = counted.predict(counted.eval_dataset)
    seen = []
    statistics = counted.east_loss.statistics
    monkeypatch.setattr(
        counted.east_loss, "statistics", lambda z, y, *a, **k: seen.append(len(z)) or statistics(z, y, *a, **k)
    )
    monkeypatch.setattr(evaluation, "_CHUNK_ELEMENTS", 2)  # 2 // 3 classes: one row a chunk
    chunked = counted.evaluate()
    assert seen and max(seen) == 1
    for key in _TIMING:
        whole.pop(key, None), chunked.pop(key, None)
    assert chunked.pop("eval_loss") == pytest.approx(whole.pop("eval_loss"), rel=1e-6)
    assert chunked == whole and list(chunked) == list(whole)
    again = counted.predict(counted.eval_dataset)
    assert torch.equal(torch.as_tensor(again.predictions), torch.as_tensor(predicted.predictions))
    assert again.metrics["test_loss"] == pytest.approx(predicted.metrics["test_loss"], rel=1e-6)


def test_evaluation_finiteness_check_in_chunks(tmp_path, monkeypatch):
    """A NaN row is found whichever chunk holds it, with the count of the whole batch."""
    from east_hf.hf.training import evaluation

    counted, _ = _two_trainers(tmp_path, "ce", 3, "macro")
    monkeypatch.setattr(evaluation, "_CHUNK_ELEMENTS", 6)  # two rows a chunk
    logits = torch.zeros(5, 3)
    logits[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf in 1 of 5 rows"):
        counted._evaluator.check_logits(logits, counted.state.global_step)


# ---- the decision-rule tuner reads the validation logits from a temporary file ----


def _tuning_trainer(tmp_path, **more):
    torch.manual_seed(0)
    data = IgnoredRows(slice(5, 8), n=41, num_classes=4, seed=3, noise=2.0)  # 3 padded rows, an uneven last batch
    args = east_args(tmp_path, east_loss="ce", per_device_eval_batch_size=8, **more)
    model = PlainClassifier(num_classes=4)
    return EASTTrainer(model=model, args=args, train_dataset=TinyTabular(num_classes=4), eval_dataset=data), data


def test_tune_decision_rule_reads_a_file_and_removes_it(tmp_path, monkeypatch):
    """The rule tuned from the file equals the rule of the gathered logits bit for bit; the file lives under
    output_dir while the tuner runs and is gone afterwards."""
    from east_hf.core.decision import rule as decision

    trainer, data = _tuning_trainer(tmp_path)
    predicted = trainer.predict(data)
    logits, labels = torch.as_tensor(predicted.predictions), torch.as_tensor(predicted.label_ids)
    expected = decision.tune_logit_offsets(logits, labels, "fbeta")
    seen = {}
    tune = decision.tune_logit_offsets

    def spy(stored, labels, *args, **kwargs):
        seen.update(kind=type(stored), folder=stored.directory, rows=stored.shape[0])
        assert stored.directory.parent == tmp_path and (stored.directory / "rows.bin").is_file()
        return tune(stored, labels, *args, **kwargs)

    monkeypatch.setattr("east_hf.hf.decision_rule.tune_logit_offsets", spy)  # where the trainer's tuning looks it up
    bias = trainer.model.net[-1].bias.detach().clone()
    rule = trainer.tune_decision_rule()
    assert seen["kind"] is decision.LogitsFile and seen["rows"] == 38  # the 3 rows labelled -100 are not written
    assert not seen["folder"].exists() and not list(tmp_path.glob("east-logits-*"))
    assert torch.equal(rule.offsets, expected.offsets) and rule.score == expected.score
    assert torch.equal(trainer.model.net[-1].bias.detach(), bias + rule.offsets)


def test_tune_decision_rule_removes_the_file_after_an_error(tmp_path, monkeypatch):
    trainer, _ = _tuning_trainer(tmp_path)

    def fails(stored, labels, *args, **kwargs):
        stored.finish()
        raise RuntimeError("tuning failed")

    monkeypatch.setattr("east_hf.hf.decision_rule.tune_logit_offsets", fails)
    with pytest.raises(RuntimeError, match="tuning failed"):
        trainer.tune_decision_rule()
    assert not list(tmp_path.glob("east-logits-*")) and trainer.decision_rule is None


_TWO_PROCESS_TUNING = """
import json, sys
import torch
from helpers import IgnoredRows, PlainClassifier, TinyTabular, east_args
from east_hf import EASTTrainer
from east_hf.core.decision.rule import tune_logit_offsets

out = sys.argv[1]
torch.manual_seed(0)
data = IgnoredRows(slice(5, 8), n=29, num_classes=4, seed=3, noise=2.0)  # 2 processes x 4 rows: an uneven end
args = east_args(out, east_loss="ce", per_device_eval_batch_size=4)
trainer = EASTTrainer(model=PlainClassifier(num_classes=4), args=args, train_dataset=TinyTabular(num_classes=4),
                      eval_dataset=data)
predicted = trainer.predict(data)
expected = tune_logit_offsets(torch.as_tensor(predicted.predictions), torch.as_tensor(predicted.label_ids))
rule = trainer.tune_decision_rule()
offsets = trainer.accelerator.gather(rule.offsets[None])  # (2, C): every process's rule
if trainer.is_world_process_zero():
    json.dump({"offsets": offsets.tolist(), "expected": expected.offsets.tolist(), "score": rule.score,
               "expected_score": expected.score,
               "left": sorted(p.name for p in __import__("pathlib").Path(out).iterdir())},
              open(f"{out}/result.json", "w"))
import torch.distributed as dist
dist.destroy_process_group()
"""


def test_two_process_tuning_gives_every_process_the_rule_of_the_gathered_logits(tmp_path):
    """Two CPU processes: the main process tunes from its file, every process folds the same offsets, equal to the
    rule of the gathered logits, and the file is gone."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    script = tmp_path / "tune_two.py"
    script.write_text(_TWO_PROCESS_TUNING)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node", "2", str(script), str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["offsets"][0] == result["offsets"][1] == result["expected"]
    assert result["score"] == result["expected_score"]
    assert not [name for name in result["left"] if name.startswith("east-logits-")]
