"""word2vec.c vector files that the file fuzzer (tools/fuzz_files/target_vectors.py) found
mishandled: each must raise a ValueError naming the file (and the line where there is one),
never allocate what a tiny file's header claims, nor raise another exception type."""

import tracemalloc

import numpy as np
import pytest

from fastsoftmax.models.word2vec import KeyedVectors, formats


def load(tmp_path, body: bytes, **kw):
    path = tmp_path / "vectors"
    path.write_bytes(body)
    return str(path), lambda: KeyedVectors.load_word2vec_format(str(path), **kw)


def test_no_header_file_whose_first_line_is_not_utf8_names_file_and_line(tmp_path):
    # Reading the width from the first line decoded it outside the loader's error handling:
    # a bare UnicodeDecodeError without the file's name.
    path, call = load(tmp_path, b"\n\nw0 1 -0.1 \xdb\xdb2\nw1 1 2 3\n", no_header=True)
    # Now a UnicodeDecodeError (a ValueError, the type gensim raises) that names both.
    with pytest.raises(UnicodeDecodeError, match=f"{path}, line 3 is not utf8"):
        call()


@pytest.mark.parametrize("binary", [False, True])
def test_header_claiming_10_to_12_vectors_fails_on_the_file_not_on_memory(tmp_path, binary):
    # The loader allocated the header's V x D floats up front: 4 TB here, a MemoryError.
    row = b"w " + (np.float32(1).tobytes() if binary else b"1.5") + b"\n"
    path, call = load(tmp_path, b"1000000000000 1\n" + row, binary=binary)
    with pytest.raises(ValueError, match=path):
        call()


@pytest.mark.parametrize("binary", [False, True])
def test_a_tiny_file_allocates_for_its_rows_not_for_its_header(tmp_path, binary):
    # 2 * 10^9 rows of 2 floats (16 GB) fit an overcommitting kernel's lazy zero pages, so
    # no MemoryError showed it; numpy reports its allocations to tracemalloc.
    row = b"w " + (np.float32(1).tobytes() * 2 if binary else b"1 2") + b"\n"
    path, call = load(tmp_path, b"2000000000 2\n" + row, binary=binary)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=path):
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_limited_binary_read_is_bounded_by_the_file(tmp_path):
    # With limit, the loader read V x (4 D + 258) bytes at once: for a header width of 10^12
    # Python allocated the read buffer before finding the file short.
    path, call = load(tmp_path, b"3 1000000000000\nw \x00\x00\x80\x3f\n", binary=True, limit=2)
    with pytest.raises(ValueError, match=f"{path}: entry 1 of 2 .* is truncated"):
        call()


@pytest.mark.parametrize("D", ["5000000000000000000", "99999999999999999999999"])
def test_a_vector_width_numpy_cannot_shape_names_the_header(tmp_path, D):
    # numpy's own "Maximum allowed dimension exceeded" named no file.
    path, call = load(tmp_path, b"0 " + D.encode() + b"\n")
    with pytest.raises(ValueError, match=f"{path}, line 1: a vector size of {D}"):
        call()


def test_rows_grow_past_a_wrong_size_bound():
    # The first allocation is a bound from the file's size; were it short, the rows grow.
    rows = formats._Rows(2, claimed=5, file_bytes=0, row_bytes=4)
    for i in range(5):
        rows.append(np.array([i, -i], dtype=np.float32))
    got = rows.array()
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, [[i, -i] for i in range(5)])


@pytest.mark.parametrize("binary", [False, True])
def test_saved_files_load_with_and_without_limit(tmp_path, binary):
    kv = KeyedVectors(3, 0)
    kv.add_vectors(["a", "bb", "é"], np.arange(9, dtype=np.float32).reshape(3, 3) - 4.5)
    path = tmp_path / "v"
    kv.save_word2vec_format(str(path), binary=binary)
    again = KeyedVectors.load_word2vec_format(str(path), binary=binary)
    assert again.index_to_key == ["a", "bb", "é"] and again.vectors.flags.c_contiguous
    np.testing.assert_array_equal(again.vectors, kv.vectors)
    limited = KeyedVectors.load_word2vec_format(str(path), binary=binary, limit=2)
    np.testing.assert_array_equal(limited.vectors, kv.vectors[:2])
