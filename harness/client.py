"""The harness's side of the worker: start the solution's process, load the solution, send requests.

Every command talks to the solution through this one API:
  with Worker(progress) as worker:
      worker.load(args, device, init_args)        # import and build, once per process
      worker.request({"op": ...}, timeout=..., what="...")
and turns the SolutionFailure any of it raises (kind error, crash or timeout: exit 2) into its
verdict's "error" with failure.verdict(). What each request does is in harness/worker.py.
"""
import os
import tempfile
import time

from harness import codec, processes
from harness.worker import worker_main

_perf_counter = time.perf_counter


class SolutionFailure(Exception):
    """The solution could not be loaded, built or run. `kind`: error, crash or timeout."""

    def __init__(self, kind: str, message: str, detail: str = ""):
        super().__init__(message)
        self.kind, self.message, self.detail = kind, message, detail

    def verdict(self) -> dict:
        """What a verdict's "error" holds (exit 2): kind, message, and the solution's traceback or log."""
        return {"kind": self.kind, "message": self.message, "detail": self.detail}


class Worker:
    """The solution's process, started at once; used as a context manager it is closed at the end."""

    def __init__(self, progress=None):
        log_fd, self.log_path = tempfile.mkstemp(prefix="harness-worker-", suffix=".log")
        os.close(log_fd)
        ctx = processes.context()  # forkserver or spawn: processes.py says why
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(target=worker_main, args=(child_conn, self.log_path), daemon=True)
        self.process.start()
        child_conn.close()
        self.progress = progress

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:]).rstrip()
        except OSError:
            return ""

    def request(self, message: dict, *, timeout: float, what: str) -> dict:
        """Send one request; wait up to `timeout` seconds for the reply, showing elapsed time."""
        try:
            self.conn.send_bytes(codec.encode(message))
        except (BrokenPipeError, OSError):
            raise self._died(what)
        start = _perf_counter()
        while not self.conn.poll(0.25):
            elapsed = _perf_counter() - start
            if not self.process.is_alive() and not self.conn.poll(0):
                raise self._died(what)
            if elapsed > timeout:
                self.kill()
                raise SolutionFailure("timeout", f"{what} did not finish within {timeout:g} s (killed)", self.log_tail())
            if self.progress and elapsed > 2:
                self.progress(f"{what}: {elapsed:.0f} s")
        try:
            reply = codec.decode(self.conn.recv_bytes())
        except (EOFError, OSError):
            raise self._died(what)
        except Exception as e:
            self.kill()
            raise SolutionFailure("error", f"{what}: unreadable reply from the worker ({e})")
        if self.progress:
            self.progress(None)
        if not reply.get("ok"):
            raise SolutionFailure("error", f"{what}: {reply.get('error')}", reply.get("traceback", ""))
        return reply

    def load(self, args, device, init_args, seed=None, what="importing and building the solution") -> dict:
        """Import (and build) args.solution there and make ModelNew(*init_args) under `seed` (default
        args.seed), with the reference's Model beside it. The reply: import_seconds, the state_dict
        keys, what the import replaced (tampered) and the solution's source for the static scan."""
        return self.request({"op": "load", "solution": args.solution, "reference": args.reference,
                             "device": str(device), "init_args": init_args,
                             "seed": args.seed if seed is None else seed},
                            timeout=args.load_timeout, what=what)

    def _died(self, what: str) -> SolutionFailure:
        self.process.join(timeout=5)
        code = self.process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return SolutionFailure("crash", f"the solution's process died during {what} ({how})", self.log_tail())

    def kill(self):
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)

    def close(self):
        if self.process.is_alive():
            try:
                self.conn.send_bytes(codec.encode({"op": "exit"}))
                self.process.join(timeout=10)
            except (BrokenPipeError, OSError):
                pass
        self.kill()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
