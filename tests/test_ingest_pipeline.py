import json
import shutil
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from bioel_core.kb.biosyn import MEDIC_ID
from bioel_core.normalize import Normalizer, name_id
from bioel_core.tables import IncompleteOutputError, data_root, read_manifest, read_table
from conftest import FIXTURES, assert_published, shared_file
from pipelines import cli, ingest_kb
from pipelines.options import pipeline_options
from schemas import NAMES_SCHEMA

MEDIC_RAW = str(FIXTURES / "biosyn/medic_raw.txt")
DICTIONARY = str(FIXTURES / "biosyn/dictionary.txt")


def local(*extra):
    return pipeline_options(list(extra))


def rows(out, table):
    return sorted(read_table(out, table).to_pylist(), key=lambda r: json.dumps(r, sort_keys=True))


def test_read_normalize_spill_and_merge_steps_on_test_pipeline(tmp_path):
    spill = tmp_path / "spill"
    with BeamTestPipeline(runner="FnApiRunner") as p:
        read = (
            p
            | beam.Create([[DICTIONARY], [DICTIONARY]])  # every name twice: one of each pair merged away
            | beam.ParDo(ingest_kb.ReadKBFn("biosyn-dict", {"id_pattern": MEDIC_ID.pattern})).with_outputs(
                "concepts", "dead", "stats", main="names"
            )
        )
        normalized = read.names | beam.ParDo(ingest_kb.NormalizeNamesFn(Normalizer().config)).with_outputs(
            "dead", "stats", main="tables"
        )
        deduped = (
            normalized.tables
            | beam.ParDo(ingest_kb.SpillRunsFn(str(spill), 2, "name_id"))
            | ingest_kb.MergeByShard(ingest_kb.MergeShardFn(None, NAMES_SCHEMA, 2, ingest_kb.keep_best_name, None, "duplicates"))
        )
        assert_that(
            deduped.rows | beam.Map(lambda r: (r["concept_id"], r["name_norm"], r["name_type"])),
            equal_to(
                [
                    ("D001260", "ataxia telangiectasia", "preferred"),
                    ("D001260", "louis bar syndrome", "synonym"),
                    ("D015458", "t cell leukemia", "preferred"),
                    ("D015458", "leukemia t cell", "synonym"),
                ]
            ),
            label="names",
        )
        assert_that(deduped.stats | beam.CombinePerKey(sum), equal_to([("duplicates", 4)]), label="duplicates")
        assert_that(read.dead | beam.Map(lambda d: d["location"]), equal_to(["line 5", "line 6"] * 2), label="dead")
    assert not [f for f in spill.rglob("*") if f.is_file()]  # every run merged and removed


def test_ingest_writes_reconciled_tables(tmp_path):
    out = tmp_path / "kb"
    manifest = ingest_kb.run("medic-biosyn", [MEDIC_RAW, DICTIONARY], str(out), local(), num_shards=2)
    assert all(manifest["reconciliation"].values())
    assert manifest["counts"]["records_read"] == 10 and manifest["counts"]["dead_lettered"] == 2
    assert manifest["inputs"][0]["sha256"] and manifest["normalizer"]["version"].startswith("norm-")
    concepts = {r["concept_id"]: r for r in rows(out, "concepts")}
    assert set(concepts) == {"C565588", "C567755", "D001260", "C", "D015458"}
    assert concepts["D001260"]["alt_ids"] == ["OMIM:208900"] and concepts["D001260"]["vocabulary"] == "MESH"
    # read as MEDIC lines, the dictionary states D001260 twice more and D015458 twice: three merges
    assert manifest["counts"]["concepts"]["merged_duplicates"] == 3
    names = rows(out, "names")
    at = [r for r in names if r["name_norm"] == "ataxia telangiectasia"]
    assert len(at) == 1 and at[0]["name_type"] == "preferred" and at[0]["name"] == "Ataxia Telangiectasia"
    assert at[0]["name_id"] == name_id("medic", "D001260", "ataxia telangiectasia")
    dead = read_table(out, "dead_letter").to_pylist()
    assert sorted(d["location"] for d in dead) == ["line 5", "line 6"]
    assert_published(out)


