"""Run folders: which checkpoints are complete, and whether a folder already holds a run.

A checkpoint is complete when every file a resume reads loads: ``trainer_state.json`` parses as JSON (the Trainer
writes it after the weights, the optimizer and the RNG state, so a save killed before it leaves a folder without it),
every weight file present opens (a safetensors header that lists tensors, a shard index whose shards exist and open,
a ``torch.save`` zip archive), the optimizer, scheduler, scaler and RNG files present are whole zip archives, and so
is every file a stateful callback's saved state lists under ``checkpoint_files`` (``CHECKPOINT_FILES_KEY``): a
callback that writes into the checkpoint in ``on_save``, after ``trainer_state.json``, lists what it writes there, so
a save killed between the two leaves a checkpoint that names a file it lacks. The annealing callback's per-stage best
weights (``east_stage_best.pt``) and moving average (``east_ema.pt``) are such files, checked wherever they are present
too. The checks read headers and zip directories only, never the tensors: a truncated file or a garbled header is
found, bytes flipped inside a tensor's data are not, except in a file saved with its SHA-256 beside it (the annealing
callback's copies: ``CHECKSUM_SUFFIX``), whose bytes are compared with it. ``nonfinite_weight`` reads the weights
themselves for NaN or inf, which a resume checks (``east_hf.hf.training.resume``). Nothing from transformers.
"""

from __future__ import annotations

import json
import logging
import os
import re
import zipfile
from pathlib import Path

__all__ = [
    "CHECKPOINT_FILES_KEY",
    "CHECKSUM_SUFFIX",
    "COMPARISON_FILES",
    "EMA_WEIGHTS_NAME",
    "INITIAL_WEIGHTS_NAME",
    "LOCK_NAME",
    "RUN_FILES",
    "STAGE_BEST_WEIGHTS_NAME",
    "checkpoint_problem",
    "checksum_problem",
    "comparison_files",
    "complete_checkpoints",
    "foreign_files",
    "is_complete_checkpoint",
    "last_complete_checkpoint",
    "nonfinite_weight",
    "run_files",
]

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
)
# What a run leaves in its output folder; another run writing there would replace or delete them.
RUN_FILES = ("model.safetensors", "trainer_state.json", "all_results.json", "train_results.json", "test_results.json")
# The lock a running east-train holds on its output folder (east_hf.scripts.lock). The Trainer's Hub uploads skip
# names starting with "_", so the pid and host name it records never reach a pushed repository.
LOCK_NAME = "_east_hf.lock"
# What marks a folder as a run of east_hf's: the Trainer's state and arguments, the results, and east-compare's record
# of a run's settings (written before the run starts). Weights and a config.json alone are a model folder, not a run.
_RUN_MARKERS = (*RUN_FILES[1:], "eval_results.json", "training_args.bin", "run_settings.json")
# What a text model's tokenizer saves (save_pretrained): the fast tokenizer's file, its settings, and the vocabulary
# files of the tokenizer classes that write their own (WordPiece, BPE, SentencePiece).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "spm.model",
)
# What a run saves beside its results: the model (or a LoRA adapter), its processor, feature extractor or tokenizer and
# their code (copied for trust_remote_code), the model card and its plot, the tuned decision rule. These are also the
# names of a user's own files (README.md, config.json), so they count as a run's only in a folder that holds a run.
_BESIDE_A_RUN = frozenset(
    {"config.json", "generation_config.json", "preprocessor_config.json", "processor_config.json", "README.md"}
    | {"annealing.png", "decision_rule.json", *WEIGHT_FILES, *TOKENIZER_FILES}
    | {"adapter_config.json", "classifier_config.json"}  # a LoRA run's (peft's, and east_hf.hf.models.lora's)
    | {p.name for p in (Path(__file__).parents[1] / "models").glob("*.py") if p.name != "__init__.py"}
    | {"tabular_features.py"}  # the tabular feature extractor's code (east_hf.hf.data.tabular_features)
)
_SHARD = re.compile(r"^(model|pytorch_model)-\d+-of-\d+\.(safetensors|bin)$")
_CARD_BESIDE = re.compile(r"^README\.east_hf(-\d+)?\.md$")  # the card, written beside a README of the user's
_SYSTEM_FILES = (".DS_Store", "Thumbs.db", "desktop.ini")  # a file browser's own, in any folder it has shown
# The table east-compare writes at the top of its output folder, above one folder per variant.
COMPARISON_FILES = ("results.json", "results.md")

