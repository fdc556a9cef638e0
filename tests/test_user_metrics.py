"""EASTTrainer with a compute_metrics of the user's (transformers' text-classification example's): its keys are
reported as returned, beside the trainer's own hard metrics counted from the same evaluation, so the annealing and the
best checkpoint follow the target metric with no monitor named; a key of the user's under an own key's name keeps the
user's value; a monitor that no evaluation reports is one line, before training where the keys are known."""

import re
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from helpers import PlainClassifier, annealer, blobs, east_args, evaluations
from sklearn.metrics import f1_score

from east_hf import EASTTrainer
from east_hf.hf.models.text import text_tiny_model, train_wordpiece_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

GUIDE = Path(__file__).parents[1] / "docs" / "guide" / "finetune.md"
OWN = {"eval_loss", "eval_accuracy", "eval_fbeta", "eval_mcc", "eval_precision", "eval_recall"}


def guide_compute_metrics():
    """The guide's ``compute_metrics`` (the transformers text-classification example's, with an offline metric), run
    as the page writes it."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    namespace: dict = {}
    exec(compile(next(b for b in blocks if "def compute_metrics" in b), str(GUIDE), "exec"), namespace)
    return namespace["compute_metrics"]


_WORDS = {0: "goal match team score coach", 1: "bank price market stock trade", 2: "rain wind storm cloud snow"}
_FILLER = "the a of today and we it very big small new old".split()


def _texts(n: int, seed: int) -> dict[str, list]:
    """Three topics (45 / 30 / 25 %), three topic words among three fillers each, 10 % of the labels flipped."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(3, size=n, p=[0.45, 0.3, 0.25])
    texts = [" ".join(rng.permutation([*rng.choice(_WORDS[y].split(), 3), *rng.choice(_FILLER, 3)])) for y in labels]
    flipped = rng.random(n) < 0.1
    labels[flipped] = rng.choice(3, size=int(flipped.sum()))
    return {"sentence": texts, "label": labels.tolist()}


def test_the_text_classification_example_trains_and_anneals_on_macro_fbeta(tmp_path):
    train, validation = _texts(160, 0), _texts(60, 1)
    tokenizer = train_wordpiece_tokenizer(train["sentence"], vocab_size=200, cache=False)
    torch.manual_seed(0)
    model = text_tiny_model(tokenizer, {0: "sport", 1: "money", 2: "weather"}, max_length=16, hidden_size=32)

    def tokenized(rows):  # as the example: the sentence column stays, the Trainer drops it
        return datasets.Dataset.from_dict(rows).map(
            lambda b: tokenizer(b["sentence"], truncation=True, max_length=16), batched=True
        )

    args = east_args(
        tmp_path, eval_strategy="steps", eval_steps=5, save_strategy="steps", save_steps=5,
        load_best_model_at_end=True, east_annealing=True, max_steps=200, learning_rate=1e-3,
        east_warm_start_epochs=3, east_patience=2, east_stage_patience=2, east_decay=0.5,
    )  # fmt: skip
    trainer = EASTTrainer(
        model=model,
        args=args,
        train_dataset=tokenized(train),
        eval_dataset=tokenized(validation),
        processing_class=tokenizer,
        compute_metrics=guide_compute_metrics(),
    )
    trainer.train()
    seen = evaluations(trainer)
    assert seen and all(OWN | {"eval_f1", "eval_combined_score"} <= set(e) for e in seen)
    # the user's f1 is scikit-learn's macro F1 of the same predictions: the trainer's own eval_fbeta, from counts
    assert all(e["eval_f1"] == pytest.approx(e["eval_fbeta"], abs=1e-9) for e in seen)
    assert args.metric_for_best_model == "eval_fbeta" and annealer(trainer).anneal_monitor == "eval_fbeta"
    assert annealer(trainer).schedule.stage >= 1  # it annealed (the last evaluation may be the one that lowers T)
    best = max(e["eval_fbeta"] for e in seen)
    assert best > 0.6 and trainer.state.best_metric == best  # the checkpoint kept is the best by macro F-beta
    first_best = next(e["step"] for e in seen if e["eval_fbeta"] == best)
    assert trainer.state.best_model_checkpoint.endswith(f"checkpoint-{first_best}")


def _evaluating(tmp_path, compute_metrics, **overrides):
    torch.manual_seed(0)
    return EASTTrainer(
        model=PlainClassifier(),
        args=east_args(tmp_path, **overrides),
        train_dataset=blobs(64, 0),
        eval_dataset=blobs(48, 1),
        compute_metrics=compute_metrics,
    )


def test_a_user_key_named_as_an_own_key_keeps_the_users_value(tmp_path):
    def mine(p):
        return {"fbeta": 0.25, "f1": f1_score(p.label_ids, p.predictions.argmax(1), average="macro")}

    trainer = _evaluating(tmp_path, mine)
    metrics = trainer.evaluate()
    assert metrics["eval_fbeta"] == 0.25  # the user's, under its name
    assert OWN <= set(metrics) and 0 < metrics["eval_f1"] <= 1
    order = [key for key in metrics if not key.endswith("_time")]
    assert order[:4] == ["eval_loss", "eval_fbeta", "eval_f1", "eval_accuracy"]  # the loss, the user's, the own
    predicted = trainer.predict(blobs(48, 1))  # predict reports both too
    assert OWN - {"eval_loss"} <= {k.replace("test_", "eval_") for k in predicted.metrics}
    assert predicted.metrics["test_fbeta"] == 0.25


def test_a_users_key_can_be_the_anneal_monitor(tmp_path):
    def mine(p):
        return {"f2": f1_score(p.label_ids, p.predictions.argmax(1), average="macro")}

    trainer = _evaluating(
        tmp_path, mine, eval_strategy="steps", eval_steps=4, east_annealing=True, east_anneal_monitor="eval_f2",
        east_warm_start="none", max_steps=12,
    )  # fmt: skip
    trainer.train()
    assert annealer(trainer).anneal_monitor == "eval_f2" and all("eval_f2" in e for e in evaluations(trainer))


@pytest.mark.parametrize(
    "setting, value",
    [("east_anneal_monitor", "eval_f1"), ("east_stage_monitor", "eval_f1"), ("metric_for_best_model", "f1")],
)
def test_a_monitor_no_evaluation_reports_is_refused_before_training(tmp_path, setting, value):
    trainer = _evaluating(
        tmp_path, None, eval_strategy="steps", eval_steps=4, east_annealing=True, max_steps=12, **{setting: value}
    )
    with pytest.raises(ValueError) as error:
        trainer.train()
    assert str(error.value) == (
        f"Expected {setting} among the evaluation metrics (accuracy, fbeta, loss, mcc, precision, recall), "
        f"got {value!r}"
    )
    assert trainer.state.global_step == 0  # no step trained


def test_a_monitor_the_users_keys_miss_names_both_sets_at_the_first_evaluation(tmp_path):
    def mine(p):
        return {"f1": f1_score(p.label_ids, p.predictions.argmax(1), average="macro")}

    trainer = _evaluating(
        tmp_path, mine, eval_strategy="steps", eval_steps=4, east_annealing=True, east_anneal_monitor="eval_f2",
        max_steps=12,
    )  # fmt: skip
    with pytest.raises(ValueError) as error:
        trainer.train()
    assert str(error.value) == (
        "Expected east_anneal_monitor among the evaluation metrics, got 'eval_f2': your compute_metrics reported (f1) "
        "and the trainer its own (accuracy, fbeta, loss, mcc, precision, recall); name one of them"
    )
    assert trainer.state.global_step == 4  # the keys were known at the first evaluation