def test_rerun_gives_identical_files(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(a), local(), num_shards=3)
    ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(b), local(), num_shards=3)
    ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(b), local(), num_shards=3)  # over an existing output
    for table in ("concepts", "names"):
        fa, fb = sorted((data_root(a) / table).iterdir()), sorted((data_root(b) / table).iterdir())
        assert [f.name for f in fa] == [f.name for f in fb]
        assert all(x.read_bytes() == y.read_bytes() for x, y in zip(fa, fb))


def test_many_runs_merged_in_passes_write_the_same_files(tmp_path, monkeypatch):
    inputs = [MEDIC_RAW, DICTIONARY]
    ingest_kb.run("medic-biosyn", inputs, str(tmp_path / "one"), local(), num_shards=2)
    monkeypatch.setattr(ingest_kb, "READ_BATCH", 2)  # a run of at most 2 rows...
    monkeypatch.setattr(ingest_kb, "MAX_FAN_IN", 2)  # ...merged 2 at a time, over several passes
    passes = ingest_kb.run("medic-biosyn", inputs, str(tmp_path / "passes"), local(), num_shards=2)
    assert all(passes["reconciliation"].values()) and passes["counts"]["concepts"]["merged_duplicates"] == 3
    for table in ("concepts", "names", "dead_letter"):
        one, many = (sorted((data_root(tmp_path / out) / table).iterdir()) for out in ("one", "passes"))
        assert [f.read_bytes() for f in one] == [f.read_bytes() for f in many]
    assert not (data_root(tmp_path / "passes") / "_spill").exists()


def test_two_worker_multiprocess_run_writes_the_same_rows(tmp_path):
    single, multi = tmp_path / "single", tmp_path / "multi"
    inputs = [MEDIC_RAW, DICTIONARY, str(FIXTURES / "biosyn/medic_raw.txt")]
    ingest_kb.run("medic-biosyn", inputs, str(single), local())
    ingest_kb.run("medic-biosyn", inputs, str(multi), local("--direct_num_workers=2", "--direct_running_mode=multi_processing"))
    for table in ("concepts", "names", "dead_letter"):
        assert rows(single, table) == rows(multi, table)
    assert read_manifest(multi)["options"]["direct_num_workers"] == 2


def test_genbioel_policy_keeps_a_shared_name_in_the_smaller_concept(tmp_path):
    kb = tmp_path / "shared.txt"
    kb.write_text("D000001||big disease|shared name|other|another\nD000002||small disease|Shared-Name\n")
    keep_all = ingest_kb.run("medic-biosyn", [str(kb)], str(tmp_path / "all"), local())
    genbioel = ingest_kb.run("medic-biosyn", [str(kb)], str(tmp_path / "gen"), local(), shared_names="genbioel")
    assert keep_all["counts"]["names"]["dropped_shared"] == 0
    assert genbioel["counts"]["names"]["dropped_shared"] == 1 and all(genbioel["reconciliation"].values())
    owners = [r["concept_id"] for r in read_table(tmp_path / "gen", "names").to_pylist() if r["name_norm"] == "shared name"]
    assert owners == ["D000002"]


def test_failed_run_leaves_no_complete_looking_output(tmp_path, monkeypatch):
    out = tmp_path / "kb"

    def explode(*_a, **_k):
        raise RuntimeError("worker died")

    monkeypatch.setattr(ingest_kb, "read_stats", explode)
    with pytest.raises(RuntimeError):
        ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(out), local())
    assert sorted(p.name for p in out.iterdir()) == []  # no manifest, no generation, no lock
    with pytest.raises(IncompleteOutputError):
        read_table(out, "names")


