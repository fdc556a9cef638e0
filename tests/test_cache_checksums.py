"""Nothing garbled is trusted: text_tiny's cached tokenizer is used only where its record (size and SHA-256) vouches
for it, else rebuilt with one warning; the annealing's per-stage best weights (``east_stage_best.pt``) are checked
against the SHA-256 recorded when they were saved, and a same-size garble is one line naming the file."""

import json
import logging

import pytest
import torch
from helpers import east_args
from transformers import TrainerControl, TrainerState

from east_hf.core.annealing import AnnealingSchedule
from east_hf.hf.data import cache_store
from east_hf.hf.models.text import TOKENIZER_RECORD, train_wordpiece_tokenizer
from east_hf.hf.training.callbacks import STAGE_BEST_WEIGHTS_NAME, TemperatureAnnealingCallback

TEXTS = ["a red apple", "a green pear", "red and green", "an apple and a pear", "green apples"] * 4


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_edited_cached_tokenizer_is_rebuilt_with_one_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("EAST_HF_CACHE", str(tmp_path / "cache"))
    first = train_wordpiece_tokenizer(TEXTS, vocab_size=60)
    (folder,) = cache_store.tokenizer_folders()
    saved = json.loads((folder / "tokenizer.json").read_text())
    vocab = saved["model"]["vocab"]
    word = next(w for w in vocab if w.isalpha() and len(w) > 2)
    vocab["zzzz"] = vocab.pop(word)  # a valid tokenizer, but not the one trained on these texts
    (folder / "tokenizer.json").write_text(json.dumps(saved))
    with caplog.at_level(logging.WARNING):
        again = train_wordpiece_tokenizer(TEXTS, vocab_size=60)
    assert "zzzz" not in again.get_vocab() and word in again.get_vocab()
    (warning,) = _warnings(caplog)
    assert warning.startswith(f"east_hf cache folder {folder} is damaged (expected tokenizer.json ")
    assert warning.endswith("): rebuilding it")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        third = train_wordpiece_tokenizer(TEXTS, vocab_size=60)
    assert _warnings(caplog) == [] and third.get_vocab() == again.get_vocab()  # the rebuilt entry, vouched for
    assert word in first.get_vocab() and (folder / TOKENIZER_RECORD).is_file()


def test_a_cached_tokenizer_without_its_record_is_rebuilt(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("EAST_HF_CACHE", str(tmp_path / "cache"))
    train_wordpiece_tokenizer(TEXTS, vocab_size=60)
    (folder,) = cache_store.tokenizer_folders()
    (folder / TOKENIZER_RECORD).unlink()
    with caplog.at_level(logging.WARNING):
        train_wordpiece_tokenizer(TEXTS, vocab_size=60)
    assert _warnings(caplog) == [
        f"east_hf cache folder {folder} is damaged (expected {TOKENIZER_RECORD}, got none): rebuilding it"
    ]
    assert (folder / TOKENIZER_RECORD).is_file()


def _saved_stage_best(tmp_path) -> tuple[TemperatureAnnealingCallback, object]:
    """A checkpoint at step 4 whose stage best is step 2: the callback saves that step's weights into it."""
    callback = TemperatureAnnealingCallback(AnnealingSchedule(patience=3))
    callback.schedule.update(1.0, 0.5, step=2)
    callback._stage_weights = {"w": torch.ones(256)}
    (tmp_path / "checkpoint-4").mkdir()
    args = east_args(tmp_path, eval_strategy="steps", eval_steps=2)
    callback.on_save(args, TrainerState(global_step=4), TrainerControl())
    return callback, args


def _resume(args) -> TemperatureAnnealingCallback:
    callback = TemperatureAnnealingCallback(AnnealingSchedule(patience=3))
    callback.schedule.update(1.0, 0.5, step=2)
    callback.on_train_begin(args, TrainerState(global_step=4), TrainerControl())
    return callback


def test_stage_best_weights_load_back_where_their_checksum_matches(tmp_path):
    _, args = _saved_stage_best(tmp_path)
    assert (tmp_path / "checkpoint-4" / f"{STAGE_BEST_WEIGHTS_NAME}.sha256").is_file()
    assert torch.equal(_resume(args)._stage_weights["w"], torch.ones(256))


def test_a_same_size_garble_of_stage_best_weights_is_one_line_naming_the_file(tmp_path):
    _, args = _saved_stage_best(tmp_path)
    bad = tmp_path / "checkpoint-4" / STAGE_BEST_WEIGHTS_NAME
    data = bad.read_bytes()
    one = torch.ones(1).numpy().tobytes()  # 1.0 as float32
    assert data.count(one * 8) >= 1
    bad.write_bytes(data.replace(one * 8, torch.full((8,), 2.0).numpy().tobytes(), 1))  # same size, valid archive
    assert len(bad.read_bytes()) == len(data) and torch.load(bad)["w"].sum() == 264  # torch alone accepts it
    with pytest.raises(ValueError) as error:
        _resume(args)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"Expected the stage's best weights in {bad}, got a file whose")
    assert f"{bad}.sha256 when it was saved (changed or garbled since); resume from another checkpoint" in message
