"""east_hf's data cache on disk: one folder per data source,
holding the newest versions of its rows and prepared splits.

Layout::

    <root>/                           $EAST_HF_CACHE, else <datasets cache>/east_hf
      <name>-<hash>/                  one data source: a local file or folder (its resolved path), or a Hub id
        source.json                   which source (and that east_hf made the folder)
        raw-<key>/                    the rows datasets read from one content of the source (record: raw.json)
        prepared-<key>/               tabular splits prepared from one content under one DataArguments (prepared.json)

A version is complete once its record file is there. The record is written last, under a temporary name then renamed,
and lists the size and SHA-256 of every file it vouches for, so a reader finds a whole version or none, and a version
damaged afterwards (a file truncated, deleted or garbled, the record itself lost) is removed with one warning and
rebuilt (``read_record``). Each source keeps its ``EAST_HF_CACHE_VERSIONS`` (default 3) most recently used versions of
each kind; writing a new one removes the older ones (``evict``). ``east-cache ls`` and ``east-cache clear`` show and
remove what is here (``scan``, ``clear``), and nothing else: a folder or file without east_hf's marks stays.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from east_hf.hf.data.fingerprint import file_sha256

__all__ = [
    "DEFAULT_VERSIONS",
    "ROOT_ENV",
    "VERSIONS_ENV",
    "TOKENIZERS_FOLDER",
    "SourceEntry",
    "cache_root",
    "checksums",
    "claim_source",
    "clear",
    "disk_size",
    "evict",
    "legacy_folders",
    "tokenizer_folders",
    "mark_used",
    "publish",
    "read_record",
    "scan",
    "source_dir",
    "staging",
    "versions_kept",
    "write_record",
]

ROOT_ENV = "EAST_HF_CACHE"
VERSIONS_ENV = "EAST_HF_CACHE_VERSIONS"
DEFAULT_VERSIONS = 3
SOURCE_NAME = "source.json"
KINDS = ("raw", "prepared")
ABANDONED_SECONDS = 24 * 3600  # a staging or unrecorded folder this old belongs to a writer that died
LEGACY_PATTERN = re.compile(r"\.?east_hf_prepared-[0-9a-f]{24}(-.*)?")  # prepared folders kept beside datasets' caches

logger = logging.getLogger(__name__)


TOKENIZERS_FOLDER = "text_tiny_tokenizers"  # under the cache root: the tokenizers text_tiny trained, by their texts


def tokenizer_folders() -> list[Path]:
    """The cached text_tiny tokenizers (``east_hf.hf.models.text.train_wordpiece_tokenizer``), one folder each."""
    folder = cache_root() / TOKENIZERS_FOLDER
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def cache_root() -> Path:
    """Where east_hf keeps its data cache: ``$EAST_HF_CACHE``, else ``east_hf`` in the ``datasets`` cache; an absolute
    path (a relative one is taken from the working directory), as ``datasets`` names the files it writes there."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).expanduser().absolute()
    import datasets.config

    return (Path(datasets.config.HF_DATASETS_CACHE) / "east_hf").expanduser().absolute()


def versions_kept() -> int:
    """How many versions of each kind a source keeps: ``$EAST_HF_CACHE_VERSIONS``, default ``DEFAULT_VERSIONS``."""
    value = os.environ.get(VERSIONS_ENV, "").strip()
    if not value:
        return DEFAULT_VERSIONS
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"Expected {VERSIONS_ENV} to be an integer >= 1, got {value!r}")
    return int(value)