def test_cli_errors_are_one_line_and_nonzero(tmp_path, capsys):
    code = cli.main(
        ["ingest-kb", "--input-format", "medic-biosyn", "--input", str(tmp_path / "nope.txt"), "--output", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "nope.txt: no such file or folder" in err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = cli.main(["ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output", str(blocker / "sub")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "not writable" in err


def test_dask_runner_is_refused():
    with pytest.raises(ValueError, match="DaskRunner"):
        pipeline_options(["--runner=DaskRunner"])
    assert str(pipeline_options(["--runner=DirectRunner"]).get_all_options()["runner"]) == "FnApiRunner"


def test_medic_2012_gives_11915_concepts(tmp_path):
    medic = shared_file("medic/medic_06Jul2012.txt")
    manifest = ingest_kb.run("medic-biosyn", [str(medic)], str(tmp_path / "medic"), local())
    assert manifest["outputs"]["concepts"]["rows"] == 11915
    assert manifest["counts"]["records_read"] == 11915 and manifest["counts"]["dead_lettered"] == 0
    assert all(manifest["reconciliation"].values())


def test_mesh_thesaurus_gives_30764_concepts(tmp_path):
    mesh = shared_file("mesh/data_mesh_thesaurus.tsv.gz")
    manifest = ingest_kb.run("mesh-tsv", [str(mesh)], str(tmp_path / "mesh"), local())
    assert manifest["outputs"]["concepts"]["rows"] == 30764
    assert manifest["counts"]["records_read"] == 263936
    assert all(manifest["reconciliation"].values())
    shutil.rmtree(tmp_path / "mesh")


def test_rerun_after_a_killed_run_clears_its_staging(tmp_path):
    out = tmp_path / "kb"
    for left in ("_staging-deadbeef0000", "gen-20261124T000000Z-deadbeef0000"):  # older and current layouts
        killed = out / left / "names"
        killed.mkdir(parents=True)
        (killed / "part-00000-of-00004.parquet").write_bytes(b"half written")
    ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(out), local())
    manifest = read_manifest(out)
    assert sorted(p.name for p in out.iterdir()) == sorted([manifest["generation"], "manifest.json"])
    (out / "quality").mkdir()
    ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(out), local())
    assert not (out / "quality").exists()  # a report of the previous tables is stale


def test_cli_ingest_with_quality_report_on_relative_paths(tmp_path, monkeypatch, capsys):
    shutil.copy(MEDIC_RAW, tmp_path / "medic.txt")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["ingest-kb", "--input-format", "medic-biosyn", "--input", "medic.txt", "--output", "kb"]) == 0
    assert "quality PASSED" in capsys.readouterr().out
    summary = json.loads((tmp_path / "kb/quality/summary.json").read_text())
    assert summary["passed"] and summary["critical_failures"] == 0
    assert (tmp_path / "kb/quality/report.html").is_file()
    assert cli.main(["report", "--input", "kb", "--fail-on", "warning"]) == 0
    assert capsys.readouterr().err.startswith("report: done in ")


def test_cli_ingests_a_dictionary_of_any_scheme_with_its_vocabulary(tmp_path, capsys):
    # --kb biosyn-dict took MEDIC-shaped ids only; a SNOMED CT dictionary was dead-lettered line by line
    out = tmp_path / "kb"
    assert (
        cli.main(
            [
                "ingest-kb",
                "--input-format",
                "biosyn-dict",
                "--kb-name",
                "snomed-dict",
                "--vocabulary",
                "SNOMEDCT",
                "--id-pattern",
                r"(?:SNOMEDCT:)?\d{6,18}",
                "--input",
                str(FIXTURES / "biosyn/snomed_dictionary.txt"),
                "--output",
                str(out),
                "--num-shards",
                "1",
            ]
        )
        == 0
    )
    concepts = {r["concept_id"]: r for r in rows(out, "concepts")}
    assert {c: (r["vocabulary"], r["alt_ids"]) for c, r in concepts.items()} == {
        "22298006": ("SNOMEDCT", []),
        "195967001": ("SNOMEDCT", ["SNOMEDCT:304527002"]),
        "38341003": ("SNOMEDCT", []),
    }
    assert read_table(out, "dead_letter").num_rows == 0
    code = cli.main(
        [
            "ingest-kb",
            "--input-format",
            "biosyn-dict",
            "--id-pattern",
            "(",
            "--input",
            DICTIONARY,
            "--output",
            str(tmp_path / "x"),
        ]
    )
    assert code == 2 and "error: --id-pattern: '(' is not a regular expression" in capsys.readouterr().err


def test_control_characters_are_cleaned_and_an_empty_name_dead_lettered(tmp_path):
    path = tmp_path / "medic.txt"
    path.write_bytes(b"D000152||Acne\x00Vulgaris|\x00\x01|Acne \x7fvulgaris\n")
    out = tmp_path / "kb"
    manifest = ingest_kb.run("medic-biosyn", [str(path)], str(out), local(), num_shards=1)
    assert all(manifest["reconciliation"].values())
    assert read_table(out, "concepts").to_pylist()[0]["preferred_name"] == "Acne Vulgaris"
    names = rows(out, "names")
    assert [(r["name"], r["name_norm"]) for r in names] == [("Acne Vulgaris", "acne vulgaris")]  # one name_id: kept once
    dead = read_table(out, "dead_letter").to_pylist()
    assert [(d["location"], d["reason"], d["raw"]) for d in dead] == [
        ("concept D000152", "name is of control characters only", "\x00\x01")
    ]


def test_an_ingest_with_names_of_control_characters_only_is_published(tmp_path, capsys):
    # a MEDIC line whose first name is control characters only gave its concept an empty preferred_name, which the
    # quality checks call critical: one such line in a dump refused the whole ingest (exit 4, nothing published)
    path = tmp_path / "medic.txt"
    path.write_bytes(b"D000001||\x01\x02|Usable Synonym\nD000002||\x03|\x04\x05\n" + Path(MEDIC_RAW).read_bytes())
    out = tmp_path / "kb"
    code, err = _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", path, "--output", out, "--num-shards", "1")
    assert code == 0, err
    manifest = read_manifest(out)
    assert all(manifest["reconciliation"].values())
    assert (manifest["counts"]["records_read"], manifest["counts"]["dead_lettered"]) == (6, 1)
    concepts = {r["concept_id"]: r["preferred_name"] for r in rows(out, "concepts")}
    assert concepts["D000001"] == "Usable Synonym" and "D000002" not in concepts and len(concepts) == 5
    assert [(r["name"], r["name_type"]) for r in rows(out, "names") if r["concept_id"] == "D000001"] == [
        ("Usable Synonym", "synonym")
    ]
    # the line with no usable name, dead-lettered by the reader; the junk first name of D000001, by the normalizer
    dead = sorted((d["source"], d["location"], d["reason"]) for d in read_table(out, "dead_letter").to_pylist())
    assert dead == [
        (str(path), "line 2", "no name with a printable character: every name is control characters only"),
        ("normalizer", "concept D000001", "name is of control characters only"),
    ]
    assert json.loads((out / "quality" / "summary.json").read_text())["critical_failures"] == 0
    assert_published(out)


def _cli(capsys, *argv) -> tuple[int, str]:
    """Exit code and stderr of `bioel ...`."""
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr().err.strip()


def test_an_ingest_whose_counts_do_not_reconcile_exits_3_and_the_previous_kb_stands(tmp_path, capsys, monkeypatch):
    out = tmp_path / "kb"
    assert (
        _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output", out, "--no-quality")[0] == 0
    )
    before = (out / "manifest.json").read_bytes()
    build = ingest_kb.build_manifest

    def losing_a_name(*args, **kwargs):
        manifest = build(*args, **kwargs)
        manifest.reconciliation["names"] = False
        return manifest

    monkeypatch.setattr(ingest_kb, "build_manifest", losing_a_name)
    code, err = _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output", out, "--no-quality")
    assert code == 3 and err.startswith("bioel ingest-kb: error: counts do not reconcile: ") and "nothing published" in err
    assert (out / "manifest.json").read_bytes() == before
    assert_published(out)


def test_misspelled_flags_are_refused_before_any_work_and_beam_flags_pass(tmp_path, capsys):
    out = tmp_path / "kb"
    code, err = _cli(
        capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output", out, "--nmu-shards", "2"
    )
    assert code == 2 and len(err.splitlines()) == 1 and "--nmu-shards" in err and "did you mean --num-shards?" in err
    code, err = _cli(
        capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output", out, "--direct_num_worker=2"
    )
    assert code == 2 and "did you mean --direct_num_workers?" in err
    assert not out.exists()
    # Beam's own options (any registered PipelineOptions class's) still reach Beam
    code, _ = _cli(
        capsys,
        "ingest-kb",
        "--input-format",
        "medic-biosyn",
        "--input",
        MEDIC_RAW,
        "--output",
        out,
        "--num-shards",
        "3",
        "--no-quality",
        "--runner",
        "DirectRunner",
        "--direct_num_workers=1",
        "--direct_running_mode=in_memory",
        "--temp_location",
        tmp_path,
        "--experiments",
        "x",
        "--project",
        "p",
    )
    assert code == 0 and len(read_manifest(out)["outputs"]["names"]["files"]) == 3


@pytest.mark.parametrize(
    "flag, said",
    [
        (["--direct_num_workers=two"], "argument --direct_num_workers: invalid int value: 'two'"),
        (["--runner", "PortableRunner", "--environment_type"], "argument --environment_type: expected one argument"),
        (["--runner", "FlinkRunner", "--flink_version", "0.1"], "argument --flink_version: invalid choice: '0.1'"),
    ],
)
def test_a_bad_value_of_a_beam_flag_is_one_line_before_any_work(tmp_path, capsys, flag, said):
    # Beam's parser printed its usage, some 120 lines of every runner's flags, above the error
    out = tmp_path / "kb"
    code, err = _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output", out, *flag)
    assert code == 2 and err.startswith(f"bioel ingest-kb: error: {said}") and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_zero_shards_and_a_folder_without_inputs_are_one_line_errors(tmp_path, capsys):
    code, err = _cli(
        capsys,
        "ingest-kb",
        "--input-format",
        "medic-biosyn",
        "--input",
        MEDIC_RAW,
        "--output",
        tmp_path / "o",
        "--num-shards",
        "0",
    )
    assert code == 2 and err == "bioel ingest-kb: error: --num-shards: must be at least 1, got 0"
    with pytest.raises(ValueError, match="^num_shards must be a whole number of at least 1"):
        ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(tmp_path / "o"), local(), num_shards=0)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".DS_Store").write_text("x")
    code, err = _cli(
        capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", tmp_path / "empty", "--output", tmp_path / "o"
    )
    assert code == 2 and len(err.splitlines()) == 1 and "empty: the folder holds no input file" in err
    assert not (tmp_path / "o").exists()


