"""EASTTrainer annealing: cooling and stopping, resume mid-stage, the warm start, the across-stage gain and the
annealed cross-entropy weight (a tiny MLP on CPU, evaluated every 2 steps)."""

import json

import pytest
import torch
from helpers import (
    PlainClassifier,
    WeightsSpy,
    annealer,
    annealing_trainer,
    blobs,
    evaluations,
    hard_metrics,
    loss_spy,
)
from transformers import TrainerCallback

from east_hf import EASTLoss, EASTTrainer
from east_hf.core.annealing import AnnealingSchedule, Decision
from east_hf.hf.config.build import anneal_threshold, build_annealing_callback, needs_class_counts
from east_hf.hf.config.east_config import EASTConfig
from east_hf.hf.training.callbacks import STAGE_BEST_WEIGHTS_NAME, TemperatureAnnealingCallback

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- the annealing inside EASTTrainer: a tiny MLP on CPU, evaluated every 2 steps ----
def test_trainer_cools_down_and_stops_on_the_annealing_criterion(tmp_path):
    trainer = annealing_trainer(tmp_path)
    trainer.train()
    schedule = annealer(trainer).schedule
    assert schedule.finished and trainer.state.global_step < trainer.args.max_steps
    evals = evaluations(trainer)
    assert evals[-1]["step"] == trainer.state.global_step  # the last evaluation stopped training
    temperatures = [h["east_temperature"] for h in evals]
    assert temperatures == sorted(temperatures, reverse=True) and len(set(temperatures)) >= 3
    assert all(h["east_temperature"] == 0.2 * 0.5 ** h["east_stage"] for h in evals)
    assert all("eval_east_temperature" not in h for h in evals)  # temperature and stage are logged once
    data = trainer.eval_dataset  # eval_loss is the whole-set surrogate at the logged temperature
    with torch.no_grad():
        logits = trainer.model(data.x)
    whole = EASTLoss(temperature=trainer.east_temperature)(logits, data.y).item()
    assert trainer.evaluate()["eval_loss"] == pytest.approx(whole, rel=1e-5)
    train_logs = [h for h in trainer.state.log_history if "loss" in h]
    assert {h["east_temperature"] for h in train_logs} == set(temperatures)
    assert max(h["eval_fbeta"] for h in evals) > evals[0]["eval_fbeta"] + 0.2  # it learned
    # load_best_model_at_end kept the best evaluated weights, although stages restored others after evaluating
    assert trainer.evaluate()["eval_fbeta"] == trainer.state.best_metric == max(h["eval_fbeta"] for h in evals)


def test_trainer_resumed_mid_stage_2_follows_the_uninterrupted_run(tmp_path):
    trainer = annealing_trainer(tmp_path)
    trainer.train()
    reference = [(h["step"], h["east_stage"], h["east_temperature"], h["eval_loss"]) for h in evaluations(trainer)]

    def callback_state(step):
        with open(tmp_path / f"checkpoint-{step}" / "trainer_state.json") as f:
            return json.load(f)["stateful_callbacks"]["TemperatureAnnealingCallback"]["attributes"]["schedule_state"]

    # The last checkpoint of stage 2: its stage best is an earlier step, restored from east_stage_best.pt at the end.
    step = max(s for s, stage, _, _ in reference if stage == 2 and callback_state(s)["stage"] == 2)
    assert callback_state(step)["stage_best_step"] < step
    assert (tmp_path / f"checkpoint-{step}" / STAGE_BEST_WEIGHTS_NAME).is_file()

    resumed = annealing_trainer(tmp_path)
    resumed.train(resume_from_checkpoint=str(tmp_path / f"checkpoint-{step}"))
    again = [(h["step"], h["east_stage"], h["east_temperature"], h["eval_loss"]) for h in evaluations(resumed)]
    assert [r[:3] for r in again] == [r[:3] for r in reference]
    assert [r[3] for r in again] == pytest.approx([r[3] for r in reference], abs=1e-6)
    assert resumed.state.global_step == trainer.state.global_step


