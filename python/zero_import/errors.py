"""The one error type of the importer: a message naming where it happened."""

import inspect


class ImportFailure(Exception):
    """A model the importer cannot translate exactly.

    `where` is (torch operation, module path, source line) as far as known.
    """

    def __init__(self, message, op=None, path=None, source=None):
        super().__init__(message)
        self.message = message
        self.op = op
        self.path = path
        self.source = source

    def render(self):
        parts = [self.message]
        if self.op:
            parts.append("torch operation: %s" % self.op)
        if self.path is not None:
            parts.append("module: %s" % (self.path or "<root>"))
        if self.source:
            parts.append("at %s" % self.source)
        return "\n  ".join(parts)


def source_of(obj):
    """'file:line: code' of a class or function's `class`/`def` line (its
    decorators aside)."""
    try:
        lines, line = inspect.getsourcelines(obj)
        path = inspect.getsourcefile(obj)
    except (OSError, TypeError):
        return None
    for i, text in enumerate(lines):
        if text.lstrip().startswith(("class ", "def ")):
            return "%s:%d: %s" % (path, line + i, text.strip())
    return "%s:%d: %s" % (path, line, lines[0].strip())