def test_an_input_inside_the_output_or_another_verbs_output_is_refused(tmp_path, capsys):
    out = tmp_path / "kb"
    out.mkdir()
    shutil.copy(MEDIC_RAW, out / "medic.txt")
    code, err = _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", out / "medic.txt", "--output", out)
    assert code == 2 and len(err.splitlines()) == 1 and "is (or holds) the --input" in err
    (out / "manifest.json").write_text(json.dumps({"pipeline": "embed", "complete": True}))
    code, err = _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output", out)
    assert code == 2 and "holds a `bioel embed` output" in err
    assert json.loads((out / "manifest.json").read_text())["pipeline"] == "embed"  # untouched


def _bad_crc_gzip(src: str, dest) -> str:
    import gzip

    data = bytearray(gzip.compress(open(src, "rb").read()))
    data[-8] ^= 0xFF  # the CRC32 trailer: every byte decompresses, the checksum fails at the very end
    dest.write_bytes(bytes(data))
    return str(dest)


def test_a_gzip_failing_its_checksum_contributes_only_a_dead_letter(tmp_path):
    from bioel_core.kb.io import CORRUPT_INPUT_POLICY

    corrupt = _bad_crc_gzip(MEDIC_RAW, tmp_path / "medic.txt.gz")
    manifest = ingest_kb.run("medic-biosyn", [corrupt, DICTIONARY], str(tmp_path / "kb"), local(), num_shards=1)
    assert all(manifest["reconciliation"].values())
    per_file = {f["path"]: f for f in manifest["inputs"]}
    assert per_file[corrupt]["records_accepted"] == 0 and per_file[corrupt]["dead_lettered"] == 1
    dead = [d for d in read_table(tmp_path / "kb", "dead_letter").to_pylist() if d["source"] == corrupt]
    assert [(d["location"], d["reason"][:43]) for d in dead] == [("file", "truncated or corrupt gzip stream: CRC check")]
    assert {r["concept_id"] for r in rows(tmp_path / "kb", "names")} == {"D001260", "D015458"}  # the dictionary's only
    assert CORRUPT_INPUT_POLICY == "dead-letter-file"