def test_trainer_warm_start_trains_with_cross_entropy_and_hands_its_best_weights_to_east(tmp_path):
    spy = WeightsSpy()
    trainer = annealing_trainer(
        tmp_path,
        callbacks=[spy],
        east_warm_start="ce",
        east_warm_start_epochs=-1,  # until its own early stopping
        save_strategy="no",
        load_best_model_at_end=False,
        max_steps=60,
    )
    spy.trainer = trainer
    trainer.train()
    evals = evaluations(trainer)
    warm = [h for h in evals if h["east_stage"] == -1]
    end = warm[-1]["step"]  # the evaluation that ended the warm start
    assert evals[len(warm)]["east_stage"] == 0 and warm[0]["east_temperature"] == 0.2  # the warm start is at T0
    with torch.no_grad():  # during the warm start eval_loss is the cross-entropy of the whole set
        logits = spy.model_at_eval[warm[0]["step"]](trainer.eval_dataset.x)
        first = torch.nn.functional.cross_entropy(logits, trainer.eval_dataset.y)
    assert warm[0]["eval_loss"] == pytest.approx(first.item(), rel=1e-5)
    assert all(use_ce == (step < end) for step, (use_ce, _) in spy.steps.items())
    best = min(warm, key=lambda h: h["eval_loss"])["step"]
    assert best < end
    assert torch.equal(spy.steps[end][1], spy.evaluated[best])  # EAST's first step starts from the CE best
    assert not torch.equal(spy.steps[end][1], spy.evaluated[end])
    train_logs = [h for h in trainer.state.log_history if "loss" in h]
    assert all(("east_soft_fbeta" in h) == (h["east_stage"] >= 0) for h in train_logs)


def test_trainer_default_warm_start_lasts_two_epochs_of_optimiser_steps(tmp_path):
    # 64 training samples, batch 8, accumulation 2: 8 batches = 4 optimiser steps per epoch -> 8 steps of CE
    spy = WeightsSpy()
    trainer = annealing_trainer(
        tmp_path,
        callbacks=[spy],
        east_warm_start="ce",  # with the default east_warm_start_epochs=2.0
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        save_strategy="no",
        load_best_model_at_end=False,
        eval_steps=3,
        max_steps=14,
    )
    spy.trainer = trainer
    trainer.train()
    callback = next(c for c in trainer.callback_handler.callbacks if isinstance(c, TemperatureAnnealingCallback))
    assert callback.schedule.warm_start_steps == 8
    assert [step for step, (use_ce, _) in spy.steps.items() if use_ce] == list(range(8))
    stages = {h["step"]: h["east_stage"] for h in evaluations(trainer)}
    assert stages[8] == -1 and stages[9] == 0  # the warm start ends with an evaluation on its last step


def test_trainer_warm_start_ending_on_an_epoch_end_is_evaluated_once(tmp_path):
    # eval_strategy="epoch": the warm start's last step is an epoch's last step, evaluated once, by the epoch's end
    trainer = annealing_trainer(
        tmp_path,
        east_warm_start="ce",
        east_warm_start_epochs=1,
        eval_strategy="epoch",
        save_strategy="no",
        load_best_model_at_end=False,
        max_steps=12,
    )
    trainer.train()
    steps = [h["step"] for h in evaluations(trainer)]
    assert steps == sorted(set(steps)) == [4, 8, 12]  # 64 samples / batch 16 = 4 steps per epoch
    assert [h["east_stage"] for h in evaluations(trainer)][:2] == [-1, 0]


def test_the_evaluation_ending_a_warm_start_off_the_save_grid_is_checkpointed_and_kept_when_best(tmp_path):
    # 64 samples / batch 4 = 16 steps an epoch; a warm start of half an epoch ends at step 8, between the evaluations
    # and checkpoints of every 5 steps. Its evaluation is the run's best: the model kept must be that one.
    trainer = annealing_trainer(
        tmp_path,
        per_device_train_batch_size=4,
        learning_rate=0.02,
        eval_steps=5,
        save_strategy="steps",
        save_steps=5,
        logging_steps=5,
        east_warm_start="ce",
        east_warm_start_epochs=0.5,
        max_steps=10,
    )
    trainer.train()
    evaluated = [h["step"] for h in evaluations(trainer)]
    assert evaluated == [5, 8, 10]
    assert all((tmp_path / f"checkpoint-{step}").is_dir() for step in evaluated)  # each evaluation has its checkpoint
    state = trainer.state
    assert state.best_global_step == 8  # the warm start's last evaluation is the best
    assert state.best_model_checkpoint == str(tmp_path / "checkpoint-8")
    assert trainer.evaluate()["eval_fbeta"] == state.best_metric  # the model kept is the one reported


