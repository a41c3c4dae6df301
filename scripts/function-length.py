#!/usr/bin/env python3
"""function-length.py ROOT [--max N] [--list]

Finds the C++ function bodies in the *.cpp, *.h and *.cu files under lib/,
runtime/src, runtime/cuda/src and tools/ of ROOT and fails (exit 1) naming
each one longer than N lines (200 by default) as FILE:LINE NAME LINES. A
function runs from the first line of its declaration (template line
included) to its closing brace. --list prints every function of N lines or
more and exits 0.

The scan is lexical: comments, string and character literals (raw strings
included) and preprocessor lines are blanked first, then braces are matched.
A brace opened at namespace or class scope whose head ends like a function
declarator (`)`, a qualifier, a trailing return type, or a constructor's
initializer list) opens a function body; lambdas and local classes count
toward the function around them. Generated code lives in the build
directory and is not read.
"""
import argparse
import os
import re
import sys

DIRS = ["lib", "runtime/src", "runtime/cuda/src", "tools"]
SUFFIXES = (".cpp", ".h", ".cu", ".cuh")


def blank(text):
    """TEXT with comments, literals and preprocessor lines replaced by
    spaces (newlines kept, so offsets map to the same lines). A string
    literal leaves `""` so that `extern "C"` still reads as one."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # A directive runs to an unescaped newline.
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if c in " \t":
            out.append(c)
            i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or c == "'":
            raw = re.match(r'R"([^(\s]*)\(', text[i - 1:i + 20]) \
                if i and text[i - 1] == "R" and c == '"' else None
            if raw:
                j = text.find(")" + raw.group(1) + '"', i)
                j = n if j < 0 else j + len(raw.group(1)) + 2
            else:
                j = i + 1
                while j < n and text[j] != c:
                    j += 2 if text[j] == "\\" else 1
                j += 1
            body = re.sub(r"[^\n]", " ", text[i:j])
            if c == '"':
                body = '""' + body[2:]
            out.append(body)
            i = j
        elif c.isdigit() and i + 1 < n and text[i + 1] == "'":
            # A digit separator (1'000) is not a character literal.
            out.append(c + " ")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


FUNCTION_HEAD = re.compile(
    r"\)\s*(?:const|volatile|noexcept(?:\s*\([^()]*\))?|override|final|"
    r"mutable|&&?|->[^;{}=]*|\s)*$")
CTOR_INIT = re.compile(r"\)\s*(?:noexcept\s*)?:[^:]")
CONTAINER = re.compile(r"\b(?:namespace|class|struct|union)\b|extern\s*\"\"")


def functions(text):
    """(head offset, body end offset, name) of each function body."""
    code = blank(text)
    found = []
    head_start = 0
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == ";":
            head_start = i + 1
        elif c == "}":
            head_start = i + 1  # the end of a container
        elif c == "{":
            head = code[head_start:i]
            end = match_brace(code, i)
            stripped = head.strip()
            if FUNCTION_HEAD.search(stripped) or (
                    CTOR_INIT.search(stripped) and
                    re.search(r"[)}]\s*$", stripped)):
                found.append((head_start + len(head) - len(head.lstrip()),
                              end, name_of(stripped)))
                head_start = i = end + 1
                continue
            if CONTAINER.search(head) and "=" not in head:
                head_start = i + 1
                i += 1
                continue
            # An initializer, an enum or a brace in a constructor's
            # initializer list: part of the head, not a scope.
            i = end + 1
            continue
        i += 1
    return found


def match_brace(code, i):
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def name_of(head):
    # The name is the qualified identifier before the first top-level `(`
    # of the declarator (operator names included).
    m = re.search(r"((?:[\w~]+\s*(?:<[^<>()]*>)?\s*::\s*)*"
                  r"(?:operator\s*[^\s(]+|operator\s*\(\)|[\w~]+))\s*\(", head)
    return re.sub(r"\s+", "", m.group(1)) if m else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--max", type=int, default=200)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    files = count = 0
    long = []
    for d in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(args.root, d)):
            dirnames.sort()
            for f in sorted(filenames):
                if not f.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, args.root)
                text = open(path, encoding="utf-8").read()
                files += 1
                for start, end, name in functions(text):
                    count += 1
                    first = text.count("\n", 0, start) + 1
                    last = text.count("\n", 0, end) + 1
                    lines = last - first + 1
                    if lines > args.max or (args.list and lines >= args.max):
                        long.append((lines, rel, first, name))
    for lines, rel, first, name in sorted(long, reverse=True):
        print("%s:%d: %s is %d lines" % (rel, first, name, lines))
    if args.list:
        return 0
    if long:
        print("%d function(s) over %d lines" % (len(long), args.max))
        return 1
    print("%d files, %d functions, none over %d lines" %
          (files, count, args.max))
    return 0


if __name__ == "__main__":
    sys.exit(main())
