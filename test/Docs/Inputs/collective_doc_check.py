"""Checks that docs/AddingACollective.md names only what exists.

Every backquoted repository path the page names (a word with a slash and a
file extension, or a folder ending in a slash) must exist, taken from the
repository root; a bare file name must exist beside the path named before
it in the same table cell or list item. Every `zrt_ctx_*` call and every
`ZRT_*` rule the page names must be in the ABI table or in
zero_rt/variants.h, and every collective op the lowering models
(CollectiveModels.cpp's attach list) must be named by the page.
"""

import os
import re
import sys

import doc_pages


def main(root, page):
    text = open(page, encoding="utf-8").read()
    problems = []
    paths = doc_pages.check_paths(root, text, problems)
    abi = open(os.path.join(root, "runtime/include/zero_rt/abi.def")).read()
    variants = open(
        os.path.join(root, "runtime/include/zero_rt/variants.h")).read()
    for name in sorted(set(re.findall(r"\bzrt_ctx_\w+", text))):
        if name not in abi:
            problems.append("names " + name + ", which abi.def lacks")
    for name in sorted(set(re.findall(r"\bzrt_variant_\w+", text))):
        if name not in variants:
            problems.append("names " + name + ", which variants.h lacks")
    models = open(os.path.join(
        root, "lib/Conversion/ZeroToRuntime/CollectiveModels.cpp")).read()
    attached = re.search(r"attach<([^>]*)>\(context\)", models)
    ops = re.findall(r"(\w+)Op\b", attached.group(1)) if attached else []
    for op in ops:
        mnemonic = "zero." + re.sub(r"(?<!^)([A-Z])", r"_\1", op).lower()
        if mnemonic != "zero.store_secondary" and "`" + mnemonic + "`" not in text:
            problems.append("does not name " + mnemonic +
                            ", which the lowering models")
    return doc_pages.report(
        root, page, problems,
        "%d paths, %d modelled collectives, all there" % (paths, len(ops)))

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
