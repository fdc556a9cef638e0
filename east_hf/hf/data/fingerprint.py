"""Content fingerprints of local data: what east_hf's data caches and ``east-compare``'s run records are keyed on.

A file's fingerprint is the SHA-256 of its bytes (``file_sha256``), so an edit that keeps the modification time
(``cp -p``, ``rsync -t``, ``touch -r``) still changes it. SHA-256 is in the standard library and, with the SHA
instructions of current CPUs, faster than blake2b. Within a process a file is read once per (path, size,
mtime, ctime, inode, device): every write sets the ctime, which no tool sets back, so the memo never outlives an edit.

A source's fingerprint (``source_fingerprint``) covers what ``datasets`` reads from a local file or folder: each
file's relative name, size and SHA-256; media files (images, audio, video) by name, size and mtime instead, since
``datasets`` keeps their paths, never their bytes, and reads them when a row is used. A folder of 20,000 images is
therefore fingerprinted from its directory listing, and its metadata or label files from their bytes.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
>>> _ = path.write_text("x,y\\n1,0\\n")
>>> file_sha256(path)[:16]
'1c2774606e096c8e'
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import threading
import time

__all__ = ["MEDIA_SUFFIXES", "file_sha256", "one_listing", "source_files", "source_fingerprint"]

BLOCK = 1 << 20  # bytes read per step: large enough to run at hashing speed, small enough to stream any file
MEMO_SIZE = 1 << 16  # files remembered per process; past it the memo starts again
SETTLED_NS = 2 * 10**9  # a file written this recently is not remembered: file times tick coarsely (up to 2 s)

# Files that datasets' folder builders (imagefolder, audiofolder, videofolder) store by path, not by bytes.
MEDIA_SUFFIXES = frozenset(
    ".png .jpg .jpeg .jpe .jfif .gif .bmp .dib .tif .tiff .webp .ico .ppm .pgm .pbm .pnm .tga .psd .jp2 .j2k .avif "
    ".heic .heif .wav .flac .mp3 .ogg .opus .m4a .aac .aiff .aif .mp4 .avi .mov .mkv .webm".split()
)

_memo: dict[tuple, str] = {}
_memo_lock = threading.Lock()
_listings: contextvars.ContextVar[dict | None] = contextvars.ContextVar("east_hf_listings", default=None)


@contextlib.contextmanager
def one_listing():
    """Inside the block each source is listed and fingerprinted once (``source_files``, ``source_fingerprint``): for
    one load, which looks at its source several times and reads it as it was at the start."""
    token = _listings.set({}) if _listings.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _listings.reset(token)


def _once(kind: str, path, make):
    """``make()``, remembered under (kind, path) inside ``one_listing``."""
    known = _listings.get()
    if known is None:
        return make()
    key = (kind, os.path.abspath(path))
    if key not in known:
        known[key] = make()
    return known[key]


def _signature(path: str) -> tuple:
    """What a file's bytes cannot change without changing: its path, size, mtime, ctime, inode and device."""
    s = os.stat(path)
    return path, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino, s.st_dev


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes (hex), read in ``BLOCK`` steps; once per process while the file is unchanged.

    A file that changes while it is read is read again, so the memo never keeps the digest of a mixture, and one
    written in the last ``SETTLED_NS`` is not remembered, since a second write within the same tick of the file
    system's clock would leave its stat as it was."""
    name = os.path.abspath(path)
    for _ in range(3):
        before = _signature(name)
        with _memo_lock:
            known = _memo.get(before)
        if known is not None:
            return known
        digest = hashlib.sha256()
        buffer = bytearray(BLOCK)
        view = memoryview(buffer)
        with open(name, "rb", buffering=0) as f:
            while n := f.readinto(buffer):
                digest.update(view[:n])
        if _signature(name) == before:
            if time.time_ns() - max(before[2], before[3]) < SETTLED_NS:
                return digest.hexdigest()  # another write in the same clock tick could leave every stat unchanged
            with _memo_lock:
                if len(_memo) >= MEMO_SIZE:
                    _memo.clear()
                _memo[before] = digest.hexdigest()
            return digest.hexdigest()
    return digest.hexdigest()  # still being written: this read's digest, not remembered


def _hidden(name: str) -> bool:
    return name.startswith((".", "__"))


def source_files(path: str | os.PathLike, stat: bool = True) -> list[tuple[str, str, os.stat_result | None]]:
    """(relative name, path, stat) of each file of a local source, sorted by name: the file itself, or every file
    under a folder except hidden ones (a name starting with ``.`` or ``__``, as ``datasets`` skips them). Linked
    folders are followed, once each. Without ``stat``, ``None`` in place of each file's stat."""
    if _listings.get() is not None:
        return _once("files", path, lambda: _list(os.fspath(path), True))
    return _list(os.fspath(path), stat)


def _list(root: str, stat: bool) -> list[tuple[str, str, os.stat_result | None]]:
    if os.path.isfile(root):
        return [(os.path.basename(root), root, os.stat(root) if stat else None)]
    found, pending, seen = [], [(root, "")], set()
    while pending:
        folder, prefix = pending.pop()
        where = os.stat(folder)
        if (where.st_dev, where.st_ino) in seen:  # a link back up the tree
            continue
        seen.add((where.st_dev, where.st_ino))
        with os.scandir(folder) as entries:
            for entry in entries:
                if _hidden(entry.name):
                    continue
                if entry.is_dir():
                    pending.append((entry.path, f"{prefix}{entry.name}/"))
                elif entry.is_file():
                    found.append((f"{prefix}{entry.name}", entry.path, entry.stat() if stat else None))
    return sorted(found)


def source_fingerprint(path: str | os.PathLike, again: bool = False) -> str:
    """The SHA-256 (hex) of what ``datasets`` reads from a local file or folder: every file's relative name, size and
    content hash (a media file's mtime instead of its bytes). ``again`` looks at the source afresh, even inside
    ``one_listing``. ``OSError`` when the path cannot be read."""
    if again:
        return _fingerprint(_list(os.fspath(path), True))
    return _once("fingerprint", path, lambda: _fingerprint(source_files(path)))


def _fingerprint(listing: list[tuple[str, str, os.stat_result]]) -> str:
    combined = hashlib.sha256()
    for name, file, stat in listing:
        media = os.path.splitext(name)[1].lower() in MEDIA_SUFFIXES
        content = f"mtime {stat.st_mtime_ns}" if media else file_sha256(file)
        combined.update(f"{name}\0{stat.st_size}\0{content}\n".encode())
    return combined.hexdigest()
