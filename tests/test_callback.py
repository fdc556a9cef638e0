"""TemperatureAnnealingCallback driven by synthetic evaluations:
exact temperatures, stage-best weights, stops, state."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
import torch
from callback_driver import Driver, fake_args

from east_hf.core.annealing import AnnealingSchedule
from east_hf.hf.config.east_config import EASTConfig
from east_hf.hf.training.callbacks import STAGE_BEST_WEIGHTS_NAME, TemperatureAnnealingCallback

STAGES = [(1.0, 0.5), (0.9, 0.6), (0.95, 0.6)]  # patience 1: each triple is a stage (end on the 3rd)


def test_callback_sets_exact_temperatures_and_stops():
    callback = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=2)
    driver = Driver(callback).begin()
    assert callback.schedule.temperature == 0.2 and callback.schedule.stage == 0
    # stage 0: steps 1-3 (best F1 0.6); stage 1: same values, a tie (1 stage w/o improvement); stage 2: tie -> stop
    temperatures = driver.run(STAGES * 4)
    assert temperatures == [0.2, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05]
    assert driver.state.global_step == 9 and driver.control.should_training_stop
    assert callback.schedule.stop_reason == "stage_patience" and callback.schedule.stage == 2
    assert not callback.schedule.in_warm_start


def test_callback_restores_the_stage_best_weights_before_the_next_step():
    callback = TemperatureAnnealingCallback(decay=0.5, patience=2, stage_patience=5)
    driver = Driver(callback).begin()
    driver.run([(1.0, 0.5), (0.8, 0.6), (0.9, 0.6), (0.85, 0.6)])  # best at step 2; the stage ends at step 4
    assert callback.schedule.stage == 1 and callback.restore_pending
    assert driver.model.weight.unique().tolist() == [4.0]  # deferred: step 4's checkpoint holds step 4's weights
    callback.on_step_begin(driver.args, driver.state, driver.control, model=driver.model)
    assert driver.model.weight.unique().tolist() == [2.0] and not callback.restore_pending


def test_callback_without_restore_keeps_the_last_weights():
    callback = TemperatureAnnealingCallback(patience=1, restore_best_per_stage=False)
    driver = Driver(callback).begin()
    driver.run(STAGES[:3] + [(1.0, 0.5)])
    assert callback.schedule.stage == 1 and driver.model.weight.unique().tolist() == [4.0]


def test_callback_warm_start_runs_cross_entropy_and_hands_over_its_best_weights():
    callback = TemperatureAnnealingCallback(patience=2, warm_start="ce")
    driver = Driver(callback).begin()
    assert callback.schedule.in_warm_start and callback.schedule.stage == -1
    assert callback.schedule.temperature == 0.2
    driver.run([(2.0, 0.4), (1.5, 0.6), (1.6, 0.6), (1.7, 0.5)])  # CE best at step 2, ends at step 4
    assert not callback.schedule.in_warm_start and callback.schedule.stage == 0
    assert callback.schedule.best_anneal == 0.6 and callback.schedule.best_anneal_stage == -1
    assert driver.model.weight.unique().tolist() == [4.0] and callback.restore_pending
    callback.on_step_begin(driver.args, driver.state, driver.control, model=driver.model)
    assert driver.model.weight.unique().tolist() == [2.0]  # the first EAST step starts from the CE best
    driver.evaluate(0.3, 0.7)
    assert callback._stage_weights["weight"].unique().tolist() == [5.0]  # stage 0's first best
    assert callback.schedule.temperature == 0.2


def test_callback_warm_start_of_fixed_length_requests_the_evaluation_at_its_step():
    callback = TemperatureAnnealingCallback(patience=1, warm_start="ce", warm_start_steps=3)
    driver = Driver(callback).begin()
    driver.evaluate(2.0, 0.4)
    driver.evaluate(2.5, 0.4)  # patience 1 does not end a fixed-length warm start
    assert callback.schedule.in_warm_start
    driver.callback.on_step_begin(driver.args, driver.state, driver.control, model=driver.model)
    driver.state.global_step = 3
    callback.on_step_end(driver.args, driver.state, driver.control)
    assert driver.control.should_evaluate  # the Trainer evaluates at step 3 even off its eval_steps grid
    assert driver.control.should_save  # and saves it: a best evaluation without a checkpoint could not be kept
    callback.on_evaluate(driver.args, driver.state, driver.control, metrics={"eval_loss": 1.0, "eval_fbeta": 0.5})
    assert callback.schedule.stage == 0 and not callback.schedule.in_warm_start
    assert not callback.restore_pending  # step 3 improved: its own weights are the warm start's best


def test_callback_warns_when_the_budget_ends_training_before_the_annealing(caplog):
    callback = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=2)
    driver = Driver(callback).begin()
    driver.state.max_steps = 4
    driver.run(STAGES + STAGES[:1])  # stage 0 ends at step 3; the budget ends stage 1 at step 4
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.training.callbacks"):
        callback.on_train_end(driver.args, driver.state, driver.control)
    assert "whole budget (max_steps=4) in stage 1 (T=0.1), before the annealing's stopping" in caplog.text
    caplog.clear()
    finished = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=2)
    driver = Driver(finished).begin()
    driver.run(STAGES * 4)  # ends on the annealing criterion at step 9
    driver.state.max_steps = 9
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.training.callbacks"):
        finished.on_train_end(driver.args, driver.state, driver.control)
    assert finished.schedule.finished and "budget" not in caplog.text


def test_the_budget_warning_of_a_baseline_names_no_stage_or_temperature(caplog):
    """A baseline's callback (reports_temperature False, as the builder makes it for a loss without a temperature)
    says where the budget ended without a temperature the loss never had."""
    callback = TemperatureAnnealingCallback(max_stages=1, patience=3, reports_temperature=False)
    driver = Driver(callback).begin()
    driver.state.max_steps = 2
    driver.run(STAGES[:2])
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.training.callbacks"):
        callback.on_train_end(driver.args, driver.state, driver.control)
    assert "whole budget (max_steps=2) in training, before its early stopping" in caplog.text
    assert "T=" not in caplog.text


@pytest.mark.parametrize(("loss", "reports"), [("east", True), ("ce", False), ("dice", False)])
def test_the_builder_tells_the_callback_whether_the_loss_has_a_temperature(tmp_path, loss, reports):
    from helpers import annealing_trainer

    assert annealing_trainer(tmp_path, east_loss=loss).annealing.reports_temperature is reports


def test_a_resumed_callback_reports_as_the_one_it_replaces():
    """A resumed Trainer makes the callback from the saved args and sets the saved attributes on it."""
    callback = TemperatureAnnealingCallback(max_stages=1, reports_temperature=False)
    state = json.loads(json.dumps(callback.state()))
    fresh = TemperatureAnnealingCallback(**state["args"])
    for name, value in state["attributes"].items():
        setattr(fresh, name, value)
    assert fresh.reports_temperature is False


def test_callback_missing_key_names_the_keys_that_appeared():
    callback = TemperatureAnnealingCallback(anneal_monitor="mcc")
    driver = Driver(callback).begin()
    with pytest.raises(ValueError, match=r"\['eval_mcc'\].*\['eval_accuracy', 'eval_fbeta', 'eval_loss'\]"):
        driver.evaluate(1.0, 0.5)


def test_callback_needs_evaluations_and_valid_settings():
    with pytest.raises(ValueError, match="eval_strategy"):
        Driver(TemperatureAnnealingCallback(), args=fake_args(eval_strategy="no")).begin()
    with pytest.raises(ValueError, match="warm_start"):
        TemperatureAnnealingCallback(warm_start="dice")
    with pytest.raises(TypeError, match="both"):
        TemperatureAnnealingCallback(AnnealingSchedule(), decay=0.5)


def test_callback_ignores_evaluations_outside_training():
    callback = TemperatureAnnealingCallback(patience=1)
    driver = Driver(callback)  # no on_train_begin: e.g. trainer.evaluate() before or after train()
    callback.on_evaluate(driver.args, driver.state, driver.control, metrics={"test_loss": 1.0})
    assert callback.schedule.state_dict() == AnnealingSchedule().state_dict()


def restored(callback):
    """A new callback from the JSON state a checkpoint keeps in trainer_state.json: built from its settings, then its
    schedule's state loaded (the real resume through EASTTrainer is in test_trainer.py)."""
    state = json.loads(json.dumps(callback.state()))
    fresh = TemperatureAnnealingCallback(**state["args"])
    fresh.schedule.load_state_dict(state["attributes"]["schedule_state"])
    fresh.restore_pending = state["attributes"]["restore_pending"]
    return fresh


