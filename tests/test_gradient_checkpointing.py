"""Gradient checkpointing (``gradient_checkpointing=True``, transformers' activation checkpointing) with EAST's default
loss, the annealed logit-adjusted mix: the same loss and gradients as without it on a text model (dropout off), and a
run with annealing trains with it."""

import functools

import pytest
import torch
from helpers import annealer, east_args
from test_user_metrics import _texts

from east_hf import EASTTrainer
from east_hf.hf.models.text import text_tiny_model, train_wordpiece_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


@functools.cache
def _tokenizer_and_rows():
    """One tokenizer for every trainer here: WordPiece training orders tokens of equal counts differently from one
    call to the next, so two tokenizers of the same texts may give other ids."""
    rows = _texts(96, 0)
    return train_wordpiece_tokenizer(rows["sentence"], vocab_size=200, cache=False), rows


def _trainer(tmp_path, checkpointing: bool, **overrides):
    tokenizer, rows = _tokenizer_and_rows()
    torch.manual_seed(0)
    model = text_tiny_model(
        tokenizer, {0: "sport", 1: "money", 2: "weather"}, max_length=16, hidden_size=32, dropout=0.0
    )
    encoded = tokenizer(rows["sentence"], truncation=True, max_length=16, padding="max_length")
    data = [{**{k: v[i] for k, v in encoded.items()}, "labels": y} for i, y in enumerate(rows["label"])]
    args = east_args(tmp_path, gradient_checkpointing=checkpointing, **overrides)
    return EASTTrainer(model=model, args=args, train_dataset=data, eval_dataset=data[:48])


def _loss_and_grads(trainer, stage_of_mix: bool):
    model = trainer.model.train()
    if stage_of_mix:  # EAST's stage 0: the surrogate plus the full-weight logit-adjusted cross-entropy
        annealer(trainer).schedule.stage = 0
    batch = trainer.data_collator(trainer.train_dataset[:32])
    loss = trainer.compute_loss(model, batch)
    loss.backward()
    return loss.detach(), [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("stage_of_mix", [False, True], ids=["warm start", "EAST stage 0"])
def test_checkpointing_gives_the_same_loss_and_gradients(tmp_path, stage_of_mix):
    plain = _trainer(tmp_path / "plain", False, east_annealing=True, eval_strategy="epoch")
    checkpointed = _trainer(tmp_path / "ckpt", True, east_annealing=True, eval_strategy="epoch")
    checkpointed.model.gradient_checkpointing_enable()  # what the Trainer does when training starts
    assert checkpointed.model.is_gradient_checkpointing
    loss, grads = _loss_and_grads(plain, stage_of_mix)
    loss_ckpt, grads_ckpt = _loss_and_grads(checkpointed, stage_of_mix)
    assert torch.allclose(loss, loss_ckpt, atol=1e-6) and len(grads) == len(grads_ckpt) > 0
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, grads_ckpt))


def test_a_run_with_checkpointing_anneals_and_learns(tmp_path):
    trainer = _trainer(
        tmp_path, True, east_annealing=True, eval_strategy="steps", eval_steps=3, save_strategy="no", max_steps=150,
        learning_rate=3e-3, east_warm_start_epochs=1, east_patience=1,
    )  # fmt: skip
    trainer.train()
    assert trainer.model.is_gradient_checkpointing
    assert annealer(trainer).schedule.stage >= 1
    assert trainer.evaluate()["eval_fbeta"] > 0.5  # three topics; one class alone scores below 0.25
