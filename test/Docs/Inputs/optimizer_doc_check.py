"""Checks that docs/AddingAnOptimizer.md names only what exists.

Every backquoted repository path the page names (a word with a slash and a
file extension, or a folder ending in a slash) must exist, taken from the
repository root. Every `zrt_ctx_*` call it names must be in abi.def, every
`ZRT_OPTIMIZER*` macro in optimizers.def, every function of the table it
names in zero_rt/optimizers.h or the compiler's Optimizers.h, and every
file the table's update entries are defined or declared in must be named.
"""

import os
import re
import sys

import doc_pages


def main(root, page):
    text = open(page, encoding="utf-8").read()
    problems = []
    paths = doc_pages.check_paths(root, text, problems)
    inc = os.path.join(root, "runtime/include/zero_rt")
    abi = open(os.path.join(inc, "abi.def")).read()
    table = open(os.path.join(inc, "optimizers.def")).read()
    headers = open(os.path.join(inc, "optimizers.h")).read() + open(
        os.path.join(root, "include/zero/Dialect/Zero/IR/Optimizers.h")).read()
    for name in sorted(set(re.findall(r"\bzrt_ctx_\w+", text))):
        if not re.search(r"ZRT_CTX\(" + name + ",", abi):
            problems.append("names " + name + ", which abi.def lacks")
    for name in sorted(set(re.findall(r"\bZRT_OPTIMIZER\w*", text))):
        if "#define " + name + "(" not in table:
            problems.append("names " + name + ", which optimizers.def lacks")
    for name in sorted(set(re.findall(
            r"`(bytesPerParam|isDecoupled|kStates|kStateBuffers|kindOfDsType|"
            r"get\w*Optimizer\w*)`", text))):
        if not re.search(r"\b" + name + r"\b", headers):
            problems.append("names " + name + ", which the table's headers "
                            "lack")
    # Every update entry of the table is on the page.
    entries = set()
    for row in re.findall(r"^ZRT_OPTIMIZER\(([^()]*)\)", table, flags=re.M):
        entries.update(a.strip() for a in row.split(",")[4:])
    for entry in sorted(entries):
        if "`" + entry + "`" not in text:
            problems.append("does not name " + entry +
                            ", an update entry of optimizers.def")
    return doc_pages.report(
        root, page, problems,
        "%d paths, %d update entries, all there" % (paths, len(entries)))

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
