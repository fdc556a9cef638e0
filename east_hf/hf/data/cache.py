"""Prepared tabular splits kept as memory-mapped Arrow files, so that a data set is prepared once.

``load_data`` prepares the splits of a data set read from files (labels encoded, splits carved, features encoded and
standardised, float32) into a folder beside the ``datasets`` cache of the raw rows, named by a hash of the raw cache
files (path, size, modification time), every ``DataArguments`` field and the east_hf version. The folder holds one
``<split>.arrow`` per split (``input_features`` (F,) float32 and ``labels``), the fitted feature extractor
(``preprocessor_config.json``) and ``prepared.json`` (class names, dropped rows, the warnings of the preparation).

Another call with the same key maps the files instead: the other processes of a distributed run, which load after
the main one (``TrainingArguments.main_process_first``), then share the pages through the page cache rather than
each holding a copy. A folder is written under a temporary name and renamed when complete, so a reader sees a whole
folder or none. Data sets held in memory (``sklearn:<name>``), or with ``datasets`` caching disabled, are prepared in
memory every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["captured_warnings", "prepared_folder", "read_prepared", "staging", "write_prepared"]

FORMAT = 1  # the layout of a prepared folder; part of the key
META_NAME = "prepared.json"

logger = logging.getLogger(__name__)


def prepared_folder(dsd, args) -> Path | None:
    """Where the prepared splits of ``dsd`` (the raw ``DatasetDict``) under ``args`` (``DataArguments``) live; ``None``
    when a split is held in memory or ``datasets`` caching is disabled."""
    import datasets

    import east_hf

    if not datasets.is_caching_enabled():
        return None
    files = {split: [f["filename"] for f in ds.cache_files] for split, ds in dsd.items()}
    if not all(files.values()):
        return None
    try:
        raw = {
            split: [(name, (s := os.stat(name)).st_size, s.st_mtime_ns) for name in names]
            for split, names in files.items()
        }
    except OSError:
        return None
    state = {"format": FORMAT, "east_hf": east_hf.__version__, "raw": raw, "args": dataclasses.asdict(args)}
    key = hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return Path(next(iter(files.values()))[0]).parent / f"east_hf_prepared-{key}"


@contextlib.contextmanager
def staging(folder: Path | None):
    """A fresh folder beside ``folder`` to write into (``None`` if ``folder`` is, or cannot be written); removed on
    exit unless ``write_prepared`` renamed it."""
    if folder is None:
        yield None
        return
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    except OSError:  # a read-only cache: prepare in memory
        yield None
        return
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def captured_warnings(name: str):
    """The (logger name, message) of each warning logged under ``name`` inside the block, appended to a list."""
    found: list[tuple[str, str]] = []

    class Capture(logging.Handler):
        def emit(self, record):
            found.append((record.name, record.getMessage()))

    handler = Capture(logging.WARNING)
    logging.getLogger(name).addHandler(handler)
    try:
        yield found
    finally:
        logging.getLogger(name).removeHandler(handler)


def write_prepared(
    stage: Path,
    folder: Path,
    preprocessor,
    warnings: list[tuple[str, str]],
    label_names: list[str],
    dropped: dict[str, int],
) -> None:
    """Complete ``stage`` (the split files written by ``tabular_splits``) and rename it to ``folder``; a folder
    another process completed first is kept."""
    splits = sorted(p.stem for p in stage.glob("*.arrow"))
    preprocessor.save_pretrained(stage)
    meta = {"splits": splits, "label_names": label_names, "dropped": dropped, "warnings": warnings}
    (stage / META_NAME).write_text(json.dumps(meta, indent=1))
    try:
        os.rename(stage, folder)
    except OSError:
        if not (folder / META_NAME).is_file():
            raise


def read_prepared(folder: Path, repeat_warnings: bool = True) -> dict[str, Any] | None:
    """The ``EASTData`` fields of a complete prepared folder, its splits memory-mapped; ``None`` if there is none.
    ``repeat_warnings`` logs the preparation's warnings again, as preparing would."""
    import datasets

    from east_hf.hf.models.tabular_features import TabularFeatureExtractor

    try:
        meta = json.loads((folder / META_NAME).read_text())
    except (OSError, ValueError):
        return None
    splits = {
        split: (
            datasets.Dataset.from_file(str(folder / f"{split}.arrow")).with_format("torch")
            if split in meta["splits"]
            else None
        )
        for split in ("train", "validation", "test")
    }
    if repeat_warnings:
        for name, message in meta["warnings"]:
            logging.getLogger(name).warning(message)
    return dict(
        splits,
        label_names=meta["label_names"],
        modality="tabular",
        preprocessor=TabularFeatureExtractor.from_pretrained(folder),
        dropped=meta["dropped"],
    )
