"""The one compiled part of hebbs: hnswlib 0.8.0 (vendor/hnswlib, Apache-2.0) built as hebbs_hnswlib,
with a loader that maps a checkpoint instead of reading it (vendor/hnswlib/README.md says why and what
changed). Everything else about the package is in pyproject.toml."""

import os
import platform

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

# A wheel may run on another CPU than the one that built it, so the default build targets the baseline
# ISA and compiles hnswlib's AVX and AVX-512 kernels for run-time dispatch (HEBBS_X86_DISPATCH). Building
# for this CPU alone (-march=native, hnswlib's own default) is opt-in: HEBBS_NATIVE=1 pip install ...
native = os.environ.get("HEBBS_NATIVE") == "1"
x86 = platform.machine().lower() in {"x86_64", "amd64", "i386", "i686"}
compile_args = ["-O3", "-fopenmp"] + (["-march=native"] if native else [])
macros = [("HEBBS_X86_DISPATCH", "1")] if x86 and not native else []

hnsw = Pybind11Extension("hebbs_hnswlib", ["vendor/hnswlib/bindings.cpp"], include_dirs=["vendor/hnswlib"],
                         cxx_std=14, extra_compile_args=compile_args, define_macros=macros,
                         extra_link_args=["-fopenmp", "-pthread"])

setup(ext_modules=[hnsw], cmdclass={"build_ext": build_ext})