def source_dir(source: str) -> Path:
    """The folder of a data source (a resolved local path, or ``hub:<id>``): its last name and a hash of it."""
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", source.rstrip("/").rsplit("/", 1)[-1])[:40] or "source"
    return cache_root() / f"{tail}-{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def claim_source(folder: Path, source: str) -> bool:
    """Make ``folder`` the folder of ``source`` (``source.json``); ``False`` when it cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / SOURCE_NAME).is_file():
            write_record(folder, SOURCE_NAME, {"source": source, "made_by": "east_hf"})
        return True
    except OSError:
        return False


def write_record(folder: Path, name: str, record: dict[str, Any]) -> None:
    """``folder/name`` as JSON, written under a temporary name and renamed: a reader sees the whole record or none."""
    with tempfile.NamedTemporaryFile("w", dir=folder, prefix=f".{name}-", suffix=".tmp", delete=False) as f:
        json.dump(record, f, indent=1)
    os.replace(f.name, folder / name)


def checksums(folder: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """The size and SHA-256 of each of ``names`` (paths relative to ``folder``), for a record."""
    return {n: {"size": (folder / n).stat().st_size, "sha256": file_sha256(folder / n)} for n in names}


def _damage(folder: Path, files: dict[str, dict[str, Any]]) -> str | None:
    """What is wrong with the files a record lists (``None``: each has its recorded size and SHA-256)."""
    for name, expected in files.items():
        path = folder / name
        try:
            size = path.stat().st_size
        except OSError:
            return f"expected {name}, got none"
        if size != expected["size"]:
            return f"expected {name} of {expected['size']} bytes, got {size}"
        if file_sha256(path) != expected["sha256"]:
            return f"expected {name} with SHA-256 {expected['sha256'][:12]}, got {file_sha256(path)[:12]}"
    return None


def read_record(folder: Path, name: str, required: bool = True) -> dict[str, Any] | None:
    """The record of a complete, intact version; ``None`` when there is none: the folder is missing, or it is damaged
    (its record lost or unreadable, a listed file missing, of another size or other bytes), in which case it is removed
    with one warning naming it. Without ``required`` a folder without its record is left as it is (one that
    ``datasets`` may still be building into)."""
    if not folder.is_dir():
        return None
    try:
        record = json.loads((folder / name).read_text())
        reason = _damage(folder, record["files"])
    except FileNotFoundError:
        if not required:
            return None
        reason = f"expected {name}, got none"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        reason = f"expected a readable {name}, got {type(e).__name__}: {' '.join(str(e).split())}"
    if reason is None:
        return record
    discard(folder, reason)
    return None


def discard(folder: Path, reason: str) -> None:
    """Remove a damaged version, with one warning naming it and what is wrong."""
    logger.warning(f"east_hf cache folder {folder} is damaged ({reason}): rebuilding it")
    _remove(folder)


def _remove(folder: Path) -> None:
    """Delete a folder; renamed away first, so that a reader never sees it half deleted."""
    try:
        gone = folder.with_name(f".{folder.name}-removed-{os.getpid()}-{time.monotonic_ns()}")
        os.rename(folder, gone)
    except OSError:
        gone = folder
    shutil.rmtree(gone, ignore_errors=True)


def mark_used(folder: Path) -> None:
    """Note that a version was just used (its folder's mtime), for ``evict``; a read-only cache is left as it is."""
    with contextlib.suppress(OSError):
        os.utime(folder)


@contextlib.contextmanager
def staging(folder: Path | None):
    """A fresh folder beside ``folder`` to write into (``None`` if ``folder`` is, or cannot be written); removed on
    exit unless ``publish`` renamed it."""
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


def publish(stage: Path, folder: Path, name: str, record: dict[str, Any]) -> None:
    """Write ``record`` as ``stage/name`` and rename ``stage`` to ``folder``; a folder another process completed first
    is kept."""
    write_record(stage, name, record)
    try:
        os.rename(stage, folder)
    except OSError:
        if not (folder / name).is_file():
            raise


def evict(source: Path, kind: str, keep: int | None = None) -> list[Path]:
    """Remove all but the ``keep`` (default ``versions_kept()``) most recently used complete versions of ``kind`` in a
    source's folder, and staging or unrecorded folders of ``kind`` abandoned for a day. Returns what it removed."""
    keep = versions_kept() if keep is None else keep
    complete, removed = [], []
    try:
        entries = list(os.scandir(source))
    except OSError:
        return removed
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        if entry.name.startswith(f"{kind}-") and (path / f"{kind}.json").is_file():
            complete.append((entry.stat().st_mtime_ns, path))
        elif (
            entry.name.startswith((f"{kind}-", f".{kind}-"))
            and time.time() - entry.stat().st_mtime > ABANDONED_SECONDS
        ):
            removed.append(path)
    complete.sort(reverse=True)
    removed += [path for _, path in complete[keep:]]
    for path in removed:
        _remove(path)
    return removed


@dataclass
class SourceEntry:
    """What east_hf keeps for one data source: its folder, its versions of each kind, their bytes and last use."""

    source: str
    folder: Path
    versions: dict[str, int] = field(default_factory=dict)
    size: int = 0
    last_used: float = 0.0


def disk_size(path: Path) -> int:
    """The bytes of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for folder, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, f)).st_size
    return total


def _ours(folder: Path) -> list[Path]:
    """The entries of a source folder that east_hf made: its record and its versions (staging ones included)."""
    names = re.compile(rf"\.?({'|'.join(KINDS)})-.*|{re.escape(SOURCE_NAME)}|\.{re.escape(SOURCE_NAME)}-.*\.tmp")
    return sorted(p for p in folder.iterdir() if names.fullmatch(p.name))


def scan(root: Path | None = None) -> list[SourceEntry]:
    """Every source folder east_hf made under ``root`` (default ``cache_root()``), most recently used first."""
    root = cache_root() if root is None else root
    out = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            source = json.loads((folder / SOURCE_NAME).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(source, dict) or source.get("made_by") != "east_hf":
            continue
        entry = SourceEntry(str(source.get("source")), folder)
        for path in _ours(folder):
            entry.size += disk_size(path)
            kind = path.name.split("-", 1)[0]
            if kind in KINDS and (path / f"{kind}.json").is_file():
                entry.versions[kind] = entry.versions.get(kind, 0) + 1
                entry.last_used = max(entry.last_used, path.stat().st_mtime)
        out.append(entry)
    return sorted(out, key=lambda e: -e.last_used)


def legacy_folders() -> list[Path]:
    """Prepared folders an earlier east_hf kept beside the ``datasets`` cache of the raw rows
    (``<datasets cache>/<builder>/<config>/<version>/<hash>/east_hf_prepared-<key>``)."""
    import datasets.config

    base = Path(datasets.config.HF_DATASETS_CACHE)
    return sorted(
        p for p in base.glob("*/*/*/*/*east_hf_prepared-*") if LEGACY_PATTERN.fullmatch(p.name) and p.is_dir()
    )


def is_missing(source: str) -> bool:
    """Whether a cached ``source`` is a local file or folder that is no longer there (a Hub id or generated set never
    is): its cached versions can never be read again."""
    return os.path.isabs(source) and not os.path.exists(source)


def clear(sources: list[str] | None = None, dry_run: bool = False, missing: bool = False) -> tuple[list[Path], int]:
    """Remove what east_hf cached: every source's folder, or those of ``sources`` (local paths or Hub ids), or with
    ``missing`` those of local sources that are no longer there (``is_missing``); with every source, also the
    prepared folders of earlier east_hf versions (``legacy_folders``) and the tokenizers. Only entries east_hf made
    are removed; a source folder is removed once nothing else is left in it. Returns (the folders or files removed,
    their bytes); ``dry_run`` removes nothing."""
    if missing and sources is not None:
        raise ValueError(f"Expected sources or missing=True, not both; got sources {sources}")
    wanted = None
    if sources is not None:
        wanted = set(sources) | {str(Path(s).expanduser().resolve()) for s in sources} | {f"hub:{s}" for s in sources}
    removed: list[Path] = []
    for entry in scan():
        if is_missing(entry.source) if missing else wanted is None or entry.source in wanted:
            removed += _ours(entry.folder)
    if sources is None and not missing:
        removed += legacy_folders() + tokenizer_folders()
    size = sum(disk_size(p) for p in removed)
    if not dry_run:
        for path in removed:
            if path.is_dir():
                _remove(path)
            else:
                path.unlink(missing_ok=True)
        for folder in {p.parent for p in removed if p.name == SOURCE_NAME}:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when nothing else is in it
    return removed, size