def test_the_default_across_stage_gain_is_two_validation_samples_worth(tmp_path):
    """A hard metric on a small validation set sets new bests of one sample's size by chance; each would reset the
    stage patience. By default a stage must beat the best so far by two validation samples' worth (2 / n): the
    noise-sized bests of the sequence below end the annealing, which with 0 runs on."""
    config = EASTConfig(output_dir=str(tmp_path), report_to=[])
    assert config.east_anneal_threshold is None
    assert anneal_threshold(config, 288) == pytest.approx(2 / 288)
    assert anneal_threshold(config, None) == 0.0  # size unknown (an iterable validation set)
    paper = EASTConfig(
        output_dir=str(tmp_path), report_to=[], east_warm_start="none", east_ce_weight=0, east_anneal_monitor="loss"
    )
    assert anneal_threshold(paper, 288) == 0.0  # a loss across stages: the paper's letter
    explicit = EASTConfig(output_dir=str(tmp_path), report_to=[], east_anneal_threshold=0.0)
    assert anneal_threshold(explicit, 288) == 0.0
    with pytest.raises(ValueError, match="east_anneal_threshold"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_anneal_threshold=-0.01)

    one_image = 1 / 288  # macro F1 on a balanced validation set moves by about 1 / n per image
    stage_bests = [0.90, 0.90 + one_image, 0.90 + 1.5 * one_image, 0.90 + 1.9 * one_image, 0.95, 0.95]

    def stages(threshold):
        s = AnnealingSchedule(
            patience=1, stage_patience=3, decay=0.5, min_temperature=0.001, anneal_threshold=threshold
        )
        for k, best in enumerate(stage_bests):  # two evaluations per stage: a best, then a tie ends it (patience 1)
            if s.update(1.0, best, step=2 * k) is Decision.IMPROVED and s.update(1.0, best) is Decision.STOP:
                return s.stage, s.best_anneal
        return None, s.best_anneal

    assert stages(anneal_threshold(config, 288)) == (3, 0.90)  # three stages without a real gain: stop
    assert stages(0.0) == (None, 0.95)  # every new best resets the count: the annealing goes on

    # EASTTrainer resolves it from the evaluation set it is given (a mapping: the set the anneal monitor names)
    trainer = annealing_trainer(tmp_path / "a")
    assert annealer(trainer).schedule.anneal_threshold == pytest.approx(2 / 48)
    args = EASTConfig(output_dir=str(tmp_path / "b"), report_to=[], use_cpu=True, east_anneal_monitor="eval_val_fbeta")
    trainer = EASTTrainer(
        model=PlainClassifier(),
        args=args,
        train_dataset=blobs(64, 0),
        eval_dataset={"val": blobs(40, 1), "val_big": blobs(100, 2)},
        compute_metrics=hard_metrics,
    )
    assert annealer(trainer).schedule.anneal_threshold == pytest.approx(2 / 40)
    positional = EASTTrainer(
        PlainClassifier(), EASTConfig(output_dir=str(tmp_path / "c"), report_to=[]), None, blobs(64, 0), blobs(30, 1)
    )
    assert annealer(positional).schedule.anneal_threshold == pytest.approx(2 / 30)


def test_trainer_anneals_the_cross_entropy_weight_stage_by_stage(tmp_path):
    spy = loss_spy()
    trainer = annealing_trainer(tmp_path, callbacks=[spy], east_ce_weight=2.0, east_ce_weight_decay=0.5, max_steps=120)
    spy.trainer = trainer
    trainer.train()
    seen = dict(spy.weights)
    assert len(seen) >= 3  # several stages ran
    assert all(weight == pytest.approx(2.0 * 0.5**stage) for stage, weight in seen.items())
    # the default: the annealed logit-adjusted cross-entropy for every class count; the baselines have none
    default = EASTConfig(output_dir=str(tmp_path), report_to=[])
    assert default.east_ce_weight is None and default.east_ce_loss is None
    assert (default.resolved_ce_weight, default.resolved_ce_loss) == (1.0, "la")
    paper = EASTConfig(output_dir=str(tmp_path), report_to=[], east_ce_weight=0, east_warm_start="none")
    assert paper.resolved_ce_weight == 0.0 and not needs_class_counts(paper)  # no cross-entropy trains: no priors
    baseline = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="ce")
    assert (baseline.resolved_ce_weight, baseline.resolved_ce_loss, needs_class_counts(baseline)) == (
        0.0,
        "ce",
        False,
    )
    dice = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="dice")
    assert (dice.resolved_ce_weight, dice.resolved_ce_loss) == (0.0, "ce")  # dice's warm start stays plain
    with pytest.raises(ValueError, match="east_ce_weight 0 for east_loss='ce'"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="ce", east_ce_weight=1.0)
    with pytest.raises(ValueError, match="east_ce_weight_decay in \\[0, 1\\]"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_ce_weight_decay=2.0)