def test_callback_state_round_trip_resumes_stage_counters_and_temperature(tmp_path):
    values = [(2.0, 0.4), (1.5, 0.5), (1.6, 0.5), (1.7, 0.5)]  # CE warm start: best at step 2, ends at step 4
    values += [(0.8, 0.6), (0.7, 0.65), (0.75, 0.6), (0.75, 0.6)]  # stage 0 (T=0.2): best at step 6, ends at 8
    values += [(0.6, 0.7), (0.65, 0.7), (0.65, 0.7)]  # stage 1 (T=0.1): best at step 9, ends at 11
    values += [(0.5, 0.7), (0.6, 0.7), (0.6, 0.7), (0.4, 0.7), (0.5, 0.7), (0.5, 0.7)]  # two ties: stop at 17
    kwargs = dict(decay=0.5, patience=2, stage_patience=2, warm_start="ce")
    reference = Driver(TemperatureAnnealingCallback(**kwargs)).begin()
    expected = reference.run(values)
    assert expected == [0.2] * 7 + [0.1] * 3 + [0.05] * 3 + [0.025] * 4 and reference.state.global_step == 17

    first = Driver(TemperatureAnnealingCallback(**kwargs), args=fake_args(tmp_path)).begin()
    head = first.run(values[:10])  # checkpoint at step 10: stage 1, its best (step 9) is not the current weights
    (tmp_path / "checkpoint-10").mkdir()
    first.callback.on_save(first.args, first.state, first.control)
    assert (tmp_path / "checkpoint-10" / STAGE_BEST_WEIGHTS_NAME).is_file()

    fresh = restored(first.callback)
    second = Driver(fresh, args=first.args, step=10)
    second.begin()  # stage 1's temperature, past the warm start, and step 9's weights reloaded
    assert (fresh.schedule.temperature, fresh.schedule.stage, fresh.schedule.in_warm_start) == (0.1, 1, False)
    assert fresh._stage_weights["weight"].unique().tolist() == [9.0]
    tail = second.run(values[10:11])
    assert fresh.restore_pending and fresh._stage_weights["weight"].unique().tolist() == [9.0]
    tail += second.run(values[11:])
    assert head + tail == expected and second.state.global_step == 17
    assert fresh.schedule.state_dict() == reference.callback.schedule.state_dict()


