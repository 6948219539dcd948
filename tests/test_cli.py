"""The `bioel` command itself: --help without heavy imports, --version, -v anywhere, misspelt flags and refused values
named by their flag, errors for missing folders, progress bars only on a terminal, and the summary line every verb
ends with."""

import json
import logging
import os
import re
import shutil
import subprocess
import sys

import apache_beam as beam
import pytest

import bioel_core
from bioel_core import progress
from conftest import FIXTURES, REPO, SAMPLE_DATA
from pipelines import cli, logs
from pipelines.cli_verbs import VERB_ORDER
from pipelines.options import pipeline_options, pipeline_progress

HEAVY = ("torch", "transformers", "apache_beam", "great_expectations", "faiss", "pyarrow", "pandas", "sklearn")
GOLD_SAMPLE = SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator"
# what tqdm draws: carriage returns between refreshes, block characters in the bar
BAR_MARKS = ("\r", "█", "it/s")


def bioel(*argv, **kwargs) -> subprocess.CompletedProcess:
    """`bioel ARGV` in a fresh interpreter on this checkout (stdout and stderr pipes: not a terminal)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
        **kwargs,
    )


def test_help_of_every_verb_imports_no_heavy_library():
    # `bioel --help` took 3.5-11.6 s: building the parser imported torch, Beam, great-expectations, FAISS
    child = f"""
