// The Python module fastsoftmax._C. Loading the shared library runs the static op
// registrations (STABLE_TORCH_LIBRARY in csrc/ops.cpp, the kernels' *_LIBRARY_IMPL blocks);
// the module itself carries one helper of word2vec's reader (lookup_words). It uses Python's
// limited C API only (Py_LIMITED_API, set by torch's build; the wheel is cp310-abi3) and no
// pybind11 or ATen, so it binds neither to one Python nor to one torch. How the library was
// built is fastsoftmax/_build_info.py, written by setup.py.
#include <Python.h>

#include <cstdint>

namespace {

// lookup_words(table, pieces) -> bytes: the values of the words of `pieces` (a list of lists
// of words) in `table` (a dict word -> int), in order, -1 for a word the table lacks, as the
// bytes of an int64 array. word2vec's reader of in-memory corpora
// (fastsoftmax/models/word2vec/data.py) looked each word up with dict.get from Python, 54 ns
// a word on WikiText-2, on the cores that train. Errors are dict.get's: an unhashable word
// raises TypeError.
PyObject* lookup_words(PyObject*, PyObject* args) {
  PyObject *table, *pieces;
  if (!PyArg_ParseTuple(args, "O!O!:lookup_words", &PyDict_Type, &table, &PyList_Type, &pieces))
    return nullptr;
  const Py_ssize_t n = PyList_Size(pieces);
  Py_ssize_t total = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* piece = PyList_GetItem(pieces, i);
    if (!PyList_Check(piece)) {
      PyErr_SetString(PyExc_TypeError, "lookup_words: pieces must be a list of lists");
      return nullptr;
    }
    total += PyList_Size(piece);
  }
  const Py_ssize_t bytes = total * static_cast<Py_ssize_t>(sizeof(int64_t));
  PyObject* out = PyBytes_FromStringAndSize(nullptr, bytes);
  if (out == nullptr) return nullptr;
  int64_t* ids = reinterpret_cast<int64_t*>(PyBytes_AsString(out));
  Py_ssize_t k = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* piece = PyList_GetItem(pieces, i);
    // The length read again: a piece cannot change here (the GIL is held throughout).
    const Py_ssize_t words = PyList_Size(piece);
    for (Py_ssize_t j = 0; j < words; ++j, ++k) {
      PyObject* id = PyDict_GetItemWithError(table, PyList_GetItem(piece, j));
      if (id == nullptr) {
        if (PyErr_Occurred()) {
          Py_DECREF(out);
          return nullptr;
        }
        ids[k] = -1;
        continue;
      }
      const long long value = PyLong_AsLongLong(id);
      if (value == -1 && PyErr_Occurred()) {
        Py_DECREF(out);
        return nullptr;
      }
      ids[k] = value;
    }
  }
  return out;
}

PyMethodDef methods[] = {
    {"lookup_words", lookup_words, METH_VARARGS,
     "lookup_words(table, pieces) -> bytes: table's int64 value of every word of the list of "
     "lists pieces, -1 where it has none"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_C",
    "fastsoftmax native ops (registered under torch.ops.fastsoftmax)",
    -1,
    methods,
};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module_def); }
