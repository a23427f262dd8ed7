// The Python module fastsoftmax._C. Loading the shared library runs the static op
// registrations (STABLE_TORCH_LIBRARY in csrc/ops.cpp, the kernels' *_LIBRARY_IMPL blocks);
// the module itself carries nothing. It uses Python's limited C API only (Py_LIMITED_API,
// set by torch's build; the wheel is cp310-abi3) and no pybind11 or ATen, so it binds neither to
// one Python nor to one torch. How the library was built is fastsoftmax/_build_info.py,
// written by setup.py.
#include <Python.h>

namespace {

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_C",
    "fastsoftmax native ops (registered under torch.ops.fastsoftmax)",
    -1,
    nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module_def); }
