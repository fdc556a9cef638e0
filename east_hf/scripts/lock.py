"""One writer per output folder: the lock ``east-train`` holds on its ``output_dir`` while it runs.

The lock is a file, ``output_dir/_east_hf.lock`` (``east_hf.hf.training.checkpoints.LOCK_NAME``), created atomically
(``O_CREAT | O_EXCL``: of two processes only one creates it) and holding the pid and host name of its holder. A second
writer is refused with a one-line ``ValueError`` naming that pid. A lock whose holder is gone (same host, pid no
longer running: a ``kill -9``, an out-of-memory kill, a power cut) is stale: it is reported in one warning line and
taken over. A lock from another host cannot be checked from here, so it is refused with the file to delete.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder, OutputDirLock(folder) as lock:
    ...     lock.path.name, lock.held
    ('_east_hf.lock', True)
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from pathlib import Path

from east_hf.hf.training.checkpoints import LOCK_NAME

__all__ = ["LOCK_NAME", "OutputDirLock", "pid_running"]

logger = logging.getLogger(__name__)


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie, dead but not yet reaped by its parent, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:  # Linux: state Z is a zombie
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class OutputDirLock:
    """The lock on ``output_dir``: ``acquire()`` takes it (creating the folder) or raises ``ValueError``;
    ``release()`` removes it if this object holds it, and the folder too if ``acquire`` created it and it is still
    empty. Also a context manager."""

    def __init__(self, output_dir: str | os.PathLike):
        self.folder = Path(output_dir)
        self.path = self.folder / LOCK_NAME
        self.held = False
        self._created_folder = False
        self._record = {"pid": os.getpid(), "host": socket.gethostname(), "token": uuid.uuid4().hex}

    def __enter__(self) -> OutputDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, creating the folder where missing, taking over a stale lock; ``ValueError`` where another
        process holds it or the folder cannot be written."""
        if self.held:
            return
        try:
            if not self.folder.is_dir():
                self.folder.mkdir(parents=True)
                self._created_folder = True
        except OSError as e:  # a file of that name, no permission
            raise ValueError(
                f"Expected output_dir to be a folder east-train can write, got {self.folder}: {e}"
            ) from None
        for _ in range(20):  # each pass either takes the lock, refuses, or saw the file change under it
            if self._create():
                self.held = True
                return
            holder = self._read(self.path)
            if holder is None:  # removed meanwhile, or its holder is still writing it
                time.sleep(0.05)
                continue
            if holder.get("host") != self._record["host"]:
                raise ValueError(
                    f"Expected an output_dir no other east-train writes to, got {self.folder}, locked by process "
                    f"{holder.get('pid')} on host {holder.get('host')}; if that process has ended, delete {self.path}"
                )
            pid = holder.get("pid")
            if isinstance(pid, int) and pid_running(pid):
                raise ValueError(
                    f"Expected an output_dir no other east-train writes to, got {self.folder}, in use by process "
                    f"{pid} ({self.path}): wait for it to end or choose another output_dir"
                )
            if self._remove_stale(holder):
                logger.warning(f"taking over the stale lock on {self.folder} of process {pid}, no longer running")
        raise ValueError(f"Expected to lock {self.folder}, got {self.path} changing under this process: try again")

    def release(self) -> None:
        """Remove the lock if held (never another process's), and the folder if ``acquire`` made it and it is empty."""
        try:
            if self.held and self._read(self.path) == self._record:
                self.path.unlink(missing_ok=True)
        except ValueError:  # the file is no longer this process's record: not ours to remove
            pass
        self.held = False
        if self._created_folder:
            self._created_folder = False
            try:
                self.folder.rmdir()
            except OSError:  # not empty: the run wrote into it
                pass

    def _create(self) -> bool:
        """Create the lock file holding this process's record, atomically; False where it exists."""
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError as e:  # a read-only folder
            raise ValueError(
                f"Expected output_dir to be a folder east-train can write, got {self.folder}: {e}"
            ) from None
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(self._record) + "\n")
        except BaseException:  # never leave a lock that names no holder
            self.path.unlink(missing_ok=True)
            raise
        return True

    @staticmethod
    def _read(path: Path) -> dict | None:
        """The record in a lock file, or None where it is missing or not yet written; retried briefly, since its
        holder writes it right after creating it. A file that stays unreadable names no holder and is refused."""
        for _ in range(10):
            try:
                record = json.loads(path.read_text())
            except FileNotFoundError:
                return None
            except (OSError, ValueError):
                time.sleep(0.05)
                continue
            if isinstance(record, dict):
                return record
            break
        if not path.exists():
            return None
        raise ValueError(
            f"Expected {path} to name the process that locks {path.parent}, got an unreadable file: delete it if no "
            "east-train writes there"
        )

    def _remove_stale(self, stale: dict) -> bool:
        """Remove the lock file if it still holds ``stale``. It is first moved aside (atomic: of two processes taking
        over, one moves it), then read: a lock another process took meanwhile is put back."""
        aside = self.path.with_name(f"{LOCK_NAME}.{self._record['token']}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        try:
            if self._read(aside) == stale:
                return True
            os.link(aside, self.path)  # fails where a third process has created a lock since: it holds it then
        except (OSError, ValueError):
            pass
        finally:
            aside.unlink(missing_ok=True)
        return False