def test_trainer_keeps_the_model_with_the_best_mean_over_the_select_window(tmp_path):
    """east_select_window=3: every evaluation during training reports eval_mean3_fbeta, the mean of the last three
    eval_fbeta values, and the model kept at the end is the checkpoint with the best mean,
    not the best single value."""
    trainer = annealing_trainer(tmp_path, east_select_window=3, metric_for_best_model=None)
    assert trainer.args.metric_for_best_model == "eval_mean3_fbeta" and trainer.args.greater_is_better
    trainer.train()
    evals = evaluations(trainer)
    f1 = [h["eval_fbeta"] for h in evals]
    means = [sum(f1[max(0, i - 2) : i + 1]) / len(f1[max(0, i - 2) : i + 1]) for i in range(len(f1))]
    best = max(range(len(means)), key=lambda i: (means[i], -i))  # the Trainer keeps the first of equal bests
    assert trainer.state.best_metric == pytest.approx(means[best])
    assert trainer.state.best_global_step == evals[best]["step"]
    assert trainer.evaluate()["eval_fbeta"] == pytest.approx(f1[best])


class RateSpy(TrainerCallback):
    """The learning rate and the annealing stage of each optimiser step (by the number of steps done before it)."""

    def __init__(self):
        self.trainer, self.rates = None, {}

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        self.rates[state.global_step] = (annealer(self.trainer).schedule.stage, optimizer.param_groups[0]["lr"])


def test_trainer_multiplies_the_learning_rate_by_east_lr_decay_at_each_temperature_decrease(tmp_path):
    """east_lr_decay=0.5 over the linear schedule: step s of stage k trains at 0.05 * (1 - s / 300) * 0.5^k."""
    spy = RateSpy()
    trainer = annealing_trainer(tmp_path, callbacks=[spy], east_lr_decay=0.5, lr_scheduler_type="linear")
    spy.trainer = trainer
    trainer.train()
    stages = {stage for stage, _ in spy.rates.values()}
    assert len(stages) >= 3  # several stages ran
    for step, (stage, rate) in spy.rates.items():
        assert rate == pytest.approx(0.05 * (1 - step / 300) * 0.5**stage, rel=1e-6), (step, stage)
    logged = {h["step"]: h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h}
    assert min(logged.values()) < 0.05 * 0.5 ** (max(stages) - 1)  # the logs show the scaled rate
    with pytest.raises(ValueError, match=r"east_lr_decay in \(0, 1\], got 0"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_lr_decay=0)


def test_east_lr_decay_defaults_to_half_for_east_with_one_class_scored(tmp_path):
    def resolved(**fields):
        args = EASTConfig(output_dir=str(tmp_path), report_to=[], **fields)
        return args.resolved_lr_decay, build_annealing_callback(args).schedule.lr_decay

    assert resolved(east_average="binary") == (0.5, 0.5)
    assert resolved() == (1.0, 1.0)  # macro: many classes scored, the stages go on learning
    assert resolved(east_average="binary", east_lr_decay=1.0) == (1.0, 1.0)  # the paper's one rate, one flag away
    assert resolved(east_average="macro", east_lr_decay=0.7) == (0.7, 0.7)
    assert resolved(east_average="binary", east_loss="ce")[0] == 1.0  # a baseline has one stage


