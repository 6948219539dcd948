"""The small filesystem interface the output layer works through.

Pipelines pass an adapter over Beam's FileSystems (gs://, s3://, ...); `bioel refresh` and local paths use
`LocalFileSystem`. Only what publishing and the quality checks of what it publishes need (bioel_core.tables reads
through it): no directory semantics are assumed beyond "a path prefix", which is all an object store has.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import BinaryIO, Protocol


class FileSystem(Protocol):
    def join(self, *parts: str) -> str: ...

    def exists(self, path: str) -> bool: ...

    def is_folder(self, path: str) -> bool:
        """A directory, or on an object store a prefix that has objects under it."""

    def mkdirs(self, path: str) -> None: ...

    def children(self, folder: str) -> list[str]:
        """Names of the files and folders directly inside `folder`, sorted."""

    def open(self, path: str) -> BinaryIO: ...

    def write(self, path: str, data: bytes) -> None: ...

    def create_new(self, path: str, data: bytes) -> bool:
        """Write `path` only if it does not exist; False when it does (as atomically as the store allows). A write
        that fails (a full disk) leaves no file."""

    def modified(self, path: str) -> float | None:
        """When `path` was last written, in seconds since the epoch; None when the store does not say."""

    def rename(self, source: str, target: str) -> None:
        """Move a file, replacing `target`: one atomic step on POSIX disks, a whole-object copy on object stores."""

    def delete(self, path: str) -> None:
        """Remove a file or a folder with everything in it; a missing path is no error."""


class LocalFileSystem:
    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_folder(self, path: str) -> bool:
        return os.path.isdir(path)

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def children(self, folder: str) -> list[str]:
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []

    def open(self, path: str) -> BinaryIO:
        return open(path, "rb")

    def write(self, path: str, data: bytes) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def create_new(self, path: str, data: bytes) -> bool:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())  # a full disk may only say so here
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)  # created but not written: left behind, an empty lock file would block every later run
            raise
        return True

    def modified(self, path: str) -> float | None:
        return os.stat(path).st_mtime

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)
        _fsync_dir(os.path.dirname(target) or ".")

    def delete(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)


def _fsync_dir(folder: str) -> None:
    """Make a rename durable: without it a power cut can undo the pointer move on some filesystems."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


LOCAL = LocalFileSystem()  # the default of the functions that read through a FileSystem (it holds no state)


def is_local(path: str | Path) -> bool:
    return "://" not in str(path)


def absolute(path: str | Path) -> str:
    """A local path made absolute against this process's working folder; a URL (gs://...) as it is. The pipelines
    hand their workers paths so made: a worker started elsewhere (a portable runner's worker pool, a Flink or Spark
    task manager on this machine) would read a relative path against its own working folder."""
    return os.path.abspath(path) if is_local(path) else str(path)


def as_path(path: str | Path) -> Path | str:
    """A local path as a Path; a URL (gs://...) as its string, which pathlib would fold (gs:/bucket/...)."""
    return Path(path) if is_local(path) else str(path)