def test_warm_start_epochs_are_checked():
    with pytest.raises(ValueError, match="warm_start_epochs"):
        TemperatureAnnealingCallback(warm_start="ce", warm_start_epochs=0)
    with pytest.raises(ValueError, match="east_warm_start_epochs"):
        EASTConfig(output_dir="out", report_to=[], east_warm_start_epochs=0)


def test_callback_state_lists_the_stage_best_file_exactly_when_on_save_writes_it(tmp_path):
    """The Trainer writes trainer_state.json (with ``state()``) before ``on_save``: the listing must say in advance
    which checkpoints carry east_stage_best.pt, so that a save cut off between the two is found incomplete."""
    callback = TemperatureAnnealingCallback(decay=0.5, patience=2, stage_patience=5)
    driver = Driver(callback, args=fake_args(tmp_path)).begin()
    assert callback.state()["attributes"]["checkpoint_files"] == []
    listed, written = [], []
    for loss, f1 in [(1.0, 0.5), (0.8, 0.6), (0.9, 0.6), (0.85, 0.6), (0.7, 0.6), (0.75, 0.6), (0.6, 0.6)]:
        driver.evaluate(loss, f1)
        step = driver.state.global_step
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if callback.state()["attributes"]["checkpoint_files"] == [STAGE_BEST_WEIGHTS_NAME]:
            listed.append(step)
        callback.on_save(driver.args, driver.state, driver.control)
        if (folder / STAGE_BEST_WEIGHTS_NAME).is_file():
            written.append(step)
    # best at 2, not its own weights at 3 and 4 (the stage ends at 4, restored at 5); stage 1: best at 5, 7
    assert listed == written == [3, 4, 6]
    assert torch.load(tmp_path / "checkpoint-4" / STAGE_BEST_WEIGHTS_NAME)["weight"].unique().tolist() == [2.0]
    # a resumed Trainer sets each saved attribute on a new instance; the listing is derived again, not kept
    fresh = TemperatureAnnealingCallback(**json.loads(json.dumps(callback.state()))["args"])
    for name, value in callback.state()["attributes"].items():
        setattr(fresh, name, value)
    assert fresh.checkpoint_files == []


