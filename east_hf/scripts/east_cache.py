"""``east-cache``: show and clear east_hf's data cache; also ``python -m east_hf.scripts.east_cache``.

    east-cache ls                      # each data source: its cached versions, their size and last use
    east-cache clear                   # remove everything east_hf cached
    east-cache clear data.csv images/  # only what was cached for these sources (paths or Hub ids)
    east-cache clear --missing         # what was cached for local files and folders that are gone
    east-cache clear --dry_run         # say what would be removed, remove nothing

The cache (``east_hf.hf.data.cache_store``) lives in ``$EAST_HF_CACHE``, else ``east_hf`` in the ``datasets`` cache
(``$HF_DATASETS_CACHE``): one folder per data source, holding the rows ``datasets`` read from each content of the
source (``raw``) and the tabular splits prepared from them (``prepared``). Each source keeps its
``$EAST_HF_CACHE_VERSIONS`` (default 3) most recently used versions of each kind; the ``text_tiny`` tokenizers
(keyed on their training texts) stay until ``clear``, since one trained again gets another vocabulary. ``clear``
removes only what east_hf made: the source folders it marked, the tokenizers, and the prepared folders that earlier
east_hf versions kept beside the ``datasets`` cache; the ``datasets`` cache of Hub data sets is left to ``datasets``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from east_hf.scripts.parsers import OneLineArgumentParser

__all__ = ["build_parser", "main"]

PROG = "east-cache"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description="Show and clear east_hf's data cache.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{ls,clear}")
    commands.add_parser("ls", help="each data source: its cached versions, their size and last use")
    clear = commands.add_parser("clear", help="remove what east_hf cached (everything, or the sources named)")
    clear.add_argument("sources", nargs="*", help="data files, folders or Hub ids (default: every source)")
    clear.add_argument(
        "--missing",
        action="store_true",
        help="only the sources that are local paths no longer there ('ls' marks them)",
    )
    clear.add_argument("--dry_run", action="store_true", help="say what would be removed, remove nothing")
    return parser


def _size(n: float) -> str:
    """Bytes in words: ``_size(1536)`` is ``'1.5 kB'``.

    >>> _size(0), _size(1536), _size(3.2e9)
    ('0 B', '1.5 kB', '3.2 GB')
    """
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def _ls() -> None:
    from east_hf.hf.data import cache_store

    root, entries, legacy = cache_store.cache_root(), cache_store.scan(), cache_store.legacy_folders()
    kept = cache_store.versions_kept()
    print(f"east_hf data cache: {root} (each source keeps {kept} versions of each kind: ${cache_store.VERSIONS_ENV})")
    if entries:
        width = max(6, *(len(e.source) for e in entries))
        print(f"{'SOURCE':<{width}}  {'RAW':>3}  {'PREPARED':>8}  {'SIZE':>8}  LAST USED")
        for e in entries:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_used)) if e.last_used else "-"
            raw, prepared = e.versions.get("raw", 0), e.versions.get("prepared", 0)
            gone = "  (missing: clear --missing)" if cache_store.is_missing(e.source) else ""
            print(f"{e.source:<{width}}  {raw:>3}  {prepared:>8}  {_size(e.size):>8}  {used}{gone}")
    total = sum(e.size for e in entries)
    print(f"{len(entries)} source{'s' if len(entries) != 1 else ''}, {_size(total)}")
    tokenizers = cache_store.tokenizer_folders()
    if tokenizers:
        size = sum(cache_store.disk_size(p) for p in tokenizers)
        print(f"and {len(tokenizers)} text_tiny tokenizer{'s' if len(tokenizers) != 1 else ''}, {_size(size)}")
    if legacy:
        size = sum(cache_store.disk_size(p) for p in legacy)
        folders = f"{len(legacy)} prepared folder{'s' if len(legacy) != 1 else ''}"
        print(
            f"and {folders} of earlier east_hf versions beside the datasets cache, {_size(size)}: clear removes them"
        )


def _clear(sources: list[str], dry_run: bool, missing: bool = False) -> None:
    from east_hf.hf.data import cache_store

    if missing and sources:
        raise ValueError(f"Expected sources or --missing, not both; got {' '.join(sources)} and --missing")
    removed, size = cache_store.clear(sources or None, dry_run=dry_run, missing=missing)
    what = (
        "the cache of local sources no longer there"
        if missing
        else f"the cache of {', '.join(sources)}"
        if sources
        else f"everything east_hf cached in {cache_store.cache_root()}"
    )
    if not removed:
        print(f"{PROG}: nothing to clear: {what} is empty")
        return
    versions = sum(p.name.startswith(tuple(f"{kind}-" for kind in cache_store.KINDS)) for p in removed)
    tokenizers = sum(p.parent.name == cache_store.TOKENIZERS_FOLDER for p in removed)
    legacy = sum(bool(cache_store.LEGACY_PATTERN.fullmatch(p.name)) for p in removed)
    parts = (
        [f"{versions} cached version{'s' if versions != 1 else ''}"] if versions or not (legacy or tokenizers) else []
    )
    if legacy:
        parts.append(f"{legacy} prepared folder{'s' if legacy != 1 else ''} of earlier east_hf versions")
    if tokenizers:
        parts.append(f"{tokenizers} text_tiny tokenizer{'s' if tokenizers != 1 else ''}")
    verb = "would free" if dry_run else "freed"
    print(f"{PROG}: {verb} {_size(size)} ({' and '.join(parts)}): {what}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``east-cache``; returns 0, exits 2 with one line on bad input."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "ls":
            _ls()
        else:
            _clear(args.sources, args.dry_run, args.missing)
    except OSError as e:
        parser.error(_os_error_line(e, args.command))
    except ValueError as e:
        parser.error(" ".join(str(e).split()))
    return 0


def _os_error_line(error: OSError, command: str) -> str:
    """One plain line for a cache folder the command cannot read or change (read-only, no permission, ...).

    >>> _os_error_line(OSError(30, "Read-only file system", "/c/x"), "clear")
    'Expected a writable cache to clear, got a read-only file system at /c/x (EROFS): nothing more was removed;
     make the folder writable, or remove it yourself'
    """
    import errno

    code = errno.errorcode.get(error.errno or 0, "")
    what = (error.strerror or str(error)).strip()
    what = "a read-only file system" if error.errno == errno.EROFS else what[:1].lower() + what[1:]
    where = f" at {error.filename}" if error.filename else ""
    if command != "clear":
        return f"Expected a readable cache to list, got {what}{where}{f' ({code})' if code else ''}"
    return (
        f"Expected a writable cache to clear, got {what}{where}{f' ({code})' if code else ''}: nothing more was "
        "removed; make the folder writable, or remove it yourself"
    )


if __name__ == "__main__":
    sys.exit(main())
