import io
import json
import os
from pathlib import Path

import pytest

# Tests never reach a model hub or an analytics endpoint.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["GX_ANALYTICS_ENABLED"] = "false"
# Under pytest-xdist (make test) each worker, and the commands it starts, gets its share of the cores: OpenMP pools
# (torch, FAISS) sized to every core in every worker spin against each other (a 43-second training test took 31
# minutes beside a busy worker). Set before anything imports torch.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE_DATA = REPO / "sample_data"


def shared_file(relative: str) -> Path:
    """A file of ../shared/data, or a skip naming what is missing (a user's fresh clone has no shared/)."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"benchmark data not present: {path}")
    return path


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a module: CI's cores are shared (torch's spinning pool slows a tiny model
    tenfold), and one thread keeps every forward pass's float sums in one order."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def assert_published(out: Path) -> dict:
    """`out` holds its manifest, the generation it names and perhaps its quality reports (of these tables, of a run
    its checks refused): nothing a run left behind (no other generation, no staged pointer, no lock). Returns the
    manifest."""
    manifest = json.loads((out / "manifest.json").read_text())
    reports = ("quality", "rejected")
    assert sorted(p.name for p in out.iterdir() if p.name not in reports) == sorted(["manifest.json", manifest["generation"]])
    return manifest


def assert_unpublished(out: Path) -> None:
    """A run that failed before publishing into a new folder left nothing in it."""
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []


def table_bytes(out: Path) -> dict[str, bytes]:
    """Every table file (Parquet, index shard, interchange copy) of a published output, by its path in the
    generation: what byte-identical re-runs compare."""
    from bioel_core.tables import data_root

    root = data_root(out)
    found = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.glob("*/*")) if p.is_file()}
    assert found, f"{out}: no tables"
    return found


def empty_table(output_dir, table: str) -> None:
    """Rewrite every shard of `table` in a finished output folder as an empty table of the same schema (what a
    run whose every row was dead-lettered leaves), for the quality checks."""
    import pyarrow.parquet as pq

    from bioel_core.tables import data_root

    for shard in sorted((data_root(output_dir) / table).glob("*.parquet")):
        pq.write_table(pq.read_schema(shard).empty_table(), shard)


def report_page(summary: dict) -> str:
    """The text of a quality summary's report.html, checked to be one self-contained page: no script, and no
    src, href or url() other than the page's own #fragments (the plots' inline SVG refers to its clip paths
    and markers that way) or data: URIs."""
    import re

    page = Path(summary["html"]).read_text(encoding="utf-8")
    assert Path(summary["html"]).name == "report.html" and page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower() and "@import" not in page and "<link" not in page.lower()
    targets = re.findall(r"""(?:\bsrc|\bhref)\s*=\s*["']([^"']*)["']|url\(\s*["']?([^"')]*)""", page)
    outside = [t for pair in targets for t in pair if t and not t.startswith(("#", "data:"))]
    assert outside == [], f"the page would fetch {outside[:5]}"
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*https?://|url\(\s*["']?\s*https?://""", page)
    return page


def report_figures(page: str) -> dict[str, str]:
    """The figures table of a report page: {figure: value as shown}."""
    import html
    import re

    table = page[page.index('<div id="figures">') : page.index("</div>", page.index('<div id="figures">'))]
    return {html.unescape(k): html.unescape(v) for k, v in re.findall(r"<tr><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td></tr>", table)}


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


class _FullDiskFile:
    """A file opened for writing on a full disk: it exists, and every write fails with ENOSPC."""

    def __init__(self, fh, path: str):
        self._fh, self._path = fh, path

    def write(self, data):
        import errno

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._path)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def full_disk(monkeypatch, matches) -> None:
    """From now on, writes to a file whose path `matches(path)` fail as on a full disk (ENOSPC): the file is created
    (a directory entry costs no data block), no byte is written. Files opened with `open` or `os.fdopen`, and `os.write`
    to them, are covered: what Python code writes files through. Needs /proc (Linux)."""
    import builtins
    import errno

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("simulating a full disk needs /proc/self/fd")
    real_open, real_fdopen, real_write = builtins.open, os.fdopen, os.write

    def writing(mode) -> bool:
        return any(c in mode for c in "wax+")

    def open_(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        path = _fd_path(fh.fileno()) if isinstance(file, int) else os.path.abspath(os.fsdecode(file))
        return _FullDiskFile(fh, path) if writing(mode) and matches(path) else fh

    def fdopen(fd, mode="r", *args, **kwargs):
        fh = real_fdopen(fd, mode, *args, **kwargs)
        path = _fd_path(fd)
        return _FullDiskFile(fh, path) if writing(mode) and matches(path) else fh

    def write(fd, data):
        path = _fd_path(fd)
        if matches(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real_write(fd, data)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)  # Beam's local filesystem opens through io.open
    monkeypatch.setattr(os, "fdopen", fdopen)
    monkeypatch.setattr(os, "write", write)


def read_only(monkeypatch, folder) -> None:
    """From now on, `folder` is on a read-only filesystem (EROFS) for this process: creating, writing, making a folder
    or renaming inside it fails. As root, chmod stops no write, so the OS's error is raised from the calls that write."""
    import builtins
    import errno

    folder = os.path.abspath(folder)
    inside = lambda path: (os.path.abspath(os.fsdecode(path)) + os.sep).startswith(folder + os.sep)  # noqa: E731

    def refused(path):
        return OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    def guarded(real, writes):
        def call(path, *args, **kwargs):
            if not isinstance(path, int) and inside(path) and writes(*args, **kwargs):
                raise refused(path)
            return real(path, *args, **kwargs)

        return call

    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    opens = guarded(builtins.open, lambda mode="r", *a, **k: any(c in mode for c in "wax+"))
    monkeypatch.setattr(builtins, "open", opens)
    monkeypatch.setattr(io, "open", opens)
    monkeypatch.setattr(os, "open", guarded(os.open, lambda flags, *a, **k: bool(flags & write_flags)))
    monkeypatch.setattr(os, "mkdir", guarded(os.mkdir, lambda *a, **k: True))
    for name in ("rename", "replace"):
        monkeypatch.setattr(os, name, guarded(getattr(os, name), lambda *a, **k: True))


def run_cli_child(args: list[str], fault: str | None = None) -> int:
    """`bioel ARGS` in a child process (this checkout's code first); with `fault`, the output layer's fault hook kills
    it (SIGKILL) at that publish step (bioel_core.outputs.FAULT_ENV). Its exit code (-9 when killed)."""
    import subprocess
    import sys

    from bioel_core.outputs import FAULT_ENV

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    if fault:
        env[FAULT_ENV] = fault
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=REPO, env=env, capture_output=True).returncode
