"""Build the Cython extensions (rocketstore/_native/*.pyx, the remoting codec in
rocketstore/remoting/_*.pyx, the clients' record decoder rocketstore/client/_records.pyx, the
broker's native request paths rocketstore/broker/processors/*/_*.pyx) and the C helpers in
src/.

The helpers (src/*.c) are compiled once into a static library that every extension links;
src/*.h are header-only helpers declared for Cython in rocketstore/_native/includes/*.pxd.
"""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = bool(os.environ.get("ROCKETSTORE_DEBUG_BUILD"))
C_HELPERS = sorted(glob.glob("src/*.c"))
C_DEPENDS = sorted(glob.glob("src/*.h")) + C_HELPERS
COMPILE_ARGS = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function", "-Wno-unreachable-code"]
if DEBUG:
    COMPILE_ARGS = ["-O0", "-g", "-fsanitize=address,undefined"]
HELPERS_LIB = ("rocketstore_helpers", {
    "sources": C_HELPERS,
    "obj_deps": {"": sorted(glob.glob("src/*.h"))},
    "include_dirs": ["src"],
    "cflags": COMPILE_ARGS,
})


class BuildExtWithHelpers(build_ext):
    """build_ext that builds the helpers' library first (plain `build` does that already;
    `build_ext --inplace` alone would not)."""

    def run(self):
        if self.force:      # build_clib goes by timestamps only: --force rebuilds it too
            build_temp = self.get_finalized_command("build_clib").build_temp
            for source in C_HELPERS:
                obj = os.path.join(build_temp, os.path.splitext(source)[0] + ".o")
                if os.path.exists(obj):
                    os.remove(obj)
        self.run_command("build_clib")
        super().run()


def native(name: str) -> Extension:
    return Extension(
        f"rocketstore._native.{name}",
        [f"rocketstore/_native/{name}.pyx"],
        include_dirs=["src", numpy.get_include()],
        depends=C_DEPENDS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=COMPILE_ARGS,
        extra_link_args=COMPILE_ARGS if DEBUG else [],
    )


def remoting(name: str) -> Extension:
    """The remoting layer's codec: no store helpers, no numpy (remoting imports neither)."""
    return Extension(
        f"rocketstore.remoting.{name}",
        [f"rocketstore/remoting/{name}.pyx"],
        extra_compile_args=COMPILE_ARGS,
        extra_link_args=COMPILE_ARGS if DEBUG else [],
    )


def client(name: str) -> Extension:
    """The clients' record decoder: like the remoting codec, no store helpers, no numpy."""
    return Extension(
        f"rocketstore.client.{name}",
        [f"rocketstore/client/{name}.pyx"],
        extra_compile_args=COMPILE_ARGS,
        extra_link_args=COMPILE_ARGS if DEBUG else [],
    )


def broker(path: str) -> Extension:
    """The broker's native request paths (``path`` below rocketstore/broker/, without .pyx):
    over the native layer and the remoting codec."""
    return Extension(
        "rocketstore.broker." + path.replace("/", "."),
        [f"rocketstore/broker/{path}.pyx"],
        include_dirs=["src", numpy.get_include()],
        depends=C_DEPENDS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=COMPILE_ARGS,
        extra_link_args=COMPILE_ARGS if DEBUG else [],
    )


REMOTING_MODULES = ["_command", "_frames", "_headers", "_pump"]
BROKER_MODULES = ["processors/send/_send_header", "processors/send/_send_path"]
CLIENT_MODULES = ["_records"]
MODULES = [os.path.splitext(os.path.basename(p))[0] for p in sorted(glob.glob("rocketstore/_native/*.pyx"))]

setup(
    libraries=[HELPERS_LIB],
    cmdclass={"build_ext": BuildExtWithHelpers},
    ext_modules=cythonize(
        [native(m) for m in MODULES] + [remoting(m) for m in REMOTING_MODULES]
        + [client(m) for m in CLIENT_MODULES] + [broker(m) for m in BROKER_MODULES],
        compiler_directives={"language_level": "3", "embedsignature": True},
        include_path=["."],
    ),
)
