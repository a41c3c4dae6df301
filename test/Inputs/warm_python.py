"""A Python with torch and transformers already imported, for the tests.

Most of a short test script's time is `import torch` and `import
transformers` (about 2.5 CPU-seconds each time). lit.cfg.py starts one
server per lit run that imports them once and then forks a child for each
command the tests give %python (and zero-import, through
ZERO_IMPORT_PYTHON):

  warm_python.py serve NAME MODULE...   # lit.cfg.py; exits at EOF on stdin
  warm_python.py client ARGS...         # as `python ARGS...`

A child runs the command as a fresh interpreter would: its argv, working
directory, environment and standard streams are the client's, its exit
status (or the signal that ended it) is the client's, a signal sent to the
client goes to it, and it is killed if the client goes away. The client
runs the real interpreter instead (exec) wherever a fork could differ from
it: an interpreter option other than -c/-m/-u/-B, a variable read when the
modules load (OMP_*, LD_*, PYTHON* but PYTHONPATH, ...) that differs from
the server's, or no server.
"""

import json
import os
import select
import signal
import socket
import struct
import sys

# Variables that a module reads when it loads (the OpenMP runtime, the
# dynamic loader, the interpreter, huggingface_hub's constants): a client
# whose value differs from the server's runs the real interpreter.
_LOAD_TIME_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "LD_",
                       "PYTHON", "TORCH", "CUDA", "HF_", "TRANSFORMERS_",
                       "LC_", "LANG", "MALLOC_")


def _load_time_env(env):
    return {k: v for k, v in env.items()
            if k.startswith(_LOAD_TIME_PREFIXES) and k != "PYTHONPATH"}


def _send(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    msg = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [msg], list(fds))
    else:
        sock.sendall(msg)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _recv(sock, nfds=0):
    fds = []
    if nfds:
        head, fds, _, _ = socket.recv_fds(sock, 4, nfds)
        if len(head) < 4:
            head += _recv_exact(sock, 4 - len(head)) or b""
    else:
        head = _recv_exact(sock, 4)
    if not head or len(head) < 4:
        return None, fds
    data = _recv_exact(sock, struct.unpack("!I", head)[0])
    return (json.loads(data) if data is not None else None), fds


# -- client ------------------------------------------------------------------

def _command(args):
    """(mode, value, argv, unbuffered) of `python ARGS` where a child can
    run it: mode "script", "-c" or "-m"; None where only the real
    interpreter can."""
    unbuffered = False
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-u", "-B"):
            unbuffered = unbuffered or a == "-u"
            i += 1
        elif a in ("-c", "-m") and i + 1 < len(args):
            argv = (["-c"] if a == "-c" else [args[i + 1]]) + args[i + 2:]
            return a, args[i + 1], argv, unbuffered
        elif a.startswith("-") or a == "":
            return None
        else:
            return "script", a, args[i:], unbuffered
    return None


def client(args):
    real = os.environ.get("ZERO_WARM_PYTHON_REAL", sys.executable)
    name = os.environ.get("ZERO_WARM_PYTHON")
    command = _command(args)

    def fall_back(why):
        if os.environ.get("ZERO_WARM_PYTHON_DEBUG"):
            print("warm_python.py: the real interpreter: %s" % why,
                  file=sys.stderr)
        os.execv(real, [real] + args)

    if not name or command is None:
        fall_back("no server" if not name else "its options")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + name)
        hello, _ = _recv(sock)
    except OSError:
        hello = None
    if not hello:
        fall_back("cannot reach the server")
    if hello.get("env") != _load_time_env(os.environ):
        sock.close()
        mine = _load_time_env(os.environ)
        fall_back("variables differ: %s" % sorted(
            k for k in set(mine) | set(hello["env"])
            if mine.get(k) != hello["env"].get(k)))
    mode, value, argv, unbuffered = command
    sys.stdout.flush()
    sys.stderr.flush()
    _send(sock, {"mode": mode, "value": value, "argv": argv,
                 "unbuffered": unbuffered, "cwd": os.getcwd(),
                 "env": dict(os.environ)}, fds=(0, 1, 2))
    started, _ = _recv(sock)
    if not started:
        sys.exit("warm_python.py: the server did not start the command")
    pid = started["pid"]

    def forward(sig, frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
                signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, forward)
    while True:
        try:
            done, _ = _recv(sock)
            break
        except InterruptedError:
            continue
    if done is None:
        sys.exit("warm_python.py: lost the server while the command ran")
    if done.get("signal"):
        sig = done["signal"]
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(done.get("status", 1))


# -- server ------------------------------------------------------------------

