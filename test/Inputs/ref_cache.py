"""A cache of the tests' PyTorch references, so that a reference that several
RUN lines or tests compare with is computed once.

A reference (the losses of a torch training run, its final weights) depends
only on what it reads: its script and the test scripts it imports, the
model, the initial weights, the batches and its options, never on the log it
is compared with. `key()` hashes all of that by content; `get()` returns
what `put()` stored under the key, or None. The comparison itself always
runs: a cached reference changes how long a test takes, never what it
checks.

The cache lives where ZERO_REF_CACHE says (test/lit.cfg.py sets it to
ref-cache under the build's test directory); without it nothing is cached.
Entries are written to a temporary file and renamed, so tests that compute
the same reference at once never read half an entry.
"""

import hashlib
import importlib.metadata
import os
import pickle
import sys
import tempfile

_TEST = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The reference code: a change to any of these scripts is a new key.
_SOURCES = [os.path.join(_TEST, d, "Inputs") for d in ("E2E", "Import")]
_PACKAGES = ("torch", "transformers", "peft", "numpy", "safetensors")


def _hash_path(h, path):
    if os.path.isdir(path):
        for d, dirs, files in os.walk(path):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(d, f)
                h.update(os.path.relpath(p, path).encode() + b"\0")
                _hash_path(h, p)
        return
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    h.update(b"\0")


def key(script, options, paths):
    """The key of `script`'s reference for `options` (what it computes
    with, as text) on the files or directories `paths` (by content)."""
    h = hashlib.sha256()
    h.update(os.path.basename(script).encode() + b"\0")
    for d in _SOURCES:
        for f in sorted(os.listdir(d)):
            if f.endswith(".py"):
                h.update(f.encode() + b"\0")
                _hash_path(h, os.path.join(d, f))
    for name in _PACKAGES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(("%s=%s\0" % (name, version)).encode())
    h.update(repr(options).encode() + b"\0")
    for p in paths:
        if p is None:
            h.update(b"-\0")
        else:
            _hash_path(h, p)
    return h.hexdigest()


def _path(k):
    root = os.environ.get("ZERO_REF_CACHE")
    return os.path.join(root, k[:2], k + ".pickle") if root else None


def get(k):
    path = _path(k)
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError) as e:
        print("ref_cache: ignoring %s: %s" % (path, e), file=sys.stderr)
        return None


def put(k, value):
    path = _path(k)
    if not path:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)
