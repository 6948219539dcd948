"""What the benchmarks that time each mode in a process of its own share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading


# Defined in every child (run_child): the child's peak RSS, or its own children's (Beam workers), the larger. Its own is
# VmHWM, not ru_maxrss: Linux carries into a started process's ru_maxrss the peak of the process that started it
# (here the benchmark, which may have just built a large input), so a child's ru_maxrss is never below its parent's.
PEAK_RSS = """
def peak_rss_kb():
    import resource
    try:
        own = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    except (OSError, StopIteration):  # no /proc: ru_maxrss, an upper bound
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run_child(code: str) -> dict:
    """Runs `code` in a fresh Python, `peak_rss_kb()` defined (PEAK_RSS); returns the JSON object on the last line
    it printed."""
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS + code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def steady_rate(rows: int, seconds: float, start_rows: int, start_seconds: float) -> float:
    """Rows a second past start-up: a full run's extra rows over its extra seconds beyond a small run's (whose
    time stands for the start-up); NaN when the input is too small to outlast it."""
    extra = seconds - start_seconds
    return (rows - start_rows) / extra if rows > start_rows and extra > 0 else float("nan")


def tree_cpu_seconds(root: int) -> dict[int, tuple[int, float]]:
    """CPU seconds (user + system) so far of `root` and every process below it: pid -> (depth below root,
    seconds). Linux /proc; empty where there is none."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()  # after "pid (comm)", which may hold spaces
            except OSError:  # exited meanwhile
                continue
            stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)  # ppid, utime + stime
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    below, todo = {}, [(root, 0)] if root in stats else []
    while todo:
        pid, depth = todo.pop()
        below[pid] = (depth, stats[pid][1])
        todo += [(child, depth + 1) for child in children.get(pid, [])]
    return below


def resident_mb(pid: int) -> tuple[float, float]:
    """(own, mapped) resident MB of a process: RssAnon (its heap, what it alone holds) and RssFile (pages of
    mapped files, an index's, which the kernel may drop and share); (0, 0) once it has exited."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile"):
                    fields[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return fields.get("RssAnon", 0.0), fields.get("RssFile", 0.0)


def run_watched(
    command: list[str], every: float = 0.5, memory: dict[int, tuple[float, float]] | None = None, **kwargs
) -> tuple[subprocess.CompletedProcess, list]:
    """`command` run to the end while its process tree's CPU is sampled every `every` seconds; returns the
    completed process and [(depth below it, CPU seconds)] for each process seen, by pid (a process's last
    sample: up to `every` seconds of its CPU may be missing). `memory`, when given, gets per pid the peak
    (own, mapped) resident MB sampled (`resident_mb`: a peak shorter than `every` may be missed)."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    seen: dict[int, tuple[int, float]] = {}
    out: list[tuple[str, str]] = []
    reader = threading.Thread(target=lambda: out.append(proc.communicate()))  # drains the pipes meanwhile
    reader.start()
    while reader.is_alive():
        tree = tree_cpu_seconds(proc.pid)
        seen.update(tree)
        if memory is not None:
            for pid in tree:
                own, mapped = resident_mb(pid)
                before = memory.get(pid, (0.0, 0.0))
                memory[pid] = (max(before[0], own), max(before[1], mapped))
        reader.join(every)
    stdout, stderr = out[0]
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr), [seen[pid] for pid in sorted(seen)]
