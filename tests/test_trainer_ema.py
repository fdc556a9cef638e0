"""EASTTrainer with a moving average of the weights (``east_ema_decay``): what each evaluation sees and selects, the
BatchNorm statistics it evaluates with, its restart from a restored stage best, and its checks (a tiny MLP on CPU)."""

import pytest
import torch
from helpers import WeightsSpy, annealing_trainer, evaluations
from transformers import TrainerCallback

from east_hf.hf.config.build import build_annealing_callback
from east_hf.hf.config.east_config import EASTConfig

pytestmark = pytest.mark.usefixtures("one_thread")


class WeightSpy(TrainerCallback):
    """The first layer's training weights after each optimiser step and the weights of each evaluation."""

    def __init__(self):
        self.after_step, self.evaluated = {}, {}

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.after_step[state.global_step] = model.state_dict()["net.0.weight"].clone()

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        self.evaluated[state.global_step] = model.state_dict()["net.0.weight"].clone()


def test_trainer_evaluates_selects_and_keeps_the_moving_average_of_the_weights(tmp_path):
    """east_ema_decay=0.8: each evaluation sees w_ema <- 0.8 w_ema + 0.2 w after every step (computed here from the
    training weights), training goes on from the training weights, each checkpoint holds the weights it evaluated and
    the model kept at the end is the best average."""
    from safetensors.torch import load_file

    spy = WeightSpy()
    initial = annealing_trainer(tmp_path / "unused").model.state_dict()["net.0.weight"].clone()
    trainer = annealing_trainer(tmp_path, callbacks=[spy], east_ema_decay=0.8, east_restore_best_per_stage=False)
    trainer.train()
    average, expected = initial, {}
    for step in sorted(spy.after_step):
        average = 0.8 * average + 0.2 * spy.after_step[step]
        expected[step] = average
    assert len(spy.evaluated) >= 10
    for step, evaluated in spy.evaluated.items():
        torch.testing.assert_close(evaluated, expected[step], rtol=0, atol=1e-6)
        assert not torch.allclose(evaluated, spy.after_step[step], atol=1e-4)  # not the training weights
        saved = load_file(str(tmp_path / f"checkpoint-{step}" / "model.safetensors"))["net.0.weight"]
        torch.testing.assert_close(saved, evaluated, rtol=0, atol=0)
    for step in sorted(spy.after_step)[1:]:  # training goes on from the training weights
        assert not torch.allclose(spy.after_step[step], expected[step - 1], atol=1e-4)
    best = trainer.state.best_global_step
    torch.testing.assert_close(trainer.model.state_dict()["net.0.weight"], spy.evaluated[best], rtol=0, atol=0)
    assert trainer.evaluate()["eval_fbeta"] == trainer.state.best_metric


def test_moving_average_evaluates_with_the_training_models_batchnorm_statistics(tmp_path):
    """Averaged weights, but the BatchNorm running statistics the training model has at the evaluation's step."""

    class Normed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
            )

        def forward(self, input_values):
            return self.net(input_values)

    class Buffers(TrainerCallback):
        def __init__(self):
            self.after_step, self.evaluated = {}, {}

        def on_step_end(self, args, state, control, model=None, **kwargs):
            self.after_step[state.global_step] = {k: v.clone() for k, v in model.state_dict().items()}

        def on_evaluate(self, args, state, control, model=None, **kwargs):
            self.evaluated[state.global_step] = {k: v.clone() for k, v in model.state_dict().items()}

    spy = Buffers()
    torch.manual_seed(0)
    trainer = annealing_trainer(
        tmp_path,
        callbacks=[spy],
        model=Normed(),
        east_ema_decay=0.8,
        max_steps=12,
        save_strategy="no",
        load_best_model_at_end=False,
    )
    trainer.train()
    assert len(spy.evaluated) >= 5
    for step, evaluated in spy.evaluated.items():
        trained = spy.after_step[step]
        torch.testing.assert_close(evaluated["net.1.running_mean"], trained["net.1.running_mean"], rtol=0, atol=0)
        torch.testing.assert_close(evaluated["net.1.running_var"], trained["net.1.running_var"], rtol=0, atol=0)
        assert not torch.allclose(evaluated["net.0.weight"], trained["net.0.weight"], atol=1e-4)


def test_trainer_moving_average_restarts_from_a_restored_stage_best(tmp_path):
    """With the stage restore, the step after a stage ends starts the training weights and the average from the
    ended stage's best evaluated average; the run resumed from a checkpoint (east_ema.pt) follows the
    uninterrupted one, and a checkpoint missing the file is incomplete."""
    from east_hf.hf.training.checkpoints import EMA_WEIGHTS_NAME, checkpoint_problem

    spy = WeightsSpy()
    trainer = annealing_trainer(tmp_path, callbacks=[spy], east_ema_decay=0.8)
    spy.trainer = trainer
    trainer.train()
    evals = evaluations(trainer)
    ends = [h for h, after in zip(evals, evals[1:]) if after["east_stage"] > h["east_stage"]]
    restored = 0
    for end in ends:
        stage = [h for h in evals if h["east_stage"] == end["east_stage"]]
        best = min(stage, key=lambda h: h["eval_loss"])["step"]
        if best != end["step"]:
            torch.testing.assert_close(spy.steps[end["step"]][1], spy.evaluated[best], rtol=0, atol=0)
            restored += 1
    assert restored >= 1
    reference = [(h["step"], h["east_stage"], h["eval_loss"]) for h in evals]
    step = evals[len(evals) // 2]["step"]
    assert (tmp_path / f"checkpoint-{step}" / EMA_WEIGHTS_NAME).is_file()
    resumed = annealing_trainer(tmp_path, east_ema_decay=0.8)
    resumed.train(resume_from_checkpoint=str(tmp_path / f"checkpoint-{step}"))
    again = [(h["step"], h["east_stage"], h["eval_loss"]) for h in evaluations(resumed)]
    assert [r[:2] for r in again] == [r[:2] for r in reference]
    assert [r[2] for r in again] == pytest.approx([r[2] for r in reference], abs=1e-6)
    (tmp_path / f"checkpoint-{step}" / EMA_WEIGHTS_NAME).unlink()
    assert EMA_WEIGHTS_NAME in checkpoint_problem(tmp_path / f"checkpoint-{step}")


def test_ema_decay_is_checked_and_needs_the_annealing_callback(tmp_path):
    with pytest.raises(ValueError, match=r"Expected east_ema_decay in \[0, 1\) .*got 1.0"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_ema_decay=1.0)
    with pytest.raises(ValueError, match="Expected east_annealing=True for east_ema_decay=0.9"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_ema_decay=0.9, east_annealing=False)
    assert build_annealing_callback(EASTConfig(output_dir=str(tmp_path), report_to=[])).ema_decay == 0.0
    averaged = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="la", east_ema_decay=0.9)
    assert build_annealing_callback(averaged).ema_decay == 0.9  # a baseline can average its weights too