import json, sys
from pipelines import cli, logs
from pipelines.cli_verbs import VERB_ORDER
parser = cli.build_parser()
verbs = sorted(next(a for a in parser._actions if a.dest == "verb").choices)
codes = {{v: cli.main([v, "--help"]) for v in verbs}}
codes["(none)"] = cli.main(["--help"])
print(json.dumps({{"codes": codes, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["heavy"] == []
    assert {"link", "embed", "build-index", "ingest-kb", "refresh", "train", "evaluate"} <= set(result["codes"])
    assert set(result["codes"].values()) == {0}
    assert "usage: bioel link" in done.stdout and "--index [TYPE=]INDEX" in done.stdout


def test_version_is_the_one_the_package_declares(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"bioel {bioel_core.__version__}"
    assert (
        subprocess.run(
            [sys.executable, str(REPO / "setup.py"), "--version"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip()
        == bioel_core.__version__
    )


@pytest.mark.parametrize(
    "argv", [["-v", "report", "--input", "x"], ["report", "--input", "x", "-v"], ["report", "--verbose", "--input", "x"]]
)
def test_verbose_is_accepted_before_or_after_the_verb(argv):
    assert cli.build_parser().parse_args(argv).verbose is True
    assert cli.build_parser().parse_args(["report", "--input", "x"]).verbose is False


def test_verbose_raises_bioel_loggers_only(monkeypatch):
    for name in (*logs.OWN_LOGGERS, "apache_beam", "transformers"):
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    logs.configure(logging.INFO)
    assert logging.getLogger("bioel_core.refresh").isEnabledFor(logging.INFO)
    assert logging.getLogger("pipelines.options").isEnabledFor(logging.INFO)
    assert not logging.getLogger("apache_beam.runners.portability").isEnabledFor(logging.INFO)
    assert not logging.getLogger("transformers.modeling_utils").isEnabledFor(logging.INFO)
    logs.configure(logging.WARNING)
    assert not logging.getLogger("bioel_core.refresh").isEnabledFor(logging.INFO)


def test_a_beam_worker_process_shows_beams_warnings_but_not_its_info_nor_known_noise():
    # a worker's root logger is at INFO once Beam's harness starts: the handler's filter holds the line
    def record(name, level, message):
        return logging.LogRecord(name, level, __file__, 1, message, None, None)

    assert not logs.shown(record("apache_beam.runners.worker.sdk_worker", logging.INFO, "Control channel established."))
    assert not logs.shown(record("root", logging.WARNING, "apitools not found, and bigquery client libraries ..."))
    assert not logs.shown(
        record("apache_beam.runners.worker.sdk_worker_main", logging.WARNING, "No semi_persistent_directory found: ...")
    )
    assert logs.shown(record("apache_beam.io.filesystem", logging.WARNING, "something a user must see"))
    assert logs.shown(record("bioel_core.linking.dense", logging.INFO, "index opened"))


def test_a_misspelt_flag_is_named_with_the_nearest_known_one_required_or_not(capsys):
    # a misspelt required flag gave argparse's "the following arguments are required", naming the flag not misspelt
    for argv, said in (
        (["link", "--inptu", "x", "--input-format", "pubtator", "--output", "o"], "--inptu; did you mean --input?"),
        (["evaluate-e2e", "--gold", "g", "--perd", "p"], "--perd; did you mean --pred?"),
        (["evaluate-e2e", "--gold", "g", "--pred", "p", "--jsno", "j"], "--jsno; did you mean --json?"),
        (["build-index", "--input", "E", "--output", "O", "--nprobes", "2"], "--nprobes; did you mean --nprobe?"),
        (["report", "--input", "T", "--fail-onn", "none"], "--fail-onn; did you mean --fail-on?"),
    ):
        assert cli.main(argv) == 2
        assert capsys.readouterr().err == f"bioel {argv[0]}: error: unknown flag {said}\n"
    # the 0.2 spellings are gone; a Beam option still goes to Beam (refused here for its value)
    assert cli.main(["embed", "--names", "K", "--output", "O"]) == 2
    assert capsys.readouterr().err.startswith("bioel embed: error: unknown flag --names")
    assert cli.main(["build-index", "--input", "E", "--output", "O", "--direct_num_workers", "two"]) == 2
    assert "--direct_num_workers: invalid int value: 'two'" in capsys.readouterr().err


def test_a_value_the_contract_refuses_is_named_by_its_flag(capsys):
    assert cli.main(["build-index", "--input", "E", "--output", "O", "--num-shards", "0"]) == 2
    assert capsys.readouterr().err == "bioel build-index: error: --num-shards: must be at least 1, got 0\n"
    assert (
        cli.main(
            [
                "link",
                "--input",
                "x",
                "--input-format",
                "pubtator",
                "--output",
                "o",
                "--index",
                "Disease=i",
                "--nil-threshold",
                "Disease=high",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == "bioel link: error: --nil-threshold Disease=high: 'high' is not a number\n"
    assert cli.main(["evaluate", "--dataset", "d", "--names", "n", "--dictionary", "x"]) == 2
    assert capsys.readouterr().err == "bioel evaluate: error: --names: give one source of names, not both dictionary and names\n"
    assert cli.main(["evaluate", "--dataset", "d", "--linker", "tfidf", "--record-in-card"]) == 2
    assert capsys.readouterr().err.startswith("bioel evaluate: error: --record-in-card: needs a linker made of a model")


def test_help_lists_the_verbs_in_pipeline_order_one_line_each(capsys):
    assert cli.main(["--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("  VERB") + 1
    listed = [line.split()[0] for line in lines[start : start + len(VERB_ORDER)]]
    assert tuple(listed) == VERB_ORDER and all(len(line.split()) > 1 for line in lines[start : start + len(VERB_ORDER)])


def test_missing_and_unfinished_folders_are_named(tmp_path, capsys):
    missing, empty = tmp_path / "nope", tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["embed", "--input", str(missing), "--output", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"bioel embed: error: no such folder: {missing}"
    assert cli.main(["embed", "--input", str(empty), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"bioel embed: error: {empty} is not a finished bioel output (no manifest.json)")
    assert (
        cli.main(
            [
                "link",
                "--input",
                str(GOLD_SAMPLE),
                "--input-format",
                "pubtator",
                "--index",
                f"Disease={missing}",
                "--output",
                str(tmp_path / "l"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.strip() == f"bioel link: error: no such folder: {missing}"


def test_a_folder_given_where_a_file_is_written_is_one_line_and_exit_2(tmp_path, capsys):
    assert cli.main(["evaluate-e2e", "--gold", str(GOLD_SAMPLE), "--pred", str(GOLD_SAMPLE), "--json", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"bioel evaluate-e2e: error: [Errno 21] Is a directory: '{tmp_path}'\n"


def test_an_empty_path_after_a_type_is_refused_not_read_as_the_current_folder(tmp_path, capsys):
    assert (
        cli.main(
            [
                "link",
                "--input",
                str(GOLD_SAMPLE),
                "--input-format",
                "pubtator",
                "--index",
                "Disease=",
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == "bioel link: error: --index 'Disease=': expected TYPE=VALUE, VALUE not empty\n"


def test_ingest_kb_prints_its_summary_and_no_bar_off_a_terminal(tmp_path):
    """A real run in a fresh interpreter, stderr a pipe as in a scheduled job: the summary line, -v after the verb
    giving bioel's INFO lines and no library's, and no bar."""
    done = bioel(
        "ingest-kb",
        "--input-format",
        "medic-biosyn",
        "--input",
        FIXTURES / "biosyn/medic_raw.txt",
        "--output",
        tmp_path / "kb",
        "--num-shards",
        "1",
        "--no-quality",
        "--runner",
        "DirectRunner",
        "-v",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    summary = [line for line in lines if line.startswith("ingest-kb: ")]
    assert len(summary) == 1 and " names, " in summary[0] and " s (" in summary[0] and summary[0].endswith(" names/s)")
    assert "INFO pipelines.options: --runner=DirectRunner runs as FnApiRunner" in done.stderr
    records = [line.split(" ", 1) for line in lines if re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (INFO|WARNING) ", line)]
    assert records, done.stderr  # each log line led by its UTC time
    assert not [
        rest for _, rest in records if rest.startswith("INFO") and not rest.startswith(("INFO pipelines.", "INFO bioel_core."))
    ]
    assert not any(mark in done.stderr for mark in BAR_MARKS)


def test_a_bar_is_drawn_on_a_terminal_and_moved_by_in_process_dofns(monkeypatch, capsys):
    monkeypatch.setattr(progress, "terminal", lambda: True)
    options = pipeline_options([])
    with pipeline_progress(options, "test", "names", total=5), beam.Pipeline(options=options) as p:
        _ = p | beam.Create(range(5)) | beam.Map(lambda x: progress.advance())
    err = capsys.readouterr().err
    assert "5/5" in err and "names/s" in err
    # a runner whose workers are other processes: a start line, no bar
    options = pipeline_options(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    with pipeline_progress(options, "test", "names", total=5):
        progress.advance(5)
    err = capsys.readouterr().err
    assert err.strip() == "test: started on FnApiRunner; its workers run in other processes or machines, so no progress bar here"
    monkeypatch.setattr(progress, "terminal", lambda: False)
    with progress.shared_bar("names", total=5):
        progress.advance(5)
    assert capsys.readouterr().err == ""


def test_evaluate_e2e_prints_its_summary_line(capsys):
    assert cli.main(["evaluate-e2e", "--gold", str(GOLD_SAMPLE), "--pred", str(GOLD_SAMPLE)]) == 0
    out, err = capsys.readouterr()
    assert "strict" in out
    assert err.startswith("evaluate-e2e: 40 documents, ") and " predictions in " in err and err.endswith(" documents/s)\n")


def test_train_and_ensemble_refuse_an_output_among_their_inputs_or_holding_a_pipeline_output(tmp_path, capsys):
    # `--output` was written into whatever folder it named: a KB folder got model files beside its manifest (and the
    # next ingest-kb there replaced them), a dataset folder got them among its splits
    kb = tmp_path / "kb"
    assert (
        cli.main(
            [
                "ingest-kb",
                "--input-format",
                "medic-biosyn",
                "--input",
                str(FIXTURES / "biosyn/medic_raw.txt"),
                "--output",
                str(kb),
                "--num-shards",
                "1",
                "--no-quality",
            ]
        )
        == 0
    )
    capsys.readouterr()
    dataset = tmp_path / "dataset"
    (dataset / "processed_train").mkdir(parents=True)
    for output, reason in (
        (kb, f"is (or holds) the --names {kb} of this job"),
        (dataset, f"is (or holds) the --train-dataset {dataset} of this job"),
    ):
        assert cli.main(["train", "rescnn", "--names", str(kb), "--train-dataset", str(dataset), "--output", str(output)]) == 2
        assert capsys.readouterr().err == f"bioel train: error: --output {output} {reason}; write to a folder of its own\n"
    other_kb = tmp_path / "other-kb"
    shutil.copytree(kb, other_kb)
    assert cli.main(["train", "rescnn", "--names", str(kb), "--output", str(other_kb)]) == 2
    assert "holds a bioel pipeline output" in capsys.readouterr().err
    assert cli.main(["ensemble", "--member", str(REPO / "models/disease-default"), "1", "--output", str(kb)]) == 2
    assert "holds a bioel pipeline output" in capsys.readouterr().err
    assert not list(kb.glob("*.safetensors")) and not list(other_kb.glob("*.safetensors"))


def test_two_worker_processes_print_no_beam_start_up_lines(tmp_path):
    # Beam's own worker processes print ~20 INFO lines each and every warning twice; bioel's log as the CLI does
    done = bioel(
        "ingest-kb",
        "--input-format",
        "medic-biosyn",
        "--input",
        REPO / "sample_data" / "medic_sample.txt",
        "--output",
        tmp_path / "kb",
        "--num-shards",
        "2",
        "--no-quality",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].startswith("ingest-kb: started on FnApiRunner")
    noise = [line for line in done.stderr.splitlines() if "INFO" in line or "Worker:" in line or "apache_beam" in line]
    assert noise == []