def _fresh_stdio(unbuffered):
    """sys.stdin, stdout and stderr on fds 0, 1 and 2 as the interpreter
    makes them at its start (the server's were made for its own files)."""
    import io

    def make(fd, old, write, line):
        raw = io.FileIO(fd, "wb" if write else "rb", closefd=False)
        if write and unbuffered:
            buf = raw
        else:
            buf = (io.BufferedWriter if write else io.BufferedReader)(raw)
        stream = io.TextIOWrapper(buf, encoding=old.encoding,
                                  errors=old.errors,
                                  line_buffering=line or raw.isatty(),
                                  write_through=write and unbuffered)
        stream.mode = "w" if write else "r"
        return stream
    sys.stdin = sys.__stdin__ = make(0, sys.__stdin__, False, False)
    sys.stdout = sys.__stdout__ = make(1, sys.__stdout__, True, False)
    sys.stderr = sys.__stderr__ = make(2, sys.__stderr__, True, True)


def _run_child(req, base_path, added):
    """In the forked child: become `python ARGS` and never return."""
    code = 0
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(added)
        os.environ.update(req["env"])
        mode, value, argv = req["mode"], req["value"], req["argv"]
        # sys.path[0] as the interpreter sets it: the script's directory
        # (links resolved), the working directory for -m, "" for -c.
        first = {"script": os.path.dirname(os.path.realpath(value)),
                 "-m": os.getcwd()}.get(mode, "")
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                 if p]
        sys.path[:] = [first] + extra + base_path
        sys.argv = list(argv)
        _fresh_stdio(req.get("unbuffered"))
        # A fresh interpreter seeds these from the system's entropy.
        import random
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        # A new __main__ (this function's globals are the server's).
        import builtins
        import types
        module = types.ModuleType("__main__")
        sys.modules["__main__"] = module
        main = module.__dict__
        main.update({"__builtins__": builtins, "__spec__": None,
                     "__package__": None, "__loader__": None})
        if mode == "script":
            main["__file__"] = value
            with open(value, "rb") as f:
                source = f.read()
            exec(compile(source, value, "exec"), main)
        elif mode == "-c":
            exec(compile(value, "<string>", "exec"), main)
        else:
            import runpy
            runpy.run_module(value, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    try:
        # As the interpreter exits: wait for the threads, then run atexit.
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        import atexit
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xff)


def _attend(conn, listener, base_path, added):
    """In a forked waiter: start the command in a child, report its pid and
    how it ended, and kill it if the client goes away first."""
    listener.close()
    req, fds = _recv(conn, 3)
    if not req or len(fds) != 3:
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        conn.close()
        os.setpgid(0, 0)
        # The received fds may themselves be 0-2: move them clear first.
        import fcntl
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]
        for fd in fds:
            os.close(fd)
        for i, fd in enumerate(high):
            os.dup2(fd, i)
            os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _run_child(req, base_path, added)
    for fd in fds:
        os.close(fd)
    _send(conn, {"pid": pid})
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # Linux before 5.3: poll instead
        pidfd = None
    status = None
    while status is None:
        watch = [conn] if pidfd is None else [conn, pidfd]
        ready, _, _ = select.select(watch, [], [],
                                    0.05 if pidfd is None else None)
        if conn in ready and not conn.recv(1, socket.MSG_PEEK):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            os._exit(0)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
    if os.WIFSIGNALED(status):
        _send(conn, {"signal": os.WTERMSIG(status)})
    else:
        _send(conn, {"status": os.WEXITSTATUS(status)})
    os._exit(0)


def serve(name, modules):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(64)
    env = _load_time_env(os.environ)
    before = dict(os.environ)
    for m in modules:
        try:
            __import__(m)
        except Exception as e:  # the child imports it again and says why
            print("warm_python.py: cannot preload %s: %s" % (m, e),
                  file=sys.stderr)
    base_path = [p for p in sys.path[1:]
                 if p not in os.environ.get("PYTHONPATH", "").split(
                     os.pathsep)]
    # What the imports set (torch: TORCHINDUCTOR_CACHE_DIR) a child gets
    # too where its own environment lacks it, as a fresh import would.
    added = {k: v for k, v in os.environ.items() if k not in before}
    # Waiters are reaped by the kernel; each waits for its own command.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    stdin = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([listener, stdin], [], [])
        if stdin in ready and not os.read(stdin, 4096):
            return 0
        if listener in ready:
            conn, _ = listener.accept()
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                os.close(stdin)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                try:
                    _send(conn, {"env": env})
                    _attend(conn, listener, base_path, added)
                finally:
                    os._exit(1)
            conn.close()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2], sys.argv[3:]))
    if len(sys.argv) >= 2 and sys.argv[1] == "client":
        client(sys.argv[2:])
    sys.exit("usage: warm_python.py serve NAME MODULE... | client ARGS...")