@pytest.mark.parametrize(
    "notes, falls_back",
    [
        ([True] * 5, True),  # every evaluation predicted one class: a second warm start instead of the stop
        ([True] * 4 + [False], False),  # the last one told classes apart
        ([True, None, True, True, True], False),  # one left unsaid (a Trainer of transformers' own says nothing)
    ],
    ids=["one class throughout", "told apart once", "unsaid once"],
)
def test_ce_fallback_goes_on_only_where_every_evaluation_predicted_one_class(notes, falls_back):
    """Warm start of 1 step, then stages of patience 1 whose values never improve: the annealing would stop at the
    5th evaluation. With ce_fallback it goes on in a warm start (stage -1) where the trainer noted one class at every
    evaluation; once per run."""
    callback = TemperatureAnnealingCallback(
        decay=0.5, patience=1, stage_patience=2, warm_start="ce", warm_start_steps=1, ce_fallback=True
    )
    driver = Driver(callback).begin()
    for note in notes:
        if note is not None:
            callback.note_evaluation(predicted_one_class=note)
        driver.evaluate(1.0, 0.2)
    assert driver.control.should_training_stop is not falls_back
    assert callback.schedule.fell_back is falls_back and callback.schedule.in_warm_start is falls_back
    if falls_back:
        for _ in range(6):  # its warm start (its own early stopping), then two stages without improvement: stop
            callback.note_evaluation(predicted_one_class=True)
            driver.evaluate(1.0, 0.2)
        assert driver.control.should_training_stop and callback.schedule.finished
    # without a warm start there is none to go back to (the schedule's can_fall_back): it stops where it would
    callback = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=2, ce_fallback=True)
    driver = Driver(callback).begin()
    for _ in range(6):  # three stages of two evaluations, the last two without a better value
        callback.note_evaluation(predicted_one_class=True)
        driver.evaluate(1.0, 0.2)
    assert driver.control.should_training_stop and not callback.schedule.fell_back


# ---- how training ended: one sentence, from the schedule's state and the Trainer's ----
def _ended(callback, driver, epoch, steps, **budget):
    """The sentence at ``epoch`` of a run the Trainer gave ``steps`` optimiser steps; ``budget``: the arguments."""
    from east_hf.hf.training.ending import training_ended

    driver.state.epoch, driver.state.max_steps = epoch, steps
    args = SimpleNamespace(**{"max_steps": -1, "num_train_epochs": 8, **budget})
    return training_ended(driver.state, args, callback)


