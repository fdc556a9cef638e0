"""The rows of a local file or folder, cached by content: ``datasets`` builds them once per content of the source.

``datasets`` keys its cache of local files on their paths and modification times, so an edit that keeps the mtime
(``cp -p``, ``rsync -t``, ``touch -r``) would be served the old rows. Here each content of a source gets a folder of
its own, ``raw-<key>`` in the source's folder of east_hf's cache (``east_hf.hf.data.cache_store``), ``<key>`` a hash of
the source's content fingerprint (``source_fingerprint``), the configuration, the reading options (a CSV's
label columns read literally) and the ``datasets`` version; it is the
``cache_dir`` that ``datasets.load_dataset`` builds into. Its record, ``raw.json``, lists the Arrow files of each split
with their rows, features, sizes and SHA-256. A later load of the same content maps those files directly
(``datasets.Dataset.from_file``) without asking ``datasets`` to resolve the source again: for an image folder that
resolution globs the whole tree, once per file pattern it knows. A folder ``datasets`` built into without a
record (a writer that died, a record lost) is built again with ``download_mode="force_redownload"``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from east_hf.hf.data import cache_store
from east_hf.hf.data.fingerprint import source_fingerprint

__all__ = ["FORMAT", "RECORD_NAME", "cached_rows"]

FORMAT = 1  # the layout of a raw folder's record; part of the key
RECORD_NAME = "raw.json"


def _features(ds) -> Any:
    return json.loads(json.dumps(ds.features.to_dict()))


def _open(folder: Path, record: dict[str, Any]):
    """The ``DatasetDict`` a record describes, its splits memory-mapped;
    ``ValueError`` when the files disagree with it."""
    import datasets

    splits = {}
    for split, part in record["splits"].items():
        pieces = [datasets.Dataset.from_file(str(folder / name)) for name in part["files"]]
        ds = pieces[0] if len(pieces) == 1 else datasets.concatenate_datasets(pieces)
        if ds.num_rows != part["rows"] or _features(ds) != part["features"]:
            raise ValueError(f"expected {part['rows']} rows of the recorded features in split {split!r}")
        splits[split] = ds
    return datasets.DatasetDict(splits)


def _record(folder: Path, dsd, fingerprint: str) -> dict[str, Any] | None:
    """The record of a ``DatasetDict`` that ``datasets`` built into ``folder``; ``None`` when a split lives elsewhere
    (in memory, or another cache)."""
    splits, names = {}, []
    for split, ds in dsd.items():
        files = [Path(f["filename"]) for f in ds.cache_files]
        if not files or any(folder not in f.parents for f in files):
            return None
        relative = [f.relative_to(folder).as_posix() for f in files]
        splits[split] = {"files": relative, "rows": ds.num_rows, "features": _features(ds)}
        names += relative
    return {"format": FORMAT, "source": fingerprint, "splits": splits, "files": cache_store.checksums(folder, names)}


def cached_rows(path: Path, config: str | None, load: Callable[..., Any], reading: dict[str, Any] | None = None):
    """The ``DatasetDict`` of a local file or folder: from east_hf's cache when this content was read before with the
    same ``reading`` options (the builder's, such as which cells of a CSV are missing), else ``load(cache_dir=...,
    download_mode=...)`` (a ``datasets.load_dataset`` call) into a folder for this content, recorded for the next
    call. Without a writable cache, ``load()`` as ``datasets`` caches it."""
    import datasets

    source = str(path.resolve())
    fingerprint = source_fingerprint(path)
    key = {"format": FORMAT, "source": fingerprint, "config": config, "datasets": datasets.__version__}
    if reading:
        key["reading"] = reading
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    home = cache_store.source_dir(source)
    folder = home / f"raw-{digest}"
    record = cache_store.read_record(folder, RECORD_NAME, required=False)
    if record is not None:
        try:
            rows = _open(folder, record)
        except Exception as e:  # noqa: BLE001 - whatever Arrow makes of a file that is not what was recorded
            cache_store.discard(folder, " ".join(str(e).split()))
        else:
            cache_store.mark_used(folder)
            return rows
    if not cache_store.claim_source(home, source):
        return load()
    unrecorded = folder.exists()  # datasets built into it, but no record vouches for what it read
    dsd = load(cache_dir=str(folder), download_mode="force_redownload" if unrecorded else None)
    record = _record(folder, dsd, fingerprint)
    if record is not None and source_fingerprint(path, again=True) == fingerprint:  # not edited while read
        try:
            cache_store.write_record(folder, RECORD_NAME, record)
        except OSError:
            return dsd
        cache_store.mark_used(folder)
        cache_store.evict(home, "raw")
    return dsd