@pytest.mark.parametrize(
    "content", [b"", bytes(range(256)) * 4, b"no pipes here\nnor here\n"], ids=["empty", "random-bytes", "every-line-dead"]
)
def test_inputs_that_yield_no_rows_exit_3_and_keep_the_previous_output(tmp_path, capsys, content):
    out = tmp_path / "kb"
    assert (
        _cli(capsys, "ingest-kb", "--input-format", "biosyn-dict", "--input", DICTIONARY, "--output", out, "--no-quality")[0] == 0
    )
    before = (out / "manifest.json").read_bytes()
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    code, err = _cli(capsys, "ingest-kb", "--input-format", "biosyn-dict", "--input", bad, "--output", out, "--no-quality")
    assert code == 3 and len(err.splitlines()) == 1 and "no rows:" in err and "first dead letters:" in err, err
    assert str(bad) in err  # names the file and the reason of its dead letters
    assert (out / "manifest.json").read_bytes() == before
    assert_published(out)


def test_quality_reports_empty_kb_tables_from_a_non_empty_input_as_critical(tmp_path, capsys):
    from bioel_core.quality import report
    from conftest import empty_table

    ingest_kb.run("biosyn-dict", [DICTIONARY], str(tmp_path / "kb"), local(), num_shards=2)
    empty_table(tmp_path / "kb", "concepts")
    empty_table(tmp_path / "kb", "names")
    summary = report(tmp_path / "kb")
    empty = {
        c["table"]
        for c in summary["checks"]
        if c["expectation"] == "expect_table_row_count_to_be_between" and not c["success"] and c["severity"] == "critical"
    }
    assert empty == {"concepts", "names"} and not summary["passed"]
    assert cli.main(["report", "--input", str(tmp_path / "kb")]) == 4


