"""Prepared tabular splits kept as memory-mapped Arrow files, so that a data set is prepared once per content.

``load_data`` prepares the splits of a data set read from files (labels encoded, splits carved, features encoded and
standardised, float32) into ``prepared-<key>`` in the source's folder of east_hf's cache
(``east_hf.hf.data.cache_store``). The key hashes the source's content: for a local file or folder its content
fingerprint (``source_fingerprint``: the bytes, not the modification time), for a Hub data set the ``datasets`` cache
files of its revision; with every ``DataArguments`` field that shapes the splits (not ``image_size`` or ``augment``)
and the east_hf version. The folder holds one ``<split>.arrow`` per split (``input_features`` (F,) float32 and
``labels``), the fitted feature extractor (``preprocessor_config.json``) and ``prepared.json`` (class names, whether
multi-label, dropped rows, the warnings of the preparation, each split's rows and features, and the size and SHA-256 of
every file).

Another call with the same key checks the folder against its record, then maps the files instead: the other processes
of a distributed run, which load after the main one (``TrainingArguments.main_process_first``), share the pages through
the page cache rather than each holding a copy. A folder is written under a temporary name and renamed when complete,
so a reader sees a whole folder or none; one found damaged is rebuilt with one warning. Data sets held in memory
(``sklearn:<name>``), or with ``datasets`` caching disabled, are prepared in memory every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from east_hf.hf.data import cache_store
from east_hf.hf.data.fingerprint import source_fingerprint

__all__ = ["captured_warnings", "prepared_folder", "read_prepared", "staging", "write_prepared"]

FORMAT = 2  # the layout of a prepared folder; part of the key
META_NAME = "prepared.json"
SPLITS = ("train", "validation", "test")
# DataArguments fields that act after preparation, or only on text (never prepared here): not part of the key
UNSHAPING = ("image_size", "augment", "text_column", "text_pair_column", "max_length", "preprocessing_num_workers")

staging = cache_store.staging


def prepared_folder(args, local: Path | None = None, dsd=None) -> Path | None:
    """Where the prepared splits under ``args`` (``DataArguments``) live: of the local file or folder ``local``, or of
    ``dsd`` (the raw ``DatasetDict`` of a Hub data set). ``None`` when the rows are held in memory, the source cannot
    be read, or ``datasets`` caching is disabled."""
    import datasets

    import east_hf

    if not datasets.is_caching_enabled():
        return None
    if local is not None:
        try:
            source, content = str(local.resolve()), source_fingerprint(local)
        except OSError:  # a missing or unreadable path: load_raw says what is wrong with it
            return None
    else:
        files = {split: [f["filename"] for f in ds.cache_files] for split, ds in dsd.items()}
        if not all(files.values()):
            return None
        try:  # the Hub cache holds one folder per revision, written once
            content = {k: [(n, (s := Path(n).stat()).st_size, s.st_mtime_ns) for n in f] for k, f in files.items()}
        except OSError:
            return None
        source = f"hub:{args.dataset_name}"
    unshaping = UNSHAPING + (("dataset_name",) if local is not None else ())  # the source folder says which file
    shaping = {k: v for k, v in dataclasses.asdict(args).items() if k not in unshaping}
    state = {"format": FORMAT, "east_hf": east_hf.__version__, "content": content, "args": shaping}
    key = hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:24]
    home = cache_store.source_dir(source)
    if not cache_store.claim_source(home, source):
        return None
    return home / f"prepared-{key}"


def _handled_elsewhere(record: logging.LogRecord, capture: logging.Handler) -> bool:
    """Whether a handler other than ``capture`` takes ``record`` on its way up the logger hierarchy (as
    ``logging.Logger.callHandlers`` walks it)."""
    logger = logging.getLogger(record.name)
    while logger is not None:
        if any(h is not capture for h in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False


@contextlib.contextmanager
def captured_warnings(name: str):
    """The (logger name, message) of each warning logged under ``name`` inside the block, appended to a list.

    The warnings still print as they would without the block: where no other handler takes a record, Python's
    last-resort handler does (stderr), which a handler of the block's own would otherwise silence."""
    found: list[tuple[str, str]] = []

    class Capture(logging.Handler):
        def emit(self, record):
            found.append((record.name, record.getMessage()))
            last = logging.lastResort
            if last is not None and record.levelno >= last.level and not _handled_elsewhere(record, self):
                last.handle(record)

    handler = Capture(logging.WARNING)
    logging.getLogger(name).addHandler(handler)
    try:
        yield found
    finally:
        logging.getLogger(name).removeHandler(handler)


def _features(ds) -> Any:
    return json.loads(json.dumps(ds.features.to_dict()))


def write_prepared(stage: Path, folder: Path, data, warnings: list[tuple[str, str]]) -> None:
    """Complete ``stage`` (the split files ``tabular_splits`` wrote for ``data``, an ``EASTData``) with the feature
    extractor and the record, rename it to ``folder`` (a folder another process completed first is kept), and evict
    the source's least recently used prepared folders beyond ``EAST_HF_CACHE_VERSIONS``."""
    data.preprocessor.save_pretrained(stage)
    splits = {k: getattr(data, k) for k in SPLITS if getattr(data, k) is not None}
    names = sorted(p.name for p in stage.iterdir())
    record = {
        "format": FORMAT,
        "splits": {k: {"rows": ds.num_rows, "features": _features(ds)} for k, ds in splits.items()},
        "label_names": data.label_names,
        "multi_label": data.multi_label,
        "dropped": data.dropped,
        "warnings": warnings,
        "files": cache_store.checksums(stage, names),
    }
    cache_store.publish(stage, folder, META_NAME, record)
    cache_store.mark_used(folder)
    cache_store.evict(folder.parent, "prepared")


def read_prepared(folder: Path, repeat_warnings: bool = True) -> dict[str, Any] | None:
    """The ``EASTData`` fields of a complete prepared folder, its splits memory-mapped; ``None`` if there is none, or
    if it is damaged (then it is removed with one warning: ``cache_store.read_record``). ``repeat_warnings`` logs the
    preparation's warnings again, as preparing would."""
    import datasets

    meta = cache_store.read_record(folder, META_NAME)
    if meta is None:
        return None
    from east_hf.hf.data.tabular_features import TabularFeatureExtractor

    try:
        splits = {k: None for k in SPLITS}
        for k, expected in meta["splits"].items():
            ds = datasets.Dataset.from_file(str(folder / f"{k}.arrow"))
            if ds.num_rows != expected["rows"] or _features(ds) != expected["features"]:
                raise ValueError(f"expected {expected['rows']} rows of the recorded features in {k}.arrow")
            splits[k] = ds.with_format("torch")
        preprocessor = TabularFeatureExtractor.from_pretrained(folder)
    except Exception as e:  # noqa: BLE001 - whatever Arrow or transformers make of files that disagree with the record
        cache_store.discard(folder, " ".join(str(e).split()))
        return None
    cache_store.mark_used(folder)
    if repeat_warnings:
        for name, message in meta["warnings"]:
            logging.getLogger(name).warning(message)
    return dict(
        splits,
        label_names=meta["label_names"],
        modality="tabular",
        preprocessor=preprocessor,
        dropped=meta["dropped"],
        multi_label=meta.get("multi_label", False),  # folders written before multi-label data hold one class a row
    )
