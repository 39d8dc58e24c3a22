"""Build the Cython extensions (rocketstore/_native/*.pyx) with the C helpers in src/."""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

C_HELPERS = sorted(glob.glob("src/*.c"))
COMPILE_ARGS = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function", "-Wno-unreachable-code"]
if os.environ.get("ROCKETSTORE_DEBUG_BUILD"):
    COMPILE_ARGS = ["-O0", "-g", "-fsanitize=address,undefined"]


def native(name: str) -> Extension:
    return Extension(
        f"rocketstore._native.{name}",
        [f"rocketstore/_native/{name}.pyx", *C_HELPERS],
        include_dirs=["src", numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=COMPILE_ARGS,
        extra_link_args=COMPILE_ARGS if os.environ.get("ROCKETSTORE_DEBUG_BUILD") else [],
    )


MODULES = [os.path.splitext(os.path.basename(p))[0] for p in sorted(glob.glob("rocketstore/_native/*.pyx"))]

setup(
    ext_modules=cythonize(
        [native(m) for m in MODULES],
        compiler_directives={"language_level": "3", "embedsignature": True},
        include_path=["."],
    ),
)