# The annealing callback's copy of the current stage's best weights (east_hf.hf.training.callbacks),
# a torch.save archive.
STAGE_BEST_WEIGHTS_NAME = "east_stage_best.pt"
# The annealing callback's moving average of the weights, or the training weights where the checkpoint's model file
# holds the average (east_hf.hf.training.callbacks), a torch.save archive.
EMA_WEIGHTS_NAME = "east_ema.pt"
# The annealing callback's copy of the weights training began with, kept through a warm start that may restart from
# them (east_ce_fallback, a collapsed warm start), a torch.save archive.
INITIAL_WEIGHTS_NAME = "east_initial.pt"
# torch.save archives written beside the weights (the Trainer's, and the annealing callback's); resuming loads each
# one that is there. Under several processes each writes its own RNG state, rng_state_<rank>.pth.
STATE_ARCHIVES = (
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
    "rng_state.pth",
    STAGE_BEST_WEIGHTS_NAME,
    EMA_WEIGHTS_NAME,
    INITIAL_WEIGHTS_NAME,
)
_RANK_RNG_STATE = re.compile(r"^rng_state_\d+\.pth$")
# The key under which a stateful callback's saved "attributes" list the files it writes into the checkpoint.
CHECKPOINT_FILES_KEY = "checkpoint_files"
# Beside a copy of the weights the annealing callback saves (east_hf.hf.training.weight_copies.save_weights): the
# file's SHA-256 in sha256sum's format ("<hex>  <name>"), so that `sha256sum -c` checks it too.
CHECKSUM_SUFFIX = ".sha256"


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _safetensors_problem(file: Path) -> str | None:
    """Why ``file`` does not open as safetensors (its header read, no tensor loaded), or None."""
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="pt") as f:
            if not list(f.keys()):
                return f"{file} lists no tensors"
    except Exception as e:  # SafetensorError (a Rust exception type), OSError
        return f"{file} does not load ({_one_line(e)}): truncated or corrupt"
    return None


def _archive_problem(file: Path) -> str | None:
    """Why ``file`` is not a whole ``torch.save`` zip archive (its central directory, at the end, is read), or None."""
    if file.stat().st_size == 0:
        return f"{file} is empty"
    if not zipfile.is_zipfile(file):
        return f"{file} is not a whole torch.save archive: truncated or corrupt"
    return None


def checksum_problem(path: str | os.PathLike) -> str | None:
    """How the file ``path`` differs from the SHA-256 recorded beside it (``path`` + ``CHECKSUM_SUFFIX``) when it was
    saved, or None (it matches, or no record: a file saved without one)."""
    record = f"{path}{CHECKSUM_SUFFIX}"
    try:
        with open(record) as f:
            expected = (f.read().split() or [""])[0]
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        return f"an unreadable checksum record {record} ({type(e).__name__})"
    from east_hf.hf.data.fingerprint import file_sha256  # the data's fingerprint, memoised per unchanged file

    actual = file_sha256(path)
    if actual == expected:
        return None
    return (
        f"a file whose SHA-256 {actual[:12]}... differs from the {expected[:12] or 'empty'}... recorded in {record} "
        "when it was saved (changed or garbled since)"
    )


def _index_problem(index: Path) -> str | None:
    """Why the shard index ``index`` or a shard it names does not load, or None."""
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return f"{index} is not a shard index ({_one_line(e)}): truncated or corrupt"
    if not shards:
        return f"{index} names no shards"
    for shard in shards:
        file = index.parent / shard
        if not file.is_file():
            return f"{index} names the shard {shard}, which is missing"
        problem = _safetensors_problem(file) if shard.endswith(".safetensors") else _archive_problem(file)
        if problem:
            return problem
    return None


def checkpoint_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a complete checkpoint, in a few words naming the file (``.../trainer_state.json is not
    JSON (...): truncated or corrupt``), or None where it is complete (see the module docstring for the checks). A
    file removed while it is checked (the Trainer's ``save_total_limit`` deleting an old checkpoint) makes the
    checkpoint incomplete, not an error."""
    try:
        return _checkpoint_problem(Path(path))
    except FileNotFoundError as e:
        return f"{e.filename} is missing (removed while the checkpoint was checked)"


def _checkpoint_problem(path: Path) -> str | None:
    if not path.is_dir():
        return f"{path} is not a folder"
    state = path / "trainer_state.json"
    if not state.is_file():
        return f"{state} is missing (its save was cut off)"
    try:
        parsed = json.loads(state.read_text())
    except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, UnicodeDecodeError
        return f"{state} is not JSON ({_one_line(e)}): truncated or corrupt"
    if not isinstance(parsed, dict):
        return f"{state} holds a JSON {type(parsed).__name__}, not the Trainer's state"
    weights = [path / name for name in WEIGHT_FILES if (path / name).is_file()]
    if not weights:
        return f"{path} holds no model weights ({', '.join(WEIGHT_FILES)})"
    listed = _callback_files(parsed)
    for name in listed:
        if not (path / name).is_file():
            return f"{path / name} is missing (its save was cut off): {state} lists it"
    ranks = sorted(p.name for p in path.iterdir() if _RANK_RNG_STATE.match(p.name))
    present = [name for name in (*STATE_ARCHIVES, *ranks) if (path / name).is_file()]
    for file in weights + [path / name for name in dict.fromkeys([*present, *listed])]:
        if file.name.endswith(".index.json"):
            problem = _index_problem(file)
        elif file.suffix == ".safetensors":
            problem = _safetensors_problem(file)
        else:
            problem = _archive_problem(file) or _mismatch(file)
        if problem:
            return problem
    return None


def _mismatch(file: Path) -> str | None:
    problem = checksum_problem(file)
    return f"{file} is {problem}" if problem else None


def _callback_files(state: dict) -> list[str]:
    """The files the stateful callbacks of a saved Trainer state list under ``CHECKPOINT_FILES_KEY`` (plain names in
    the checkpoint folder; anything else is not a file of the checkpoint and is ignored)."""
    callbacks = state.get("stateful_callbacks")
    entries = []
    for saved in callbacks.values() if isinstance(callbacks, dict) else []:
        entries += saved if isinstance(saved, list) else [saved]
    names = []
    for entry in entries:
        attributes = entry.get("attributes") if isinstance(entry, dict) else None
        files = attributes.get(CHECKPOINT_FILES_KEY) if isinstance(attributes, dict) else None
        for name in files if isinstance(files, list) else []:
            if isinstance(name, str) and name and Path(name).name == name and name not in (".", ".."):
                names.append(name)
    return list(dict.fromkeys(names))


def is_complete_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a checkpoint folder whose every file a resume reads loads (``checkpoint_problem``)."""
    return checkpoint_problem(path) is None


def _checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and _CHECKPOINT.match(p.name)]
    return sorted(found, key=lambda p: int(_CHECKPOINT.match(p.name).group(1)))


