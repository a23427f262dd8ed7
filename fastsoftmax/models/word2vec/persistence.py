"""fastsoftmax's model files, read without unpickling: an .npz of plain arrays with a JSON
`meta` entry and, beside it, the arrays saved separately as .npy files, which load can map
read-only (mmap='r') instead of reading them into memory.

What goes separately is gensim's rule: the arrays named in `separately`, or else every array
of sep_limit bytes or more. The meta lists each one with its file, dtype, shape and byte
size. Its file is NAME.TOKEN.ARRAY.npy in the model's folder, NAME being the model's file
name and TOKEN 8 hex digits drawn anew for each save.

A save writes the .npy files first, each atomically, then the .npz atomically, then removes
the files of earlier saves of NAME that the new .npz does not name. A save never writes over
an existing file (a fresh TOKEN), so a crash at any moment leaves the old .npz with its own
files intact, never an .npz naming another save's files; the new files a crash leaves are
named by no .npz, and the next save removes them. Removing a file that a map still reads
leaves the map's data in place (POSIX), so a mapped model may be saved over its own path.
Two processes saving the same path at once are not supported: one may remove the other's
new files, and loading its .npz then says which file is missing."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import warnings
import zipfile
import zlib
from contextlib import contextmanager

import numpy as np

from ...atomic import atomic_open
from .errors import WrongModelFileError

FORMAT_VERSION = 1  # an .npz alone
SPLIT_VERSION = 2   # with .npy files beside it: readers that predate them refuse it by number
SEP_LIMIT = 10 * 1024 ** 2
_ARRAY_PART = re.compile(r"[A-Za-z0-9_]{1,64}")
_NPY_MAGIC = b"\x93NUMPY"


def encode_json(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj).encode("utf8"), dtype=np.uint8)


def decode_json(arr):
    return json.loads(bytes(np.asarray(arr, dtype=np.uint8)).decode("utf8"))


def checked_mmap(mmap) -> None:
    """Only None and 'r': 'r+' and 'w+' would write through the map into the saved files,
    which other processes may be reading."""
    if not (mmap is None or (isinstance(mmap, str) and mmap == "r")):
        raise ValueError(f"mmap must be None (read the arrays into memory) or 'r' (map the "
                         f"arrays saved separately read-only), got {mmap!r}")


# ------------------------------------------ saving ------------------------------------------


def choose_separate(arrays: dict, separately, sep_limit) -> list:
    """The names of the arrays to store in .npy files: those in `separately` (then, as in
    gensim, no size rule), else those of sep_limit bytes or more (None: 10 MiB; bytes as
    gensim documents it, where its code compares element counts). An empty array stays in
    the .npz: there is nothing to map."""
    if separately is not None:
        names = [separately] if isinstance(separately, str) else list(separately)
        unknown = [n for n in names if n not in arrays]
        if unknown:
            raise ValueError(f"separately: {unknown} name no array of this model; its arrays "
                             f"are {sorted(arrays)}")
        return [n for n in dict.fromkeys(names) if np.asarray(arrays[n]).size]
    limit = SEP_LIMIT if sep_limit is None else sep_limit
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0:
        raise ValueError(f"sep_limit must be a number of bytes >= 0, got {sep_limit!r}")
    return [n for n, a in arrays.items()
            if np.asarray(a).size and np.asarray(a).nbytes >= limit]


def save_npz(path: str, arrays: dict, meta: dict, separate=()) -> None:
    """Writes `arrays` and `meta` at `path`, the arrays named in `separate` as .npy files
    beside it, in the order the module docstring gives."""
    path = os.fspath(path)
    if os.path.isdir(path):  # before any .npy is written
        raise IsADirectoryError(f"{path} is a directory; give a file name")
    folder, name = os.path.split(os.path.abspath(path))
    files = _new_files(path, folder, name, separate)
    entries = []
    try:
        for key, file in files.items():
            array = np.ascontiguousarray(arrays[key])
            with atomic_open(os.path.join(folder, file), "wb") as f:
                np.save(f, array, allow_pickle=False)
            entries.append({"name": key, "file": file, "dtype": array.dtype.str,
                            "shape": list(array.shape), "bytes": int(array.nbytes)})
        inline = {k: v for k, v in arrays.items() if k not in files}
        head = {"format": SPLIT_VERSION if entries else FORMAT_VERSION}
        inline["meta"] = encode_json({**head, **meta, **({"separate": entries} if entries
                                                         else {})})
        with atomic_open(path, "wb") as f:  # the exact path (np.savez would append .npz)
            np.savez(f, **inline)
    except BaseException:
        if not _names_any(path, files.values()):  # unless the error came after the rename
            _remove(folder, files.values())
        raise
    _remove(folder, _stale_files(folder, name, set(files.values())))


def _names_any(path: str, files) -> bool:
    """Whether the .npz at `path` names one of `files` (whose token is this save's)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            entries = decode_json(z["meta"]).get("separate", [])
        wanted = set(files)
        return any(e.get("file") in wanted for e in entries)
    except Exception:  # noqa: BLE001 (no file, or not one of ours: it names none of them)
        return False


def _token() -> str:
    return secrets.token_hex(4)


def _new_files(path: str, folder: str, name: str, separate) -> dict:
    """{array: file name} under a token that no file in the folder uses yet."""
    if not separate:
        return {}
    for _ in range(3):
        token = _token()
        files = {key: f"{name}.{token}.{_file_part(key, i)}.npy"
                 for i, key in enumerate(separate)}
        taken = [f for f in files.values() if os.path.lexists(os.path.join(folder, f))]
        if not taken:
            return files
    raise ValueError(f"cannot save {path}: {os.path.join(folder, taken[0])} already exists and "
                     "is not part of this save; it is left as it is: move it away or save "
                     "the model under another name")


def _file_part(key: str, i: int) -> str:
    """The array's name in its file name; a name no file name can hold (an attribute called
    "a/b") by its position."""
    return key if _ARRAY_PART.fullmatch(key) else f"array_{i}"


def _stale_files(folder: str, name: str, keep: set) -> list:
    """.npy files of earlier saves of `name` (NAME.TOKEN.ARRAY.npy exactly) not in `keep`."""
    pattern = re.compile(re.escape(name) + r"\.[0-9a-f]{8}\.[A-Za-z0-9_]{1,64}\.npy")
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    out = []
    for entry in entries:
        if pattern.fullmatch(entry) and entry not in keep:
            with contextlib.suppress(OSError), open(os.path.join(folder, entry), "rb") as f:
                if f.read(len(_NPY_MAGIC)) == _NPY_MAGIC:  # one more sign it is ours
                    out.append(entry)
    return out


def _remove(folder: str, files) -> None:
    for file in files:
        with contextlib.suppress(OSError):  # gone already, or held open (Windows)
            os.remove(os.path.join(folder, file))


# ------------------------------------------ loading -----------------------------------------


def load_npz(path: str, classes, mmap=None, mapped=None) -> tuple:
    """(dict of arrays, meta) of a file written by save_npz whose class is in `classes`; a
    ValueError naming the file for anything else (a pickle is refused, never unpickled).
    With mmap='r', the separate arrays named in `mapped` ({name: 'r' or 'c'}) are numpy
    maps of their files: 'r' read-only, 'c' copy-on-write (writes stay in this process's
    memory, never reach the file). All other arrays are read into memory."""
    arrays, meta = _read_archive(path)
    if meta.get("class") not in classes:
        raise WrongModelFileError(f"{path} holds a {meta.get('class')!r}, expected one of "
                                  f"{classes}")
    if meta.get("format") not in (FORMAT_VERSION, SPLIT_VERSION):
        raise ValueError(f"{path}: unsupported format version {meta.get('format')}")
    modes = (mapped or {}) if mmap == "r" else {}
    for entry in _entries(path, meta.pop("separate", []), arrays):
        arrays[entry[0]] = _read_npy(path, entry, modes.get(entry[0]))
    return arrays, meta


def _read_archive(path: str) -> tuple:
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:1] == b"\x80":  # pickle protocol 2+
        raise ValueError(f"{path} is a Python pickle: fastsoftmax never unpickles (it can run "
                         "code). A model saved by gensim: load it with gensim and convert it, "
                         "Word2Vec.from_gensim(model) or KeyedVectors.from_gensim(model.wv), "
                         "then save() it here")
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise ValueError(f"{path} is not an .npz file written by save() (it does not start "
                         f"like a zip archive: {magic!r})")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.array(z[k]) for k in z.files}
        meta = decode_json(arrays.pop("meta"))
        if not isinstance(meta, dict):
            raise ValueError(f"its meta entry is a JSON {type(meta).__name__}, not an object")
    # A damaged archive fails in the zip layer (BadZipFile, EOFError; zlib.error, OSError or
    # NotImplementedError for a compression method changed by the damage, RuntimeError for
    # an entry flagged encrypted) or in numpy's .npy reader (ValueError, OverflowError).
    except (zipfile.BadZipFile, EOFError, KeyError, ValueError, OverflowError, zlib.error,
            OSError, NotImplementedError, RuntimeError) as exc:
        reason = f"no {exc} entry" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"{path} cannot be read as a model saved by fastsoftmax (truncated, "
                         f"damaged or written by another program: {reason})") from None
    return arrays, meta


