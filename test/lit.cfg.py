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

# Two tiers: "compiler" (the dialects, passes, tools, diagnostics and docs:
# no mpirun, no torch) and "integration" (tests that train or import with
# torch). A folder declares the integration tier in its lit.local.cfg:
#     config.suffixes = config.zero_tier_suffixes["integration"]
#     if not config.suffixes:
#         raise SystemExit
# and its subfolders inherit it; every other folder is the compiler's.
# `lit -D tier=compiler` (check-zero, `scripts/test.sh --quick`) or
# `-D tier=integration` (check-zero-integration) runs one tier; without the
# parameter both run. A folder of the tier not run has no suffixes, so it
# discovers no test.
zero_selected_tier = lit_config.params.get("tier", "all")
if zero_selected_tier not in ("compiler", "integration", "all"):
    lit_config.fatal("-D tier=%s: expected one of compiler, integration or "
                     "all" % zero_selected_tier)
config.zero_tier_suffixes = {
    tier: list(config.suffixes) if zero_selected_tier in ("all", tier) else []
    for tier in ("compiler", "integration")}
config.suffixes = config.zero_tier_suffixes["compiler"]
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
# The tests' torch references, computed once for every RUN line and test
# that compares with the same one (test/Inputs/ref_cache.py).
config.environment["ZERO_REF_CACHE"] = os.path.join(config.test_exec_root,
                                                    "ref-cache")

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
    # Open MPI 4.1's mpirun can see a rank's exit before the finalize that
    # preceded it when the machine is loaded, and then fails the job
    # ("exiting improperly", "PID 0") though every rank finished. A rank
    # that exits non-zero or by a signal still fails it.
    config.environment["OMPI_MCA_orte_allowed_exit_without_sync"] = "1"

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

# The zero_mlir package (ZERO_ENABLE_PYTHON): `zero-python` when it was
# built; %zero_python_packages is the folder to put on PYTHONPATH.
if config.zero_have_python.upper() in ("ON", "TRUE", "1", "YES"):
    config.available_features.add("zero-python")
config.substitutions.append(("%zero_python_packages",
                             config.zero_python_packages))

tool_dirs = [config.zero_tools_dir, config.llvm_tools_dir]
tools = ["zero-opt", "zero-model-gen", "zero-estimate", "zero-flight",
         "zero-compile", "zero-ckpt", "zero-run", "zero-tune", "zero-fuzz", "zero-import",
         "zero-data", "zrt-quantize-dump",
         "zrt-adam8bit-dump"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The integration tier's Python (%python, and zero-import and zero-data
# through ZERO_IMPORT_PYTHON): a client of one server per lit run that has
# torch and transformers imported and forks a child per command
# (Inputs/warm_python.py), which saves each command the 2-3 CPU-seconds of
# importing them. The child runs as a fresh interpreter would; the client
# runs the real interpreter wherever that could differ. `-D warm_python=0`
# runs the real interpreter everywhere.
if zero_selected_tier in ("integration", "all") and \
        lit_config.params.get("warm_python", "1") != "0":
    import atexit
    import uuid

    warm_script = os.path.join(config.zero_src_root, "test", "Inputs",
                               "warm_python.py")
    warm_name = "zero-warm-python-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8])
    warm_launcher = os.path.join(config.test_exec_root, "warm-python")
    os.makedirs(config.test_exec_root, exist_ok=True)
    with open(warm_launcher, "w") as f:
        f.write("#!/bin/sh\nexec %s -S -E %s client \"$@\"\n" % (
            config.python_executable, warm_script))
    os.chmod(warm_launcher, 0o755)
    # The integration folders' lit.local.cfg set these for every test; a
    # command whose load-time variables differ runs the real interpreter.
    warm_env = dict(config.environment, OMP_NUM_THREADS="1",
                    HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    try:
        # EOF on its standard input (lit exiting) stops the server.
        warm_server = subprocess.Popen(
            [config.python_executable, warm_script, "serve", warm_name,
             "numpy", "torch", "safetensors", "transformers",
             "transformers.modeling_utils", "torch.fx"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=warm_env)
        atexit.register(warm_server.stdin.close)
    except OSError as e:
        lit_config.warning("warm_python.py: %s; running the real interpreter"
                           % e)
    else:
        config.environment["ZERO_WARM_PYTHON"] = warm_name
        config.environment["ZERO_WARM_PYTHON_REAL"] = config.python_executable
        config.environment["ZERO_IMPORT_PYTHON"] = warm_launcher
        config.substitutions = [(k, v) for k, v in config.substitutions
                                if k != "%python"]
        config.substitutions.append(("%python", warm_launcher))
