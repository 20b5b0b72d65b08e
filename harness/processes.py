"""How the solution's worker process starts; torch-free, so `python -m harness` can start the
forkserver before it imports torch itself.

forkserver (the default): one clean server process per harness process imports torch, torch._dynamo
and the worker's modules once (nothing else: no CUDA, no solution) and forks a fresh worker from it
for each client.Worker, in a tenth of a second instead of the seconds a Python and torch start take;
every worker is still a new process that has run no solution code. spawn: a new interpreter per
worker, the way the harness started them before (HARNESS_WORKER_START=spawn).
"""
import multiprocessing
import multiprocessing.forkserver
import os

START_METHOD = os.environ.get("HARNESS_WORKER_START", "forkserver")
PRELOAD = ["harness.worker", "torch._dynamo"]


def context():
    """The multiprocessing context the workers start from."""
    ctx = multiprocessing.get_context(START_METHOD)
    if START_METHOD == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_server_early():
    """Start the forkserver now, so that its imports of torch and the worker's modules run while this
    process imports its own (`python -m harness` calls it first; the server is reused by every Worker)."""
    if START_METHOD == "forkserver":
        context()
        multiprocessing.forkserver.ensure_running()