def _entries(path: str, entries, inline: dict) -> list:
    """The meta's separate arrays, checked: [(name, file, dtype, shape, bytes)]. A file must
    be a plain .npy name, read in the model's folder: a hostile meta cannot make load read
    anything else (no folders, no absolute paths)."""
    if not isinstance(entries, list):
        raise ValueError(f"{path}: its list of separate arrays is a JSON "
                         f"{type(entries).__name__}, not a list")
    out, names = [], set(inline) | {"meta"}
    for i, e in enumerate(entries):
        try:
            name, file, shape, size = e["name"], e["file"], e["shape"], e["bytes"]
            dtype = np.dtype(e["dtype"]) if isinstance(e["dtype"], str) else None
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"{path}: separate array entry {i} is malformed ({exc!r})") from None
        ok = (isinstance(name, str) and isinstance(file, str) and isinstance(shape, list)
              and all(type(n) is int and n >= 0 for n in shape) and type(size) is int
              and dtype is not None and dtype.kind in "biufc" and dtype.shape == ())
        if not ok or math.prod(shape) * dtype.itemsize != size:
            raise ValueError(f"{path}: separate array entry {i} is malformed: {e!r:.200}")
        if not _plain_npy_name(file):
            raise ValueError(f"{path}: separate array {name!r} names the file {file!r}, which "
                             "is not a plain .npy file name beside the model: refused")
        if name in names:
            raise ValueError(f"{path}: the array {name!r} is stored twice")
        names.add(name)
        out.append((name, file, dtype, tuple(shape), size))
    return out


