# -*- Python -*-
import os
import shutil
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "ZERO"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zero_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "README.md"]

# OMPI_CC/OMPI_CXX: the compiler mpicxx links programs with (zero-compile);
# scripts/sanitize.sh sets them to clang with the sanitizer runtimes.
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "OMPI_CC", "OMPI_CXX"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

config.substitutions.append(("%zero_src", config.zero_src_root))
# Where the built tools are, for scripts that run several of them
# (scripts/update-report-doc.py).
config.substitutions.append(("%zero_tools_dir", config.zero_tools_dir))
# ZERO_PYTHON: the project's venv (scripts/setup.sh), where the tests' torch,
# transformers and NumPy references run.
# use_default_substitutions() made %python lit's own Python: replace it.
config.python_executable = config.python_executable or sys.executable
config.substitutions = [(k, v) for k, v in config.substitutions
                        if k != "%python"]
config.substitutions.append(("%python", config.python_executable))

# Multi-rank runs of compiled executables (test/E2E): `%mpirun -np 4 ...`.
mpirun = shutil.which("mpirun")
if mpirun:
    config.available_features.add("mpirun")
    # Each test's Open MPI session directory lies under the test's own %t:
    # lit workers starting mpirun at the same moment otherwise race creating
    # the shared /tmp/ompi.HOST.UID ("mkdir ...: File exists").
    config.substitutions.append(
        ("%mpirun", mpirun + " --allow-run-as-root --oversubscribe"
         " --mca orte_tmpdir_base %t.ompi"))

# The CUDA backend: `cuda-backend` when it was built (zero-compile --target
# cuda links), `cuda-gpu` when a GPU is usable here too, `cuda-gpus-2` with
# two or more (NCCL runs one rank per GPU). GPU tests skip without them.
if config.zero_have_cuda.upper() in ("ON", "TRUE", "1", "YES"):
    config.available_features.add("cuda-backend")
    smi = shutil.which("nvidia-smi")
    gpus = 0
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True,
                                 timeout=60)
            if out.returncode == 0:
                gpus = sum(1 for line in out.stdout.splitlines()
                           if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            gpus = 0
    if gpus >= 1:
        config.available_features.add("cuda-gpu")
    if gpus >= 2:
        config.available_features.add("cuda-gpus-2")

tool_dirs = [config.zero_tools_dir, config.llvm_tools_dir]
tools = ["zero-opt", "zero-model-gen", "zero-estimate", "zero-flight",
         "zero-compile", "zero-ckpt", "zero-run", "zero-tune", "zero-fuzz", "zero-import",
         "zero-data", "zrt-quantize-dump",
         "zrt-adam8bit-dump"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
