#!/usr/bin/env python3
"""tools_options.py --tools DIR --doc TOOLS.md [--train PROGRAM] [--docs DIR]

Checks docs/Tools.md against the tools, as tools-options.test says. Each
tool's --help (and its subcommands') is run and every option it lists is
extracted: the options of a usage block (from `usage:` to the next blank
line; on each line, up to a gap of three spaces) and of each line indented
at most six spaces whose first word is an option (the option column only,
up to the description). zero-opt lists every pass of MLIR and LLVM: of it, the zero passes (a name with `zero`) and their options
count, not zero-pipeline's, which are zero-compile's; a pass's options are
written bare (`policy`), as inside its quotes. Each option must be named,
backquoted (`--name`, `--name VALUE`, `--name=...`), in the tool's
section: from its heading (the tool's name in backquotes after `## `) to the
next `## `. With --train, the compiled program's --help is checked against
the section of `train`.

With --docs, no table cell of any page in DIR runs over 80 words.
Prints one line a tool, or each problem and exits 1.
"""
import argparse
import os
import re
import subprocess
import sys

# Each tool and the argument lists whose --help it is read from.
TOOLS = [
    ("zero-import", [[]]),
    ("zero-model-gen", [[]]),
    ("zero-opt", [[]]),
    ("zero-compile", [[]]),
    ("zero-estimate", [[]]),
    ("zero-tune", [[]]),
    ("zero-data", [[], ["tokens"], ["sft"]]),
    ("zero-ckpt", [[]]),
    ("zero-run", [[]]),
    ("zero-flight", [[]]),
]
MAX_CELL_WORDS = 80
OPTION = re.compile(r"(?<![\w<-])--?[A-Za-z][\w-]*")


def help_options(text):
    """The options a --help text lists, in order."""
    found = []
    in_usage = False
    for line in text.splitlines():
        if re.match(r"(usage|USAGE):", line):
            in_usage = True
        if in_usage:
            if not line.strip():
                in_usage = False
                continue
            # A remark after a wide gap (train's "(under mpirun -np ...)")
            # is not the tool's.
            found += OPTION.findall(re.split(r"   ", line.strip())[0])
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if indent > 6 or not re.match(r"\[?-", body):
            continue
        # The option column: up to LLVM's " - " or a gap of two spaces.
        column = re.split(r"\s+- |  ", body)[0]
        found += OPTION.findall(column)
    return list(dict.fromkeys(found))


def zero_opt_options(text):
    """zero-opt's zero passes (`--zero-remat`) and their options, bare
    (`policy`; zero-pipeline's are zero-compile's)."""
    found = []
    current = None
    for line in text.splitlines():
        m = re.match(r"( +)(--[\w-]+)", line)
        if not m:
            continue
        indent = len(m.group(1))
        if indent == 6:
            current = m.group(2) if "zero" in m.group(2) else None
            if current:
                found.append(current)
        elif indent == 8 and current and current != "--zero-pipeline":
            # Written `name=value` inside the pass's quotes.
            found.append(m.group(2)[2:])
        elif indent < 6:
            current = None
    return list(dict.fromkeys(found))


def sections(doc):
    """The text under each heading that is a backquoted name, to the next
    `## `."""
    result = {}
    name = None
    for line in doc.splitlines():
        m = re.match(r"## `([\w./-]+)`", line)
        if m:
            name = m.group(1)
            result[name] = []
            continue
        if line.startswith("## "):
            name = None
        elif name:
            result[name].append(line)
    return {k: "\n".join(v) for k, v in result.items()}


def documented(section, option):
    """Whether the section names the option backquoted, as itself."""
    return re.search(r"`" + re.escape(option) + r"(?![\w-])", section) \
        is not None


def run_help(path, args):
    out = subprocess.run([path] + args + ["--help"], capture_output=True,
                         text=True, timeout=120)
    if out.returncode != 0:
        sys.exit("tools_options: `%s --help` failed (%d): %s" %
                 (" ".join([path] + args), out.returncode, out.stderr))
    return out.stdout + out.stderr


def check_cells(docs_dir, problems):
    """Every table row's cells of every page, at most MAX_CELL_WORDS words.
    Returns how many cells it read."""
    cells = 0
    for page in sorted(os.listdir(docs_dir)):
        if not page.endswith(".md"):
            continue
        in_code = False
        for number, line in enumerate(
                open(os.path.join(docs_dir, page)).read().splitlines(), 1):
            if line.startswith("```"):
                in_code = not in_code
            if in_code or not line.lstrip().startswith("|"):
                continue
            # A `|` inside backquotes or escaped is text, not a border.
            masked = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(
                "|", "x"), line.replace("\\|", "x"))
            for cell in masked.strip().strip("|").split("|"):
                cells += 1
                words = len(cell.split())
                if words > MAX_CELL_WORDS:
                    problems.append(
                        "%s:%d: a table cell of %d words (at most %d; "
                        "move the text to a paragraph): %s..." %
                        (page, number, words, MAX_CELL_WORDS,
                         " ".join(cell.split()[:8])))
    return cells


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", required=True)
    parser.add_argument("--doc", required=True)
    parser.add_argument("--train")
    parser.add_argument("--docs")
    args = parser.parse_args()
    text = sections(open(args.doc).read())
    problems = []
    summary = []
    checks = [(tool, os.path.join(args.tools, tool), runs)
              for tool, runs in TOOLS]
    if args.train:
        checks.append(("train", args.train, [[]]))
    for tool, path, runs in checks:
        options = []
        for run in runs:
            help_text = run_help(path, run)
            options += (zero_opt_options(help_text) if tool == "zero-opt"
                        else help_options(help_text))
        options = list(dict.fromkeys(options))
        if tool not in text:
            problems.append('%s: no heading "## `%s`" in %s' %
                            (tool, tool, args.doc))
            continue
        missing = [o for o in options if not documented(text[tool], o)]
        for o in missing:
            problems.append("%s: %s is in its --help but not in its section "
                            "of %s" % (tool, o, os.path.basename(args.doc)))
        summary.append("%s: %d options" % (tool, len(options)))
    if args.docs:
        cells = check_cells(args.docs, problems)
        summary.append("docs: %d table cells, none over %d words" %
                       (cells, MAX_CELL_WORDS))
    if problems:
        print("\n".join(problems))
        return 1
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