def test_trainer_resumed_with_east_lr_decay_keeps_the_stage_rate(tmp_path):
    """A checkpoint's scheduler holds the stage's scaled rates: a run resumed in stage 2 follows the uninterrupted
    one (scaling them again would train at a quarter of the rate)."""
    trainer = annealing_trainer(tmp_path, east_lr_decay=0.5)
    trainer.train()
    reference = [(h["step"], h["east_stage"], h["eval_loss"]) for h in evaluations(trainer)]
    step = max(s for s, stage, _ in reference if stage == 2 and s < reference[-1][0])
    resumed = annealing_trainer(tmp_path, east_lr_decay=0.5)
    resumed.train(resume_from_checkpoint=str(tmp_path / f"checkpoint-{step}"))
    again = [(h["step"], h["east_stage"], h["eval_loss"]) for h in evaluations(resumed)]
    assert [r[:2] for r in again] == [r[:2] for r in reference]
    assert [r[2] for r in again] == pytest.approx([r[2] for r in reference], abs=1e-6)


class LossNames(TrainerCallback):
    """Records (stage, the name of the loss in use, the name of its cross-entropy term) at every optimizer step."""

    def __init__(self):
        self.trainer, self.steps = None, []

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        loss = self.trainer._current_loss()
        term = getattr(getattr(loss, "cross_entropy", None), "name", None)
        self.steps.append((self.trainer.east_stage, loss.name, term))


def _wrong_priors_trainer(tmp_path, **overrides):
    """The default EAST (logit-adjusted warm start and mix) told that class 0 is a millionth of the data: its
    logit-adjusted cross-entropy drives every row to class 0, through the warm start and every stage."""
    spy = LossNames()
    trainer = annealing_trainer(
        tmp_path,
        callbacks=[spy],
        east_warm_start="ce",
        east_warm_start_epochs=2,
        east_ce_weight=None,
        east_ce_loss=None,
        east_class_priors=[1e-6, 1, 1],
        **overrides,
    )
    spy.trainer = trainer
    return trainer, spy


def test_a_run_that_tells_no_classes_apart_falls_back_to_plain_cross_entropy_and_learns(tmp_path, caplog):
    trainer, spy = _wrong_priors_trainer(tmp_path)
    with caplog.at_level("WARNING", logger="east_hf.hf.training.callbacks"):
        trainer.train()
    evals = evaluations(trainer)
    stages = [h["east_stage"] for h in evals]
    back = next(i for i in range(1, len(stages)) if stages[i] == -1 and stages[i - 1] >= 0)  # the second warm start
    one_class = evals[0]["eval_fbeta"]
    assert all(h["eval_fbeta"] == one_class for h in evals[:back]) and one_class < 0.25  # one class for every row
    assert max(h["eval_fbeta"] for h in evals[back:]) > 0.6  # plain cross-entropy learned
    warned = [r.getMessage() for r in caplog.records if "every validation evaluation so far predicted" in r.message]
    assert len(warned) == 1 and f"stop at step {evals[back - 1]['step']}" in warned[0]
    trained = set(spy.steps)
    assert (-1, "la", None) in trained and (0, "east", "la") in trained  # before the fallback
    assert (-1, "ce", None) in trained and (0, "east", "ce") in trained  # after it: the plain cross-entropy
    schedule = annealer(trainer).schedule
    assert schedule.fell_back and schedule.finished and trainer.state.global_step < trainer.args.max_steps
    assert trainer.state.best_metric > 0.6  # the model kept is one that learned
    saved = json.loads((tmp_path / f"checkpoint-{trainer.state.global_step}" / "trainer_state.json").read_text())
    attributes = saved["stateful_callbacks"]["TemperatureAnnealingCallback"]["attributes"]
    assert attributes["schedule_state"]["fell_back"] is True and attributes["one_class_so_far"] is False


def test_east_ce_fallback_false_stops_where_the_annealing_stops(tmp_path):
    trainer, spy = _wrong_priors_trainer(tmp_path, east_ce_fallback=False)
    trainer.train()
    evals = evaluations(trainer)
    assert [h["east_stage"] for h in evals] == sorted(h["east_stage"] for h in evals)  # no second warm start
    assert max(h["eval_fbeta"] for h in evals) < 0.25 and not annealer(trainer).schedule.fell_back
    assert {(name, term) for _, name, term in spy.steps} == {("la", None), ("east", "la")}


class FirstStepAfterFallback(TrainerCallback):
    """After the annealing callback: the weights and the optimiser's state at the first step after a fallback."""

    def __init__(self, trainer):
        self.trainer, self.weights, self.optimizer_state = trainer, None, None

    def on_step_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.weights is None and annealer(self.trainer).schedule.fell_back:
            self.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self.optimizer_state = dict(getattr(optimizer, "optimizer", optimizer).state)


