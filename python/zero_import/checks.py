"""Checks of a command line that zero-import and zero-data make before they
read or write anything: the files they will write are exactly the paths
given, none of them an input or another output, and the arrays a size
option asks for fit this machine's memory. Each returns the message of
the first problem (the option and its value named), or None."""

import os


def _same(a, b):
    """Whether paths a and b name one file (through links), written or
    not."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # either does not exist yet
        return False


def output_conflict(outputs, inputs=(), suffix=None):
    """The problem with the first of `outputs`, [(option, path)], that is
    an existing directory, lies in no directory, lacks `suffix`, or is the
    file of another output or of one of `inputs`, [(what, path)]."""
    for i, (option, path) in enumerate(outputs):
        if os.path.isdir(path):
            return "%s %s is a directory, not a file to write" % (option,
                                                                  path)
        parent = os.path.dirname(path) or "."
        if not os.path.isdir(parent):
            return "%s %s: no directory %s to write it in" % (option, path,
                                                               parent)
        if suffix and not path.endswith(suffix):
            return "%s %s: the file written is a %s array; give a name " \
                   "that ends in %s, such as %s%s" % (option, path, suffix,
                                                      suffix, path, suffix)
        for what, other in list(inputs) + outputs[:i]:
            if _same(path, other):
                return "%s %s is also %s%s: it would overwrite it" % (
                    option, path, what,
                    "" if os.path.normpath(path) == os.path.normpath(other)
                    else " (%s)" % other)
    return None


def physical_memory():
    """This machine's memory in bytes, or None where the system does not
    say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def bytes_text(n):
    """n bytes in binary units, as the tools print sizes."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return "%d bytes" % n if unit == "bytes" else "%.1f %s" % (n, unit)
        n /= 1024.0


def too_big(what, nbytes):
    """The problem with arrays of `nbytes` bytes (`what` names the options
    that sized them, then the arrays) that exceed this machine's memory:
    refused before they are allocated, which would fail inside numpy or
    PyTorch, or have the process killed."""
    memory = physical_memory()
    if memory is not None and nbytes > memory:
        return "%s need %s, more than this machine's memory (%s)" % (
            what, bytes_text(nbytes), bytes_text(memory))
    return None