def _plain_npy_name(file: str) -> bool:
    return (file.endswith(".npy") and file == os.path.basename(file) and "\0" not in file
            and (os.altsep is None or os.altsep not in file))


def _read_npy(path: str, entry: tuple, mode):
    """The array of one separate file: mapped with `mode`, or read (mode None)."""
    name, file, dtype, shape, size = entry
    full = os.path.join(os.path.dirname(os.path.abspath(path)), file)
    where = f"{path}: its array {name!r} is stored in {full}, which"
    try:
        f = open(full, "rb")
    except OSError as exc:
        raise ValueError(f"{where} cannot be opened ({exc.strerror or exc})") from None
    with f:  # checked and read through the same open file
        problem = _header_problem(f, dtype, shape, size)
        if problem:
            raise ValueError(f"{where} {problem}")
        try:
            if mode:
                return np.memmap(f, dtype=dtype, mode=mode, offset=f.tell(), shape=shape)
            return np.fromfile(f, dtype=dtype, count=math.prod(shape)).reshape(shape)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{where} cannot be read ({exc})") from None


def _header_problem(f, dtype, shape: tuple, size: int):
    """What is wrong with an .npy file's header and length against the meta, or None."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
        if version not in read:
            return f"is an .npy file of version {version}, which save() does not write"
        with warnings.catch_warnings():  # those of a Python 2 header: it is checked below
            warnings.simplefilter("ignore")
            got_shape, fortran, got_dtype = read[version](f)
    # numpy's parser of the header text raises many types on hostile bytes (ValueError,
    # tokenize.TokenError, SyntaxError, ...): whatever it raises, the header is not valid.
    except Exception as exc:  # noqa: BLE001
        return f"does not start with a valid .npy header ({type(exc).__name__}: {exc})"
    if got_dtype != dtype or tuple(got_shape) != shape or fortran:
        return (f"holds {got_dtype.str} {list(got_shape)}{' in Fortran order' if fortran else ''}"
                f" where the model file says {dtype.str} {list(shape)}")
    extra = os.fstat(f.fileno()).st_size - f.tell() - size
    if extra < 0:
        return f"is truncated: {-extra} bytes of its {size} are missing"
    if extra > 0:
        return f"has {extra} bytes after its data"
    return None


def read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view (a view of a np.memmap is one too)."""
    view = array.view()
    view.flags.writeable = False
    return view