def test_a_large_mrconso_read_in_ranges_gives_the_same_files_on_one_and_two_workers(tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io
    from test_kb_umls import _umls_release

    paths = _umls_release(tmp_path / "release")
    whole = ingest_kb.run("umls", paths, str(tmp_path / "whole"), local(), num_shards=3)
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 2000)
    ranged = ingest_kb.run("umls", paths, str(tmp_path / "ranged"), local(), num_shards=3)
    ingest_kb.run(
        "umls",
        paths,
        str(tmp_path / "multi"),
        local("--direct_num_workers=2", "--direct_running_mode=multi_processing"),
        num_shards=3,
    )
    assert all(ranged["reconciliation"].values()) and ranged["counts"] == whole["counts"]
    assert [f["skipped_by_filter"] for f in ranged["inputs"]] == [f["skipped_by_filter"] for f in whole["inputs"]]
    for table in ("concepts", "names", "dead_letter"):
        expected = [f.read_bytes() for f in sorted((data_root(tmp_path / "whole") / table).iterdir())]
        for out in ("ranged", "multi"):
            assert [f.read_bytes() for f in sorted((data_root(tmp_path / out) / table).iterdir())] == expected, (out, table)
    assert not (data_root(tmp_path / "ranged") / "_spill").exists()


def test_a_large_mesh_xml_read_in_record_ranges_gives_the_whole_files_tables(tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io
    from test_kb_mesh_xml import _large

    path = str(_large(tmp_path, 15))
    whole = ingest_kb.run("mesh-xml", [path], str(tmp_path / "whole"), local(), num_shards=2)
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 3000)
    ranged = ingest_kb.run("mesh-xml", [path], str(tmp_path / "ranged"), local(), num_shards=2)
    assert all(ranged["reconciliation"].values()) and ranged["counts"] == whole["counts"]
    for table in ("concepts", "names", "dead_letter"):
        assert [f.read_bytes() for f in sorted((data_root(tmp_path / "ranged") / table).iterdir())] == [
            f.read_bytes() for f in sorted((data_root(tmp_path / "whole") / table).iterdir())
        ], table


