#!/usr/bin/env python3
"""doc_block.py DOC NAME

Prints the fenced code block that follows the HTML comment naming NAME in
the Markdown page DOC (the comment's next line opens the block). Fails,
naming both, when there is no such comment or block.
"""
import sys


def main():
    doc, name = sys.argv[1], sys.argv[2]
    lines = open(doc).read().splitlines()
    start = next((i for i, l in enumerate(lines)
                  if l.startswith("<!--") and name in l), None)
    if start is None or start + 1 >= len(lines) or \
            not lines[start + 1].startswith("```"):
        sys.exit("%s: no fenced block after a comment naming %s" % (doc, name))
    try:
        end = lines.index("```", start + 2)
    except ValueError:
        sys.exit("%s:%d: the block after the comment naming %s is not "
                 "closed" % (doc, start + 2, name))
    print("\n".join(lines[start + 2:end]))


if __name__ == "__main__":
    main()
