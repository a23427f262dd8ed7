"""Atomic file writes: every file fastsoftmax writes (checkpoints, vector files, models, plots,
benchmark CSVs) goes through here, so that a crash, a SIGKILL or a full disk at any moment
leaves either the old file or the complete new one at the path, never half of one.

The bytes go to a hidden temporary file in the same folder (same file system, so the rename
cannot copy), which is flushed and fsync'ed, then renamed over the path with os.replace (an
atomic rename on POSIX and Windows), and the folder is fsync'ed so that the rename itself
survives a power cut. On an exception the temporary file is removed and the path untouched.

A process killed mid-write (SIGKILL, power cut) cannot remove its temporary file; nothing
reads it. The temporary's name carries its writer: .NAME.PID@HOST.XXXXXXXX.tmp (HOST: the
host name and, on Linux, the pid namespace). After each complete write of NAME, the
temporaries of NAME whose writer ran on this host and whose pid is no longer alive are
removed. A live writer's file is never touched (nor one of this
process, or of another host sharing the folder, or in the older .NAME.XXXXXXXX.tmp form);
a dead writer's pid reused by a new process only makes its file wait for a later write.
"""

import contextlib
import functools
import os
import re
import socket
import tempfile
from typing import Callable, Iterator

__all__ = ["atomic_open", "atomic_path", "atomic_write", "check_writable"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform that cannot open folders (Windows): nothing to sync
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=None)
def _host() -> str:
    """This host's name (at most 32 characters), plus the pid namespace where Linux names
    it: a container sharing the host's name and the folder has pids of its own."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:32] or "localhost"
    with contextlib.suppress(OSError):
        host += "-" + re.sub(r"\D", "", os.readlink("/proc/self/ns/pid"))
    return host


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: no signal sent, only the existence check
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, as another user's process
        return True
    return True


def _remove_stale_temporaries(folder: str, name: str) -> None:
    """Removes the temporaries of `name` left by writers on this host that have died."""
    if os.name != "posix":  # os.kill(pid, 0) is not an existence check on Windows
        return
    stale = re.compile(rf"\.{re.escape(name)}\.(\d+)@{re.escape(_host())}\.[a-z0-9_]+\.tmp")
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        m = stale.fullmatch(entry)
        if m is None or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):  # another writer may have removed it first
            os.remove(os.path.join(folder, entry))


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yields a temporary path to write in full; on a clean exit it replaces `path`::

        with atomic_path("model.pt") as tmp:
            torch.save(state, tmp)

    The new file gets the permissions of the file it replaces, or those a plain open() would
    give (0666 less the umask), not mkstemp's 0600. Temporaries of `path` that killed writers
    on this host left behind are removed once the new file is in place."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.{os.getpid()}@{_host()}.",
                                   suffix=".tmp")
    except OSError as exc:  # name the file asked for, not the temporary one
        raise type(exc)(exc.errno, f"cannot write {path}: {exc.strerror}") from None
    os.close(fd)
    try:
        yield tmp
        mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        with open(tmp, "rb+") as f:  # the writer may have closed its own handle: sync here
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    _fsync_folder(folder)
    _remove_stale_temporaries(folder, name)


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "wb", **kwargs):
    """open(temporary, mode) whose file replaces `path` when the block ends without error.
    `mode` is a write mode ('w', 'wb', 'w+', ...)."""
    if not mode.startswith("w"):
        raise ValueError(f"atomic_open writes a whole new file: mode must start with 'w', "
                         f"got {mode!r}")
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f
            f.flush()


def atomic_write(path: str, write: Callable[[str], None]) -> str:
    """write(temporary_path) writes the whole file, which then replaces `path`."""
    with atomic_path(path) as tmp:
        write(tmp)
    return path


def check_writable(path: str, what: str = "output") -> None:
    """ValueError now, before any work, if `path` could not be written later: it is a folder,
    a file stands where one of its folders should be, or its nearest existing folder takes no
    new files (missing folders below that one are created when the file is written)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{what} {path} is a directory; give a file name")
    existing = os.path.dirname(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"cannot write {what} {path}: {existing} is not a folder")
    try:  # the only reliable test (permissions, read-only or special file systems, root)
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".fastsoftmax-write-check-")
    except OSError as exc:
        raise ValueError(f"cannot write {what} {path}: folder {existing} takes no new files "
                         f"({exc.strerror})") from None
    os.close(fd)
    os.remove(probe)
