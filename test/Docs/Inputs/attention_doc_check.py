"""Checks that docs/AddingAnAttentionVariant.md names only what exists.

Every backquoted repository path the page names must exist (as
collective_doc_check.py reads them); every field of the descriptor
(zero_rt/attention.def) and every attention entry of the ABI table must be
named by the page; and the ABI table declares at most three attention
entries: a variant is a field of the descriptor, never a new entry.
"""

import os
import re
import sys

import doc_pages


def main(root, page):
    text = open(page, encoding="utf-8").read()
    problems = []
    paths = doc_pages.check_paths(root, text, problems)
    include = os.path.join(root, "runtime/include/zero_rt")
    fields = re.findall(r"^ZRT_ATTENTION_FIELD\([^,]+,\s*(\w+)\)",
                        open(os.path.join(include, "attention.def")).read(),
                        re.M)
    entries = re.findall(r"^ZRT_KERNEL\((zrt_attention\w*),",
                         open(os.path.join(include, "abi.def")).read(), re.M)
    for name in fields:
        if "`" + name + "`" not in text:
            problems.append("does not name the descriptor's field " + name)
    for name in entries:
        if "`" + name + "`" not in text:
            problems.append("does not name the entry " + name)
    if len(entries) > 3:
        problems.append("abi.def declares %d attention entries (%s), more "
                        "than three" % (len(entries), ", ".join(entries)))
    return doc_pages.report(
        root, page, problems,
        "%d paths, %d fields, %d entries, all there" %
        (paths, len(fields), len(entries)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
