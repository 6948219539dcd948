"""The portable runner path, the one Flink and Spark runners take: `bioel ingest-kb` and `bioel link` submitted
with `--runner PortableRunner` to Beam's job service (local_job_service_main), whose SDK workers are separate
processes a worker pool starts (worker_pool_main, `--environment_type EXTERNAL`) in a working folder of their own.
Each run must publish the bytes the in-process run of the same command publishes, relative paths included.

The two services start once for the module, on free loopback ports, and are always stopped with the workers they
started; a run or start that fails shows their logs."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from bioel_core.models import TransformerEncoder
from conftest import REPO, SAMPLE_DATA, assert_published, table_bytes
from pipelines.cli import main
from test_models import make_tiny_bert

pytestmark = pytest.mark.usefixtures("one_torch_thread")

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10
# what differs between two runs of one command on two runners: when, which generation, and the runner's own flags
RUN_SPECIFIC = ("created_utc", "generation", "runner", "options")
# the quality checks run in the launcher whatever the runner: skipped, for time
UNCHECKED = "--no-quality"
STOP_LIST = f"Disease={REPO / 'models' / 'stoplists' / 'disease-medic.json'}"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on the loopback interface now (held together while chosen, so they differ)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class PortableServices:
    """Beam's job service and an external worker pool, each a process group of its own (the pool's SDK workers are
    its children), logging to a file."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.processes: dict[str, tuple[subprocess.Popen, Path]] = {}
        self.ready = False

    def start(self) -> None:
        """Starts both services, without waiting for them (beam_args does)."""
        self.job_port, self.pool_port = free_ports(2)
        # the workers run this checkout's code with this venv's python (the pool starts them as `python -c ...`)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
        workdir = self.folder / "workers"  # not the launcher's: a relative path the launcher did not resolve fails there
        workdir.mkdir()
        for name, module, flag, port in (
            ("job service", "apache_beam.runners.portability.local_job_service_main", "--port", self.job_port),
            ("worker pool", "apache_beam.runners.worker.worker_pool_main", "--service_port", self.pool_port),
        ):
            log = self.folder / f"{name.replace(' ', '_')}.log"
            with open(log, "wb") as fh:
                process = subprocess.Popen(
                    [sys.executable, "-m", module, flag, str(port)],
                    cwd=workdir,
                    env=env,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.processes[name] = (process, log)

    def beam_args(self) -> list[str]:
        """The flags that submit a job to these services, once they listen."""
        self.wait_ready()
        return [
            "--runner",
            "PortableRunner",
            "--job_endpoint",
            f"localhost:{self.job_port}",
            "--environment_type",
            "EXTERNAL",
            "--environment_config",
            f"localhost:{self.pool_port}",
        ]

    def wait_ready(self) -> None:
        if self.ready:
            return
        deadline = time.monotonic() + START_TIMEOUT_S
        for name, port in (("job service", self.job_port), ("worker pool", self.pool_port)):
            process, _ = self.processes[name]
            with grpc.insecure_channel(f"localhost:{port}") as channel:
                ready = grpc.channel_ready_future(channel)
                while True:
                    if process.poll() is not None:
                        pytest.fail(f"the {name} exited with {process.returncode} on start\n{self.logs()}")
                    if time.monotonic() > deadline:
                        pytest.fail(f"the {name} did not listen on port {port} within {START_TIMEOUT_S} s\n{self.logs()}")
                    try:
                        ready.result(timeout=0.5)
                        break
                    except grpc.FutureTimeoutError:
                        continue
        self.ready = True

    def workers_started(self) -> int:
        """SDK worker processes the pool has started so far (it logs each start)."""
        return self.processes["worker pool"][1].read_text(errors="replace").count("Starting worker with command")

    def logs(self, tail: int = 4000) -> str:
        return "\n".join(
            f"--- {name} log (last {tail} chars):\n{log.read_text(errors='replace')[-tail:]}"
            for name, (_, log) in self.processes.items()
        )

    def stop(self) -> None:
        for process, _ in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        for process, _ in self.processes.values():
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
            _signal_group(process, signal.SIGKILL)  # workers the pool left behind


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the group this test started (start_new_session): the service and its workers
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    services = PortableServices(tmp_path_factory.mktemp("portable"))
    try:
        services.start()  # they start up while the chain is built
        yield services
    finally:
        services.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A folder of inputs, each with one bad record among the committed samples' good ones (a dead letter each)."""
    folder = tmp_path_factory.mktemp("data")
    shutil.copy(SAMPLE_DATA / "medic_sample.txt", folder / "medic.txt")
    with open(folder / "medic.txt", "a") as fh:
        fh.write("a line without the id separator\n")
    shutil.copy(SAMPLE_DATA / "abstracts_sample.jsonl", folder / "abstracts.jsonl")
    with open(folder / "abstracts.jsonl", "a") as fh:
        fh.write('{"pmid": "99999999", "title": "a record cut short\n')
    return folder


@pytest.fixture(scope="module")
def chain(tmp_path_factory, data):
    """(model, KB, index) built in process by the CLI: a tiny model, the sample MEDIC KB and its flat index."""
    root = tmp_path_factory.mktemp("chain")
    model = str(TransformerEncoder(make_tiny_bert(root / "tiny-bert"), pooling="mean").save(root / "model"))
    bioel(
        "ingest-kb",
        "--input-format",
        "medic-biosyn",
        "--input",
        data / "medic.txt",
        "--output",
        root / "kb",
        "--num-shards",
        "2",
        UNCHECKED,
    )
    bioel("embed", "--model", model, "--input", root / "kb", "--output", root / "emb", "--num-shards", "2", UNCHECKED)
    bioel(
        "build-index", "--input", root / "emb", "--output", root / "index", "--num-shards", "2", "--index-kind", "flat", UNCHECKED
    )
    return model, root / "kb", root / "index"


def bioel(*argv, services: PortableServices | None = None) -> None:
    """`bioel ARGV` through the CLI, on the portable services when given; a failure shows their logs."""
    argv = [str(a) for a in argv] + (services.beam_args() if services else [])

    def failed(how: str) -> str:
        return f"bioel {' '.join(argv)} {how}" + (f"\n{services.logs()}" if services else "")

    try:
        code = main(argv)
    except Exception as err:
        raise AssertionError(failed(f"raised {err!r}")) from err
    assert code == 0, failed(f"exited {code}")


def published(out: Path) -> tuple[dict[str, bytes], dict]:
    """A published output's table files, and its manifest less what is specific to one run."""
    manifest = assert_published(out)
    return table_bytes(out), {k: v for k, v in manifest.items() if k not in RUN_SPECIFIC}


def assert_ran_on_portable_runner(out: Path, services: PortableServices, workers_before: int) -> None:
    manifest = assert_published(out)
    assert manifest["runner"] == "PortableRunner" and manifest["options"]["environment_type"] == "EXTERNAL"
    assert services.workers_started() > workers_before, f"no SDK worker process ran the job\n{services.logs()}"


def test_ingest_kb_on_the_portable_runner_publishes_the_in_process_bytes(portable, data, chain, tmp_path, monkeypatch):
    _, kb, _ = chain
    workers = portable.workers_started()
    monkeypatch.chdir(data)  # relative --input and --output: the workers run in another working folder
    bioel(
        "ingest-kb",
        "--input-format",
        "medic-biosyn",
        "--input",
        "medic.txt",
        "--output",
        os.path.relpath(tmp_path / "kb", data),
        "--num-shards",
        "2",
        UNCHECKED,
        services=portable,
    )
    assert_ran_on_portable_runner(tmp_path / "kb", portable, workers)
    tables, manifest = published(tmp_path / "kb")
    assert (manifest["counts"]["records_read"], manifest["counts"]["dead_lettered"]) == (391, 1)
    assert (tables, manifest) == published(kb)


def test_link_on_the_portable_runner_publishes_the_in_process_bytes(portable, data, chain, tmp_path, monkeypatch):
    model, _, index = chain
    command = [
        "link",
        "--model",
        model,
        "--input-format",
        "jsonl",
        "--index",
        f"Disease={index}",
        "--stop-list",
        STOP_LIST,
        "--output-format",
        "pubtator",
        "--num-shards",
        "2",
        UNCHECKED,
    ]
    bioel(*command, "--input", data / "abstracts.jsonl", "--output", tmp_path / "in-process")
    workers = portable.workers_started()
    monkeypatch.chdir(data)  # relative --input and --output: the workers run in another working folder
    bioel(*command, "--input", "abstracts.jsonl", "--output", os.path.relpath(tmp_path / "portable", data), services=portable)
    assert_ran_on_portable_runner(tmp_path / "portable", portable, workers)
    tables, manifest = published(tmp_path / "portable")
    assert manifest["counts"]["documents"]["linked"] == 40 and manifest["counts"]["records"]["dead_lettered"] == 1
    assert sorted({name.split("/")[0] for name in tables}) == ["annotations", "dead_letter", "documents", "pubtator"]
    assert (tables, manifest) == published(tmp_path / "in-process")