@contextmanager
def file_contents(path: str, what: str):
    """Errors of building `what` from a file's arrays and settings name the file: a hostile
    file can hold any JSON and any arrays (KeyError, TypeError, IndexError, ... there)."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError, ValueError) as exc:
        if isinstance(exc, ValueError) and str(path) in str(exc):
            raise
        raise ValueError(f"{path}: its contents do not make a {what} ({type(exc).__name__}: "
                         f"{exc})") from None


# ------------------------------------ KeyedVectors -----------------------------------------


def save_keyed_vectors(kv, path: str, separately, sep_limit, ignore) -> None:
    if ignore:
        raise TypeError("KeyedVectors: save(ignore=...) is not supported: every part is saved")
    arrays = keyed_vectors_arrays(kv)
    save_npz(path, arrays, {"class": "KeyedVectors"},
             choose_separate(arrays, separately, sep_limit))


def load_keyed_vectors(cls, path: str, mmap):
    """The vectors of a KeyedVectors file, or the `wv` of a Word2Vec or PPMIVectors file."""
    checked_mmap(mmap)
    arrays, meta = load_npz(path, ("KeyedVectors", "Word2Vec", "PPMIVectors"), mmap,
                            {"vectors": "r", "wv_vectors": "r"})
    with file_contents(path, "KeyedVectors"):
        return keyed_vectors_from_arrays(cls, arrays,
                                         "wv_" if meta["class"] != "KeyedVectors" else "")


def keyed_vectors_arrays(kv, prefix: str = "") -> dict:
    """The arrays that store `kv` in a file, their names after `prefix` (a model's "wv_"):
    vectors, keys (as JSON) and one "attr_" array per per-key attribute."""
    out = {prefix + "vectors": np.ascontiguousarray(kv.vectors, dtype=np.float32),
           prefix + "keys": encode_json(kv.index_to_key)}
    for attr, values in kv.expandos.items():
        if values.dtype != object:  # per-key arrays (hs code, point) are rebuilt on load
            out[prefix + "attr_" + attr] = values
    return out


def keyed_vectors_from_arrays(cls, arrays: dict, prefix: str = ""):
    """A `cls` (KeyedVectors) from the arrays keyed_vectors_arrays made; a float32 np.memmap
    of the vectors (mmap='r') is kept as it is, any other array copied."""
    vectors = arrays[prefix + "vectors"]
    if not (isinstance(vectors, np.memmap) and vectors.dtype == np.float32):
        vectors = np.array(vectors, dtype=np.float32)  # a map (mmap='r') stays one
    kv = cls(vectors.shape[1], 0)
    kv.vectors = vectors
    kv.index_to_key = decode_json(arrays[prefix + "keys"])
    kv.key_to_index = {k: i for i, k in enumerate(kv.index_to_key)}
    for name in arrays:
        if name.startswith(prefix + "attr_"):
            kv.expandos[name[len(prefix) + 5:]] = np.array(arrays[name])
    if prefix + "counts" in arrays:  # files written before per-key attributes
        kv.counts = np.array(arrays[prefix + "counts"])
    if len(kv.index_to_key) != len(vectors):
        raise ValueError("corrupt file: number of words and of vectors differ")
    return kv
