"""Times every collection of CPython's cycle collector in each process that imports it (put
this folder on PYTHONPATH; the load test passes PYTHONPATH to its services and device
processes) when GC_PROBE_DIR names a folder: each process rewrites GC_PROBE_DIR/<pid>.json
once a second and as it exits (one stopped by a signal keeps what it wrote last) with its
argv, its collections as [wall time, generation, thread CPU ns, objects collected, the
youngest generation's threshold then] and its peak RSS. bench/bench_gc_by_process.py reads
them. A measuring aid, not imported by fedhh."""

import os

if os.environ.get("GC_PROBE_DIR"):
    import atexit
    import gc
    import json
    import resource
    import sys
    import threading
    import time

    _folder = os.environ["GC_PROBE_DIR"]
    _started: list[int] = [0]
    _collections: list[tuple[float, int, int, int, int]] = []

    def _timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _started[0] = time.thread_time_ns()
        else:
            _collections.append((time.time(), info["generation"],
                                 time.thread_time_ns() - _started[0], info["collected"],
                                 gc.get_threshold()[0]))

    def _write() -> None:
        path = os.path.join(_folder, f"{os.getpid()}.json")
        figures = {"argv": sys.argv, "collections": list(_collections),
                   "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
        with open(f"{path}.{threading.get_ident()}", "w") as out:
            json.dump(figures, out)
        os.replace(out.name, path)

    def _every_second() -> None:
        while True:
            time.sleep(1.0)
            _write()

    gc.callbacks.append(_timed)
    threading.Thread(target=_every_second, daemon=True, name="gc-probe").start()
    atexit.register(_write)