def test_no_rows_names_why_the_records_were_filtered(tmp_path, capsys):
    # every MRCONSO row was left out by a filter (French rows, English selected by default): the refusal said only
    # "all dead-lettered or filtered", with no dead letter to name, so nothing told the user which option to change
    conso = tmp_path / "MRCONSO.RRF"
    conso.write_text(
        "C0000039|FRE|P|L1|PF|S1|Y|A1||M1|D015060|MSHFRE|MH|D015060|Colfosceril|3|N||\n"
        "C0000039|FRE|S|L2|PF|S2|Y|A2||M1|D015060|MSHFRE|EN|D015060|Dipalmitoyllecithine|3|N||\n"
    )
    code, err = _cli(capsys, "ingest-kb", "--input-format", "umls", "--input", conso, "--output", tmp_path / "kb", "--no-quality")
    assert code == 3 and len(err.splitlines()) == 1, err
    assert "no rows: 2 input records read" in err and "filtered: LAT not selected (2)" in err, err


def test_an_ingest_that_fails_its_quality_checks_publishes_nothing(tmp_path, capsys):
    # write, audit, publish: the checks ran on the published folder, so a KB dump read wrong replaced the good KB
    out = tmp_path / "kb"
    assert _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", DICTIONARY, "--output", out)[0] == 0
    before, tables = (out / "manifest.json").read_bytes(), read_table(out, "names")
    report_before = (out / "quality" / "summary.json").read_bytes()
    good = Path(DICTIONARY).read_text().splitlines()[0]
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join([good] + [f"not an id {i}||name {i}" for i in range(5)]) + "\n")  # 5 of 6 dead letters

    code, err = _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", bad, "--output", out)
    assert code == 4 and "nothing published" in err and str(out / "rejected" / "report.html") in err, err
    assert (out / "manifest.json").read_bytes() == before and read_table(out, "names") == tables
    assert (out / "quality" / "summary.json").read_bytes() == report_before  # the report of the tables in force
    rejected = json.loads((out / "rejected" / "summary.json").read_text())
    assert not rejected["passed"] and rejected["generation"] != read_manifest(out)["generation"]
    assert not (out / rejected["generation"]).exists()
    assert_published(out)

    # asked not to fail, the same input is published; a published run clears the last rejected report
    assert (
        _cli(capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", bad, "--output", out, "--fail-on", "none")[0] == 0
    )
    assert read_table(out, "names").num_rows == 1 and not (out / "rejected").exists()
    assert json.loads((out / "quality" / "summary.json").read_text())["generation"] == read_manifest(out)["generation"]


def test_a_job_whose_workers_run_other_libraries_than_the_launcher_publishes_nothing(tmp_path, monkeypatch, capsys):
    """`--setup_file` workers install setup.py's version ranges, not the lock file: a worker with another torch or
    numpy writes other vectors and scores than the same job on the launcher's machine, and nothing said so. Here the
    launcher (the versions pipelines.guards records) has another torch than this process (the worker) runs."""
    from bioel_core.guards import library_versions
    from pipelines import guards

    here = library_versions()
    monkeypatch.setattr(guards, "library_versions", lambda: {**here, "torch": "2.99.0"})
    command = [
        "ingest-kb",
        "--input-format",
        "biosyn-dict",
        "--input",
        DICTIONARY,
        "--output",
        str(tmp_path / "kb"),
        "--num-shards",
        "1",
        "--no-quality",
    ]
    assert cli.main(command) == 2
    err = capsys.readouterr().err
    assert f"torch {here['torch']} here, 2.99.0 on the launcher" in err and "requirements.lock.txt" in err
    assert not (tmp_path / "kb" / "manifest.json").exists()

    monkeypatch.setattr(guards, "library_versions", library_versions)
    assert cli.main(command) == 0