def test_a_warm_start_that_lost_its_input_starts_over_from_the_initial_weights(tmp_path, monkeypatch, caplog):
    """With a collapse line above any spread, the wrong priors' one-class warm start counts as one that lost its input:
    where it ends (2 epochs), the next step starts from the initial weights with an empty optimiser state and plain
    cross-entropy, which learns; the warm start's checkpoints carry the initial weights for a resume."""
    monkeypatch.setattr("east_hf.hf.training.callbacks.COLLAPSE_RATIO", 1e9)
    trainer, spy = _wrong_priors_trainer(tmp_path)
    initial = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    first = FirstStepAfterFallback(trainer)
    trainer.add_callback(first)
    with caplog.at_level("WARNING", logger="east_hf.hf.training.callbacks"):
        trainer.train()
    evals = evaluations(trainer)
    end = annealer(trainer).schedule.warm_start_steps  # 2 epochs: where the first warm start ended
    assert [h["east_stage"] for h in evals if h["step"] <= end + 2] == [-1] * len(
        [h for h in evals if h["step"] <= end + 2]
    )
    assert all(torch.equal(first.weights[k], v) for k, v in initial.items()) and first.optimizer_state == {}
    warned = [r.getMessage() for r in caplog.records if "lost its input" in r.message]
    assert len(warned) == 1 and f"ended at step {end} " in warned[0]
    assert (-1, "la", None) in set(spy.steps) and (-1, "ce", None) in set(spy.steps)
    assert max(h["eval_fbeta"] for h in evals) > 0.6 and annealer(trainer).schedule.fell_back
    saved = torch.load(tmp_path / f"checkpoint-{evals[0]['step']}" / "east_initial.pt")
    assert all(torch.equal(saved[k], v) for k, v in initial.items())
    assert annealer(trainer).initial_spread > 0 and annealer(trainer).restarted_at == end
    text = trainer.create_model_card().read_text()  # the card and its ending say what happened
    assert (
        "logit-adjusted cross-entropy for 2 epochs; then, the warm start having ended predicting one class from a "
        f"network that lost its input, from the initial weights again at step {end}: plain cross-entropy"
    ) in text
    ended = next(line for line in text.splitlines() if line.startswith("Training ended"))
    assert ended.endswith(
        f"after starting over at step {end} from the initial weights with plain cross-entropy (east_ce_fallback: the "
        "warm start ended predicting one class, its network having lost its input)."
    )


def test_a_warm_start_that_keeps_its_input_goes_on(tmp_path, caplog):
    """The same one-class warm start with the shipped collapse line: the MLP's head input keeps its spread, so the
    warm start ends into stage 0 (the fallback where the annealing stops is the other test's)."""
    trainer, _ = _wrong_priors_trainer(tmp_path, max_steps=30)
    with caplog.at_level("WARNING", logger="east_hf.hf.training.callbacks"):
        trainer.train()
    stages = [h["east_stage"] for h in evaluations(trainer)]
    first = stages.index(0)
    assert first > 0 and set(stages[:first]) == {-1} and not annealer(trainer).lost_input
    assert not [r for r in caplog.records if "lost its input" in r.message]


def test_measuring_the_spread_leaves_a_run_that_never_falls_back_as_it_was(tmp_path):
    """The head input's spread is measured (east_ce_fallback) on the validation rows before the first step and at the
    warm start's one-class evaluations, between steps: a run that never falls back trains and evaluates the same to
    the last digit with the measurement on or off."""
    histories = []
    for fallback in (True, False):
        torch.manual_seed(0)
        model = PlainClassifier()
        model.net.insert(2, torch.nn.Dropout(0.3))  # training draws from torch's generator
        trainer, _ = _wrong_priors_trainer(
            tmp_path / str(fallback), east_ce_fallback=fallback, max_steps=24, model=model
        )
        trainer.train()
        callback = annealer(trainer)
        assert not callback.schedule.fell_back and (callback.lowest_spread is not None) is fallback
        histories.append([(h["step"], h["eval_loss"], h["eval_fbeta"]) for h in evaluations(trainer)])
    assert histories[0] == histories[1]
