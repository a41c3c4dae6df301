"""The properties that fuzz-cli.py checks of a tool's run, the runs
themselves (a subprocess, or a main() in-process with a timeout), and the
self-test that the checker reports each kind of violation."""

import contextlib
import io
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

TIMEOUT = 10.0
# What a crash, an assertion, a sanitizer or an uncaught exception prints
# (C's assert: "file:line: function: Assertion `cond' failed.").
BANNED = ("Stack dump", "LLVM ERROR", "Assertion `", "internal error",
          "Traceback", "PLEASE submit a bug report", "AddressSanitizer",
          "LeakSanitizer", "UndefinedBehaviorSanitizer", ": runtime error: ")


def check(rc, output, signal_no=None, timed_out=False, exception=None,
          outputs=(), stdout_used=False, stdout=""):
    """The properties a run violates, as short sentences (empty: none)."""
    found = []
    if timed_out:
        found.append("did not finish within %g s" % TIMEOUT)
    if signal_no:
        try:
            name = signal.Signals(signal_no).name
        except ValueError:
            name = "?"
        found.append("killed by signal %d (%s)" % (signal_no, name))
    if exception:
        found.append("an exception escaped main(): %s" %
                     exception.strip().splitlines()[-1])
    if rc is not None and not signal_no and rc not in (0, 1, 2):
        found.append("exit status %d (expected 0, 1 or 2)" % rc)
    for word in BANNED:
        if word in output:
            found.append("printed %r" % word)
    if rc not in (0, None) and not timed_out and not signal_no and \
            not output.strip():
        found.append("exit status %d without a message" % rc)
    if rc == 0 and not timed_out:
        for path in outputs:
            if path == "-" and stdout_used:
                if not stdout.strip():
                    found.append("exit 0 but nothing written to stdout (-o -)")
            elif not os.path.isfile(path) or os.path.getsize(path) == 0:
                found.append("exit 0 but the output %r was not written (or "
                             "is empty)" % path)
    return found


def limit_memory(nbytes):
    def apply():
        if nbytes:
            resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    return apply


def run_subprocess(cmd, cwd, timeout=TIMEOUT, mem=0):
    """(rc, signal, timed_out, stdout, stderr) of cmd, its process group
    killed at the timeout."""
    p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=limit_memory(mem))
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    rc = p.returncode
    sig = -rc if rc is not None and rc < 0 and not timed_out else None
    return (None if sig or timed_out else rc, sig, timed_out,
            out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


class _Timeout(BaseException):
    """Raised by SIGALRM in the worker: a BaseException, so that the
    tools' `except Exception` does not swallow it."""


def run_in_process(fn, argv, timeout=TIMEOUT):
    """{status, output, exception, timed_out} of fn(argv), a tool's
    main(): its output captured, SystemExit turned into a status as the
    interpreter does."""
    out = io.StringIO()
    result = {"status": None, "exception": None, "timed_out": False}

    def alarm(signum, frame):
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                status = fn(argv)
                result["status"] = 0 if status is None else status
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    result["status"] = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
                    result["status"] = 1
    except _Timeout:
        result["timed_out"] = True
    except BaseException:  # noqa: B902 (what the property is about)
        result["exception"] = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    result["output"] = out.getvalue()
    if not isinstance(result["status"], int) and result["status"] is not None:
        result["exception"] = "main() returned %r, not a status" % (
            result["status"],)
        result["status"] = None
    return result


def self_test():
    """The checker reports a crash, a hang, a silent failure, a traceback
    and an escaping exception (the tools themselves never do, we hope)."""
    global TIMEOUT
    TIMEOUT = 1.0
    py = [sys.executable, "-c"]
    d = tempfile.mkdtemp(prefix="fuzz-cli-self-test-")
    cases = [
        ("SIGSEGV", lambda: run_subprocess(py + [
            "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], d)),
        ("hang", lambda: run_subprocess(py + ["import time; time.sleep(60)"],
                                        d, timeout=TIMEOUT)),
        ("exit 3", lambda: run_subprocess(py + [
            "import sys; print('x'); sys.exit(3)"], d)),
        ("silent", lambda: run_subprocess(py + ["import sys; sys.exit(1)"],
                                          d)),
        ("traceback", lambda: run_subprocess(py + ["raise ValueError"], d)),
    ]
    missed = []
    for name, fn in cases:
        rc, sig, timed_out, out, err = fn()
        found = check(rc, out + err, sig, timed_out)
        print("fuzz-cli: self-test %s: %s" % (name, "; ".join(found)))
        if not found:
            missed.append(name)

    def raises(argv):
        raise KeyError(argv[0])

    def returns(argv):
        return 0

    def hangs(argv):
        time.sleep(60)
    for name, fn in (("exception", raises), ("hang in-process", hangs),
                     ("no output", returns)):
        r = run_in_process(fn, ["x"], timeout=TIMEOUT)
        found = check(r["status"], r["output"], None, r["timed_out"],
                      r["exception"], [os.path.join(d, "missing.npy")])
        print("fuzz-cli: self-test %s: %s" % (name, "; ".join(found)))
        if not found:
            missed.append(name)
    shutil.rmtree(d, ignore_errors=True)
    if missed:
        print("fuzz-cli: self-test: not reported: %s" % ", ".join(missed))
        return 1
    print("fuzz-cli: self-test: every violation reported")
    return 0
