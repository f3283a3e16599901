"""The one compiled part of hebbs: hnswlib 0.8.0 (vendor/hnswlib, Apache-2.0) built as hebbs_hnswlib,
with a loader that maps a checkpoint instead of reading it (vendor/hnswlib/README.md says why and what
changed). Everything else about the package is in pyproject.toml."""

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

# The flags hnswlib's own build uses: -march=native turns on the SIMD distance kernels of the CPU that
# builds it (the package is built where it is installed), OpenMP its parallel adds.
hnsw = Pybind11Extension("hebbs_hnswlib", ["vendor/hnswlib/bindings.cpp"], include_dirs=["vendor/hnswlib"],
                         cxx_std=14, extra_compile_args=["-O3", "-march=native", "-fopenmp"],
                         extra_link_args=["-fopenmp", "-pthread"])

setup(ext_modules=[hnsw], cmdclass={"build_ext": build_ext})
