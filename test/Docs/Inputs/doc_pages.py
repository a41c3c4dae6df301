"""What the checks of the docs/Adding*.md pages share: the repository paths a
page names, and the report of what it names wrongly."""

import os
import re


def check_paths(root, text, problems):
    """Every backquoted repository path (a word with a slash and a file
    extension, or a folder ending in a slash) must exist, taken from the
    repository root; a bare file name must exist beside the path named before
    it in the same table cell or list item. Returns how many paths it read."""
    paths = 0
    for chunk in re.split(r"\n\n|\n- |\| ", text):
        base = None
        for word in re.findall(r"`([^`\s]+)`", chunk):
            if "/" in word and re.search(r"(\.[A-Za-z]+|/)$", word):
                paths += 1
                if not os.path.exists(os.path.join(root, word)):
                    problems.append("names " + word + ", which does not exist")
                base = word.rstrip("/") if word.endswith("/") else \
                    os.path.dirname(word)
            elif re.fullmatch(r"[\w-]+\.(td|cpp|h|def|mlir|test|md|c)", word):
                if base is not None and not os.path.exists(
                        os.path.join(root, base, word)):
                    problems.append("names " + word + ", which is not in " +
                                    base + "/")
    return paths


def report(root, page, problems, summary):
    """Prints each problem, or the summary line; returns the exit status."""
    where = os.path.relpath(page, root)
    for p in problems:
        print(where + ": " + p)
    if problems:
        return 1
    print(where + ": " + summary)
    return 0
