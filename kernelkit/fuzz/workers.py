"""Worker processes that run fuzz seeds, so that a seed that crashes or hangs its process
is that seed's failure and the run goes on: the protocol (seeds on stdin, one a line;
START seed, RESULT outcome-json lines, END seed on stdout), the batch runner that
replaces a worker that died, and the seeds a command line names (`parse_seeds`). Used by
kernelkit's fuzzer and by enzyme_ext's."""
from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
import time

from .runner import Outcome


def parse_seeds(text: str) -> list[int]:
    """The seeds `text` names: `a:b` (a to b - 1), `a,b,c`, or both joined by commas."""
    seeds = []
    for part in text.split(","):
        if ":" in part:
            start, stop = part.split(":")
            seeds += range(int(start), int(stop))
        else:
            seeds.append(int(part))
    return seeds


class WorkerProcess:
    def __init__(self, command: list[str]):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True, bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, seeds):
        self.process.stdin.write("".join(f"{s}\n" for s in seeds))
        self.process.stdin.close()

    def error_tail(self) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-6:])

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def run_batch(seeds: list[int], command: list[str], backend: str, timeout: float,
              report) -> None:
    """Run `seeds` in worker processes started with `command`, replacing one that crashes
    or hangs (a seed with no result after `timeout` seconds); `report(outcome)` for each
    outcome, those of crashes and hangs included (labelled `backend`)."""
    pending = list(seeds)
    while pending:
        worker_process = WorkerProcess(command)
        worker_process.send(pending)
        current, started = None, time.monotonic()
        limit = timeout + 20   # the first seed also waits for the worker to start
        while True:
            try:
                line = worker_process.lines.get(timeout=max(0.1, started + limit -
                                                            time.monotonic()))
            except queue.Empty:
                seed = current if current is not None else pending[0]
                worker_process.kill()
                report(Outcome(seed, backend, "hang", f"no result after {timeout} s"))
                pending.remove(seed)
                break
            if line is None:
                code = worker_process.process.wait()
                seed = current if current is not None else (pending[0] if pending else None)
                if seed is not None:
                    report(Outcome(seed, backend, "crash",
                                   f"worker exit status {code}: {worker_process.error_tail()}"))
                    pending.remove(seed)
                break
            kind, _, rest = line.partition(" ")
            if kind == "START":
                current, started, limit = int(rest), time.monotonic(), timeout
            elif kind == "RESULT":
                report(Outcome(**json.loads(rest)))
            elif kind == "END":
                pending.remove(int(rest))
                current = None
        worker_process.kill()


def run_seeds_in_workers(seeds: list[int], batch: int, jobs: int, command: list[str],
                         backend: str, timeout: float, report) -> None:
    """`seeds` in batches of `batch`, `jobs` worker processes at a time (`run_batch`).
    Returns when all are done; a KeyboardInterrupt (Ctrl-C, or a SIGTERM the caller turns
    into one) reaches the caller while the workers' threads are still running."""
    work: queue.Queue = queue.Queue()
    for start in range(0, len(seeds), batch):
        work.put(seeds[start:start + batch])

    def job():
        while True:
            try:
                seeds_of_batch = work.get_nowait()
            except queue.Empty:
                return
            run_batch(seeds_of_batch, command, backend, timeout, report)

    threads = [threading.Thread(target=job, daemon=True) for _ in range(jobs)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        time.sleep(0.2)
