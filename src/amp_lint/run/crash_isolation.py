"""Finishing a run after a worker process died, so that a file that kills its process (a
crash in libcst's native parser, the kernel's out-of-memory killer) costs that file only.

When a process pool breaks, every job it was running or had queued fails with it, and
nothing says which one was to blame. So the remaining jobs run again with only a few in
flight at a time; when the pool breaks again, each job that was in flight runs alone in a
process of its own, which tells the culprit from the bystanders. Workers write nothing, so
running a job twice is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Generic, TypeVar

Job = TypeVar("Job")
Outcome = TypeVar("Outcome")


class IsolatingRunner(Generic[Job, Outcome]):
    """Runs jobs in pools made by `make_pool(workers)`, at most `workers` in flight, and
    gives each job that was in flight when a pool broke a process of its own."""

    def __init__(
        self,
        work: Callable[[Job], Outcome],
        make_pool: Callable[[int], ProcessPoolExecutor],
        crashed: Callable[[Job], Outcome],
        workers: int,
    ) -> None:
        self.work = work
        self.make_pool = make_pool
        self.crashed = crashed  # the outcome of a job whose process died every time
        self.workers = max(1, workers)

    def run(self, jobs: Sequence[Job], done: Callable[[int], None] | None = None) -> list[Outcome]:
        results: dict[int, Outcome] = {}
        waiting = list(range(len(jobs)))
        waiting.reverse()  # popped from the end: jobs start in their order
        while waiting:
            suspects = self._run_until_broken(jobs, waiting, results, done)
            for index in suspects:
                results[index] = self._run_alone(jobs[index])
                if done is not None:
                    done(len(results))
        return [results[index] for index in range(len(jobs))]

    def _run_until_broken(
        self,
        jobs: Sequence[Job],
        waiting: list[int],
        results: dict[int, Outcome],
        done: Callable[[int], None] | None,
    ) -> list[int]:
        """Runs waiting jobs in one pool until they are all done (returns []) or the pool
        breaks (returns the jobs that were in flight, which are no longer waiting)."""
        pool = self.make_pool(self.workers)
        in_flight: dict[Future[Outcome], int] = {}
        try:
            while waiting or in_flight:
                while waiting and len(in_flight) < self.workers:
                    try:
                        future = pool.submit(self.work, jobs[waiting[-1]])
                    except BrokenProcessPool:  # a worker died before its result was read
                        return list(in_flight.values())
                    in_flight[future] = waiting.pop()
                future = next(iter(in_flight))  # oldest first; the others keep running
                try:
                    results[in_flight[future]] = future.result()
                except BrokenProcessPool:
                    return list(in_flight.values())
                del in_flight[future]
                if done is not None:
                    done(len(results))
            return []
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _run_alone(self, job: Job) -> Outcome:
        pool = self.make_pool(1)
        try:
            return pool.submit(self.work, job).result()
        except BrokenProcessPool:
            return self.crashed(job)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
