"""Checks that a docs page names only repository paths that exist, as the
docs/Adding*.md checks read them (doc_pages.check_paths), for a page that
has no table to check besides.

  paths_check.py ROOT PAGE
"""

import sys

import doc_pages


def main(root, page):
    problems = []
    paths = doc_pages.check_paths(root, open(page, encoding="utf-8").read(),
                                  problems)
    return doc_pages.report(root, page, problems,
                            "%d paths, all there" % paths)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
