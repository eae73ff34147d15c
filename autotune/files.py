"""Every file the tool writes goes through `write_files` (or `StagedFiles`, for files made
one by one): all or nothing.

Each file is written to a temporary file in its own directory, flushed to disk, and
only then renamed over its name (`os.replace`, atomic on POSIX). A set of files (an
export) is staged completely before the first rename, so a full disk or any other
failure leaves every earlier file as it was and no half-written one. Files are
created with mode 0666 less the umask, as `open()` would create them.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

# What to write: text (UTF-8), bytes, or a function that writes to a binary file.
Content = str | bytes | Callable[[IO[bytes]], object]


def _stage(path: Path, content: Content) -> Path:
    """Write `content` to a new temporary file beside `path`, on disk; its path."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    # O_EXCL: never follow or reuse anything already there; 0o666 & ~umask, as open() does.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, str):
                f.write(content.encode())
            elif isinstance(content, bytes):
                f.write(content)
            else:
                content(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class StagedFiles:
    """Files staged one by one as they are made (a command's outputs, say) and put in place
    together when the `with` block ends without an error; on an error (or a failure of any
    rename's check) none replaces anything and every staged file is removed."""

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []
        self.paths: list[Path] = []

    def __enter__(self) -> StagedFiles:
        return self

    def add(self, path: str | Path, content: Content) -> None:
        """Stage `content` for `path`. Through a symbolic link the file it names is
        replaced and the link kept; a name that holds a device, pipe or socket is refused
        (a rename would put a plain file in its place: /dev/null, say)."""
        path = Path(path)
        if path.is_symlink():
            path = Path(os.path.realpath(path))
        if path.exists() and not path.is_file() and not path.is_dir():
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        self._staged.append((_stage(path, content), path))

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        try:
            if kind is None:
                # A rename fails only where a directory holds the name: find that before the first.
                for _, path in self._staged:
                    if path.is_dir():
                        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
                for temporary, path in self._staged:
                    os.replace(temporary, path)
                for directory in {path.parent for _, path in self._staged}:
                    _sync_directory(directory)
                self.paths = [path for _, path in self._staged]
                return
        except BaseException:
            self._discard()
            raise
        self._discard()

    def _discard(self) -> None:
        for temporary, _ in self._staged:
            temporary.unlink(missing_ok=True)


def write_files(files: Iterable[tuple[str | Path, Content]]) -> list[Path]:
    """Write every (path, content) or none (their directories must exist). Raises
    OSError, having replaced nothing, when any file cannot be written."""
    with StagedFiles() as staged:
        for path, content in files:
            staged.add(path, content)
    return staged.paths


def write_file(path: str | Path, content: Content) -> Path:
    """One file, all or nothing (see `write_files`)."""
    return write_files([(path, content)])[0]
