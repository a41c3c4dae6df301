"""zero_mlir.Engine: one rank's session of a step library (zero_rt/session.h).

The extension (_core) loads the library that `zero-compile --emit shared`
wrote and calls its zrt_session_* functions; this module turns Python's
arguments into theirs. Errors: ValueError for arrays or options that do not
fit the program (ZRT_INVALID_INPUT, which changes nothing), RuntimeError for
the rest, OSError when the library cannot be loaded.
"""

import json
import os
import pickle

import numpy as np

from . import _core


def _option_argv(options):
    """--name value pairs of the executable's options: True is a bare flag,
    False and None leave the option out."""
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not False and value is not None:
            argv += [flag, os.fspath(value) if isinstance(value, os.PathLike)
                     else str(value)]
    return argv


def _host_array(name, value):
    """A C-contiguous CPU array for the session: NumPy arrays and tensors
    with __dlpack__ (PyTorch) are passed without a copy when they are
    contiguous and on the CPU, anything else is copied."""
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    if hasattr(value, "__dlpack__"):
        # A PyTorch tensor: the session reads host memory.
        device = getattr(value, "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            value = value.cpu()
        if hasattr(value, "is_contiguous") and not value.is_contiguous():
            value = value.contiguous()
        return value
    array = np.ascontiguousarray(np.asarray(value))
    if array.dtype == object:
        raise TypeError("input '%s': expected an array, a tensor or numbers, "
                        "got %s" % (name, type(value).__name__))
    return array


class Engine:
    """One rank of a training run of a compiled step.

    Engine(path, init_from=None, seed=1234, **options) opens it
    (collective); options are the executable's that set a run up, as
    keyword arguments (threads=8, device=1, resume="ckpt", quiet=True,
    collectives="host"). A process holds one open Engine at a time: close
    it (or leave its with block) before opening the next; opening a second
    is a RuntimeError.
    """

    def __init__(self, library, init_from=None, seed=1234, **options):
        library = os.fspath(library)
        argv = ["--seed", str(seed)]
        if init_from is not None:
            argv += ["--init-from", os.fspath(init_from)]
        argv += _option_argv(options)
        self._manifest = None
        self._plan = None
        self._session = _core.Session(library, argv)
        self.library = library

    # -- lifetime --------------------------------------------------------

    def close(self):
        """Frees the session (collective); a second close does nothing."""
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _live(self):
        if self._session is None:
            raise RuntimeError("the engine is closed")
        return self._session

    # -- the program -----------------------------------------------------

    @property
    def inputs(self):
        """The step's inputs of a global batch: [{name, dtype, shape}]."""
        return self._live().inputs(False)

    @property
    def local_inputs(self):
        """The step's inputs of this rank's share of a global batch."""
        return self._live().inputs(True)

    @property
    def manifest(self):
        """The program's manifest (zero_rt/manifest.def), as a dict."""
        if self._manifest is None:
            self._manifest = json.loads(self._live().manifest())
        return self._manifest

    @property
    def plan(self):
        """The report of the schedule the library was compiled from, as a
        dict: `zero-opt --zero-report`'s JSON (docs/Report.md), priced on
        the compile's hardware preset: parameter counts, model states, the
        memory plan (persistent_bytes, step_arena_bytes,
        kernel_scratch_bytes, peak_bytes), communication and predicted
        step time per rank. The manifest's "plan" has the runtime's own
        figures."""
        if self._plan is None:
            self._plan = json.loads(self._live().report())
        return self._plan

    # -- training --------------------------------------------------------

    def _arrays(self, arrays):
        return [(name, _host_array(name, value))
                for name, value in arrays.items()]

    def step(self, local=False, **arrays):
        """One optimizer step (collective) on one array per input, by name:
        the global batch, or with local=True this rank's rows. Returns the
        step's record (the executable's --log-json line) as a dict."""
        return json.loads(self._live().step(self._arrays(arrays), local))

    def evaluate(self, local=False, **arrays):
        """The forward only, no state change (collective): a dict with the
        loss (and the count of valid labels for a mean over them)."""
        return json.loads(self._live().evaluate(self._arrays(arrays), local))

    def named_parameters(self, bucket_bytes=512 << 20, rank=None):
        """Yields (name, float32 array) for every parameter, gathered
        bucket_bytes at a time (collective: every rank iterates to the
        end). With rank=R only rank R gets the arrays; the others get None.
        """
        session = self._live()
        session.parameters_begin(bucket_bytes, -1 if rank is None else rank)
        while True:
            item = session.parameters_next()
            if item is None:
                return
            yield item

    # -- between ranks ---------------------------------------------------

    def broadcast(self, array=None, root=0):
        """Rank root's array on every rank, as a new NumPy array
        (collective, over the session's ranks): a NumPy array, a CPU tensor
        with __dlpack__ (PyTorch; bf16 arrives as its uint16 bits) or
        numbers on the root; the others' argument is ignored. A root
        outside the world, or an array the root cannot send, is an error
        on every rank."""
        session = self._live()
        if array is not None and self.rank == root:
            try:
                if hasattr(array, "__dlpack__") and \
                        not isinstance(array, (np.ndarray, np.generic)):
                    array = _host_array("array", array)
                else:
                    # Keeps a 0-d array's shape (ascontiguousarray would
                    # not).
                    array = np.asarray(array)
                    if not array.flags.c_contiguous:
                        array = array.copy(order="C")
            except Exception:  # noqa: BLE001 - refused on every rank below
                pass
        return session.broadcast(array, root)

    def broadcast_object(self, obj=None, root=0):
        """Rank root's picklable object on every rank (collective)."""
        payload, error = None, None
        if self.rank == root:
            try:
                payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
            except Exception as e:  # noqa: BLE001 - raised after the others
                error = e
        try:
            data = self.broadcast(payload, root)
        except ValueError:
            if error is not None:
                raise error from None
            raise
        return pickle.loads(data.tobytes())

    # -- state -----------------------------------------------------------

    def save(self, directory):
        """Writes a checkpoint (collective), the executable's --save."""
        self._live().save(os.fspath(directory))

    def load(self, directory):
        """Reads a checkpoint (collective), resharded as --resume does."""
        self._live().load(os.fspath(directory))

    def export_hf(self, directory):
        """Writes a Hugging Face model directory (collective)."""
        self._live().export_hf(os.fspath(directory))

    def offload(self):
        """Moves the arenas and optimizer states to host memory
        (collective)."""
        self._live().offload()

    def reload(self):
        """Brings them back (collective). RuntimeError on every rank when
        some rank's memory cannot hold them: the engine stays offloaded."""
        self._live().reload()

    @property
    def offloaded_bytes(self):
        """The host memory holding the arenas while offloaded (0 else)."""
        return self._live().offloaded_bytes()

    @property
    def stream_peak_bytes(self):
        """The most bytes of gathered tensors named_parameters held at once
        on this rank (host memory; the device holds the plan alone)."""
        return self._live().stream_peak_bytes()

    @property
    def rank(self):
        """This process's rank."""
        return self._live().rank()

    @property
    def world_size(self):
        return self._live().world_size()

    @property
    def steps(self):
        """Optimizer steps taken, a resumed checkpoint's included."""
        return self._live().steps()

    @property
    def last_peak_bytes(self):
        """The largest peak of device memory measured over every rank."""
        return self._live().peak_bytes()
