# -*- Python -*-
# lit configuration for pisa's IR, tool and integration tests.

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "PISA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Unit", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pisa_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%pisa_src_root", config.pisa_src_root))
# What the GPU pipeline runs between --pisa-decompose-to-kernels and
# --convert-pisa-to-gpu: one-shot bufferization, then deallocation.
bufferize = "--one-shot-bufferize=\"bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map\" --buffer-deallocation-pipeline"
config.substitutions.append(("%bufferize", bufferize))
# Every pass up to the GPU dialect, for programs that carry or lack their
# schedules (the valgrind tests run each kernel family through it).
config.substitutions.append(("%lower_to_gpu", "--pisa-select-schedule=keep-existing=1 --pisa-decompose-to-kernels " + bufferize + " --pisa-fuse-decode-append --pisa-configure-kernels --convert-pisa-to-gpu"))
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%pisa_python", os.path.join(config.pisa_src_root, "python")))
config.substitutions.append(("%cxx_compiler", config.cxx_compiler))
config.substitutions.append(("%cuda_include", config.cuda_include_dir))
config.substitutions.append(("%cuda_lib", config.cuda_library_dir))
config.substitutions.append(("%pisa_obj_root", config.pisa_obj_root))
config.substitutions.append(("%pisa_plugin", os.path.join(config.pisa_obj_root, "lib", "PisaPlugin.so")))
# The stock mlir-opt of the MLIR pisa is built against (Debian: mlir-opt-22).
config.substitutions.append(("%mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))
# MLIR's JIT runner and its support libraries, for IR-level execution tests.
config.substitutions.append(("%mlir_runner", os.path.join(config.llvm_tools_dir, "mlir-runner")))
_llvm_lib = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
config.substitutions.append(("%runner_shared_libs", ",".join(
    os.path.join(_llvm_lib, f"lib{n}.so") for n in ("mlir_c_runner_utils", "mlir_runner_utils"))))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "CUDA_HOME", "CUDA_ROOT", "CUDA_PATH",
                                     "ASAN_OPTIONS", "UBSAN_OPTIONS"])
# pisa-run keeps compiled programs in a cache by default; tests compile
# unless they ask for one (Tools/pisa-run-cache.test).
config.environment["PISA_CACHE_DIR"] = ""
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.pisa_tools_dir, append_path=True)

tools = ["pisa-opt", "pisa-run", "pisa-compile", "pisa-capi-test"]
llvm_config.add_tool_substitutions(
    [ToolSubst(t, unresolved="ignore") for t in tools], [config.pisa_tools_dir])


def has_numpy():
    return subprocess.run(["/usr/bin/python3", "-c", "import numpy"],
                          capture_output=True).returncode == 0


# A sanitizer build: its plugin cannot load into an uninstrumented mlir-opt.
if getattr(config, "pisa_sanitized", False):
    config.available_features.add("asan")
# valgrind's memcheck over the lowering (not over a sanitizer build: the
# two instrumentations do not mix).
elif shutil.which("valgrind"):
    config.available_features.add("valgrind")

# Execution tests that compare against the numpy reference.
if has_numpy():
    config.available_features.add("numpy")

# GPU execution tests: a CUDA driver that sees a device.
def has_cuda_device():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    return subprocess.run([smi, "-L"], capture_output=True).returncode == 0


if has_cuda_device():
    config.available_features.add("cuda")

# pisa-compile exists when pisa was configured with the CUDA toolkit.
if os.path.exists(os.path.join(config.pisa_tools_dir, "pisa-compile")):
    config.available_features.add("pisa-compile")

# ptxas turns PTX into the cubin that AOT libraries embed.
cuda_root = os.environ.get("CUDA_HOME", "/usr/local/cuda")
ptxas = shutil.which("ptxas") or os.path.join(cuda_root, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# pyflakes checks the Python sources (test/Lint/pyflakes.test).
if subprocess.run(["/usr/bin/python3", "-c", "import pyflakes"],
                  capture_output=True).returncode == 0:
    config.available_features.add("pyflakes")

# The formatter the sources are checked against (test/Lint/format.test):
# LLVM 22's, as every tool here; older ones format differently.
clang_format = shutil.which("clang-format-22") or "/usr/lib/llvm-22/bin/clang-format"
if os.path.exists(clang_format):
    config.available_features.add("clang-format")
    config.substitutions.append(("%clang_format", clang_format))

if subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                  capture_output=True).returncode == 0:
    config.available_features.add("torch")

# `pip install ./python` without network: Debian's pip and setuptools.
# (setuptools imported first: after pip, its distutils shim asserts.)
if subprocess.run(["/usr/bin/python3", "-c", "import setuptools, pip"],
                  capture_output=True).returncode == 0:
    config.available_features.add("pip")
