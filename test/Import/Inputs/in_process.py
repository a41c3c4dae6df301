"""Runs several zero-import commands (and Python scripts of these tests) in
one Python process, so that a test of many refusals imports torch and
transformers once instead of once per case.

  in_process.py NAME: [not] COMMAND ARGS... [:: NAME: [not] COMMAND ...]...

COMMAND is zero-import (python -m zero_import, by name or path), zero-data
(python -m zero_import.data) or a Python script run as its __main__. Each
command's standard output and error go, in order, to the file NAME.out in
the current directory, for FileCheck. A command must exit
0, or with `not` non-zero (as lit's `not`): any that does otherwise is
named on standard error and makes this script exit 1 after the others ran.
The cases share one interpreter: one that changes a module's state
(hf_wrong_labels.py replaces zero_import.hf.step) goes last.
"""

import contextlib
import io
import os
import runpy
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))


def split(argv):
    cases, case = [], []
    for word in argv + ["::"]:
        if word != "::":
            case.append(word)
            continue
        if not case:
            continue
        if not case[0].endswith(":") or len(case) < 2:
            sys.exit("in_process.py: a case starts with NAME: and a command,"
                     " not %s" % shlex.join(case))
        name, words = case[0][:-1], case[1:]
        negate = words[0] == "not"
        if negate:
            words = words[1:]
        cases.append((name, negate, words))
        case = []
    return cases


def run(words):
    """The exit status of one command, its output printed."""
    try:
        # lit names the tool by its path in the build.
        if os.path.basename(words[0]) == "zero-import":
            from zero_import.__main__ import main
            return main(words[1:]) or 0
        if os.path.basename(words[0]) == "zero-data":
            from zero_import.data import main
            return main(words[1:]) or 0
        old = sys.argv
        sys.argv = list(words)
        try:
            runpy.run_path(words[0], run_name="__main__")
        finally:
            sys.argv = old
        return 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1


def main():
    wrong = []
    for name, negate, words in split(sys.argv[1:]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = run(words)
        with open(name + ".out", "w", encoding="utf-8",
                  errors="surrogateescape") as f:
            f.write(out.getvalue())
        if (status != 0) != negate:
            wrong.append("in_process.py: %s: `%s%s` exited %d\n%s" % (
                name, "not " if negate else "", shlex.join(words), status,
                out.getvalue()))
    for w in wrong:
        print(w, file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