def test_training_ended_names_the_annealing_criterion_with_its_epoch_stage_and_temperature():
    callback = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=2)
    driver = Driver(callback).begin()
    driver.run(STAGES * 4)  # stages 0-2; stages 1 and 2 do not beat stage 0's best: stop at step 9
    assert _ended(callback, driver, 6.4375, 80) == (
        "Training ended on the annealing criterion at epoch 6.4 of 8, stage 2, T = 0.05: "
        "2 stages without a better validation fbeta"
    )
    assert _ended(callback, driver, 6.4375, 300, max_steps=300) == (
        "Training ended on the annealing criterion at step 9 of 300 (epoch 6.4), stage 2, T = 0.05: "
        "2 stages without a better validation fbeta"
    )
    low = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=9, min_temperature=0.05)
    Driver(low).begin().run([(1.0, 0.5), (1.1, 0.5)] * 3)
    assert _ended(low, Driver(low), 3, 80).endswith("stage 2, T = 0.05: the temperature reached its minimum (0.05)")
    short = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=9, max_stages=2)
    Driver(short).begin().run([(1.0, 0.5), (1.1, 0.5)] * 2)
    assert _ended(short, Driver(short), 2, 80).endswith("stage 1, T = 0.1: its last stage of max_stages=2 ended")


def test_training_ended_early_for_a_baseline_names_its_patience_and_the_stage_monitor():
    callback = TemperatureAnnealingCallback(max_stages=1, patience=2, reports_temperature=False)
    driver = Driver(callback).begin()
    driver.run([(1.0, 0.5), (1.1, 0.5), (1.2, 0.5)])
    assert callback.schedule.finished
    assert _ended(callback, driver, 3.6875, 80, num_train_epochs=30) == (
        "Training ended early at epoch 3.7 of 30: 2 evaluations without a better validation loss"
    )


def test_training_ended_after_its_whole_budget_says_where_and_before_what():
    callback = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=2)
    driver = Driver(callback).begin()
    driver.run(STAGES + STAGES[:1])  # stage 1 at step 4
    assert _ended(callback, driver, 8.0, 4) == (
        "Training ended after its whole budget (8 epochs) in stage 1 (T = 0.1), before the annealing criterion"
    )
    assert _ended(callback, driver, 1.0, 4, num_train_epochs=1).startswith(
        "Training ended after its whole budget (1 epoch) in stage 1"
    )
    budget = "Training ended after its whole budget (max_steps=4)"
    assert _ended(callback, driver, 0.5, 4, max_steps=4).startswith(budget)
    warm = TemperatureAnnealingCallback(warm_start="ce", patience=3)
    driver = Driver(warm).begin()
    driver.run(STAGES)
    assert _ended(warm, driver, 8.0, 3) == (
        "Training ended after its whole budget (8 epochs) in the warm start, before the annealing criterion"
    )
    baseline = TemperatureAnnealingCallback(max_stages=1, patience=3, reports_temperature=False)
    driver = Driver(baseline).begin()
    driver.run(STAGES[:2])
    assert _ended(baseline, driver, 8.0, 2) == (
        "Training ended after its whole budget (8 epochs), before its early stopping"
    )
    assert _ended(baseline, driver, 2.5, 80) == (
        "Training ended at epoch 2.5 of 8, before its early stopping: a callback stopped it"
    )
    assert _ended(None, driver, 8.0, 2) == "Training ended after its whole budget (8 epochs)"


def test_training_ended_after_a_fallback_to_plain_cross_entropy_says_so():
    callback = TemperatureAnnealingCallback(
        decay=0.5, patience=1, stage_patience=2, warm_start="ce", warm_start_steps=1, ce_fallback=True
    )
    driver = Driver(callback).begin()
    for _ in range(5):  # the annealing would stop at the 5th evaluation: a second warm start instead
        callback.note_evaluation(predicted_one_class=True)
        driver.evaluate(1.0, 0.2)
    assert callback.schedule.fell_back
    fell_back = (
        ", after falling back to plain cross-entropy (east_ce_fallback: every validation evaluation before had "
        "predicted one class)"
    )
    assert _ended(callback, driver, 8.0, 5) == (
        f"Training ended after its whole budget (8 epochs) in the plain cross-entropy it fell back to, before the "
        f"annealing criterion{fell_back}"
    )
    for _ in range(6):
        driver.evaluate(1.0, 0.2)
    assert callback.schedule.finished
    assert _ended(callback, driver, 5.5, 80) == (
        f"Training ended on the annealing criterion at epoch 5.5 of 8, stage 1, T = 0.1: "
        f"2 stages without a better validation fbeta{fell_back}"
    )