def complete_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """The complete ``checkpoint-<step>`` folders of ``output_dir``, oldest first."""
    return [p for p in _checkpoints(output_dir) if is_complete_checkpoint(p)]


def last_complete_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The complete checkpoint of the highest step in ``output_dir``, or None; incomplete ones after it (a save that
    was interrupted, a file truncated or corrupted since) are skipped with one warning line each, naming the file and
    what is wrong with it."""
    for path in reversed(_checkpoints(output_dir)):
        problem = checkpoint_problem(path)
        if problem is None:
            return path
        logger.warning(f"skipping incomplete checkpoint {path}: {problem}")
    return None


def nonfinite_weight(path: str | os.PathLike) -> str | None:
    """The first weight of the checkpoint ``path`` that holds NaN or inf, as ``'name' in FILE``, or None where every
    floating-point weight is finite. Unlike ``checkpoint_problem`` this reads the tensors (one at a time)."""
    import torch

    folder = Path(path)
    files = [folder / name for name in ("model.safetensors", "pytorch_model.bin") if (folder / name).is_file()]
    for index in (folder / "model.safetensors.index.json", folder / "pytorch_model.bin.index.json"):
        if index.is_file():
            shards = json.loads(index.read_text()).get("weight_map", {}).values()
            files += [folder / shard for shard in sorted(set(shards))]
    for file in files:
        for name, tensor in _tensors(file):
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                return f"{name!r} in {file}"
    return None


def _tensors(file: Path):
    """(name, tensor) of a safetensors file or a ``torch.save`` state dict, one at a time where the format allows."""
    import torch

    if file.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)
        return
    state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
    yield from ((k, v) for k, v in state.items() if isinstance(v, torch.Tensor))


def run_files(output_dir: str | os.PathLike) -> list[str]:
    """The names of what a run left in ``output_dir`` (its results, model, state and checkpoints), sorted."""
    folder = Path(output_dir)
    found = [name for name in RUN_FILES if (folder / name).is_file()]
    return found + [p.name for p in _checkpoints(folder)]


def comparison_files(output_dir: str | os.PathLike) -> list[str]:
    """East-compare's table (``COMPARISON_FILES``) where ``output_dir`` holds all of it, else ``[]``."""
    folder = Path(output_dir)
    return list(COMPARISON_FILES) if all((folder / name).is_file() for name in COMPARISON_FILES) else []


def foreign_files(output_dir: str | os.PathLike) -> list[str]:
    """The names in ``output_dir`` that no east_hf run wrote, sorted: what east-train never replaces or deletes.

    A run's markers (``trainer_state.json``, ``training_args.bin``, results, checkpoints), its lock, east-compare's
    ``run_settings.json`` and TensorBoard's ``runs`` are a run's wherever they are; what a run saves beside its model
    (``README.md``, ``config.json``, the weights) only beside such markers: alone they are a user's card or model."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    holds_run = bool(_checkpoints(folder)) or any((folder / name).is_file() for name in _RUN_MARKERS)
    return sorted(p.name for p in folder.iterdir() if not _written_by_a_run(p, holds_run))


def _written_by_a_run(path: Path, beside_a_run: bool) -> bool:
    name = path.name
    if name in _RUN_MARKERS or name in _SYSTEM_FILES or name.startswith(LOCK_NAME):  # the lock, or one being replaced
        return True
    if path.is_dir():
        return bool(_CHECKPOINT.match(name)) or (
            name == "runs" and all(p.is_dir() or p.name.startswith("events.out.tfevents.") for p in path.rglob("*"))
        )
    return beside_a_run and (
        name in _BESIDE_A_RUN or _SHARD.match(name) is not None or _CARD_BESIDE.match(name) is not None
    )
