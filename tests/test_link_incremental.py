"""`bioel link`'s copies and incremental runs on the committed sample: several copy formats in one run, every copy
kept across --incremental runs, a no-op --incremental run that opens no model and publishes nothing, and -v's
timestamped stage messages."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bioel_core.corpora import read_documents, read_pubtator, write_pubtator
from bioel_core.linking.annotate import AnnotatorSpec
from bioel_core.tables import data_root, read_manifest, read_table
from conftest import table_bytes
from pipelines import build_index, embed_names, ingest_kb, link_corpus
from pipelines.options import pipeline_options
import test_link_pipeline
from test_link_pipeline import MEDIC_SAMPLE, run

chain, corpus = test_link_pipeline.chain, test_link_pipeline.corpus  # its fixtures (module-scoped: built again here)

ROOT = Path(__file__).resolve().parent.parent
COPIES = ("pubtator", "bioc-xml")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def copy_of(out: Path, fmt: str) -> list:
    """The documents of the state's `fmt` copy, read back through its manifest's files."""
    manifest = read_manifest(out)
    return list(read_documents([str(data_root(out) / f) for f in manifest["outputs"][fmt]["files"]], fmt))


def linked(documents) -> list[tuple]:
    return sorted((d.doc_id, m.start, m.end, m.concept_ids) for d in documents for m in d.mentions)


def table_rows(out: Path) -> list[tuple]:
    return sorted((r["doc_id"], r["start"], r["end"], (r["concept_id"],)) for r in read_table(out, "annotations").to_pylist())


def test_several_copy_formats_in_one_run_each_holds_every_annotation(chain, corpus, tmp_path):
    folder, docs = corpus
    manifest = run(chain, [folder / "a.pubtator", folder / "b.pubtator"], tmp_path / "out", output_formats=["parquet", *COPIES])
    assert manifest["copy_formats"] == list(COPIES)
    for fmt in COPIES:
        assert manifest["outputs"][fmt]["documents"] == 40 and manifest["outputs"][fmt]["files"]
        written = copy_of(tmp_path / "out", fmt)
        assert sorted(d.doc_id for d in written) == sorted(d.doc_id for d in docs)
        assert linked(written) == table_rows(tmp_path / "out")
    # parquet alone asks for no copy: the tables are always written
    assert run(chain, [folder / "a.pubtator"], tmp_path / "plain", output_formats=["parquet"])["copy_formats"] == []
    with pytest.raises(ValueError, match="--output-format must be among .* got brat"):
        run(chain, [folder / "a.pubtator"], tmp_path / "bad", output_formats=["pubtator", "brat"])


def test_an_incremental_run_keeps_every_copy_of_the_state_and_covers_the_whole_corpus(chain, corpus, tmp_path):
    folder, docs = corpus
    out = tmp_path / "state"
    run(chain, [folder / "a.pubtator"], out, incremental=True, output_formats=["pubtator"])
    manifest = run(chain, [folder / "b.pubtator"], out, incremental=True, output_formats=["bioc-xml"])
    assert manifest["copy_formats"] == list(COPIES)
    for fmt in COPIES:  # each copy is the merged state, not this run's documents
        assert sorted(d.doc_id for d in copy_of(out, fmt)) == sorted(d.doc_id for d in docs)
        assert linked(copy_of(out, fmt)) == table_rows(out)
    # a run naming no copy keeps them too
    assert run(chain, [folder / "a.pubtator", folder / "b.pubtator"], out, incremental=True, single_file=True)[
        "copy_formats"
    ] == list(COPIES)
    assert [Path(f).name for f in read_manifest(out)["outputs"]["pubtator"]["files"]] == ["linked.pubtator"]
    # a run without --incremental makes a new state: the copies asked, only
    assert run(chain, [folder / "a.pubtator"], out, output_formats=["bioc-xml"])["copy_formats"] == ["bioc-xml"]
    assert "pubtator" not in read_manifest(out)["outputs"]


def _refuse_opening_models(monkeypatch):
    def opened(self):
        raise AssertionError("a model was opened")

    monkeypatch.setattr(AnnotatorSpec, "versions", opened)
    monkeypatch.setattr(AnnotatorSpec, "open", opened)


def test_a_no_op_incremental_run_opens_no_model_and_leaves_the_state_untouched(chain, corpus, tmp_path, monkeypatch):
    folder, _ = corpus
    out = tmp_path / "state"
    inputs = [folder / "a.pubtator", folder / "b.pubtator"]
    first = run(chain, inputs, out, incremental=True, output_formats=list(COPIES))
    assert not first.get(link_corpus.NOTHING_CHANGED)
    listing = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    pointer, tables = (out / "manifest.json").read_bytes(), table_bytes(out)

    with monkeypatch.context() as m:
        _refuse_opening_models(m)
        again = run(chain, inputs, out, incremental=True)  # no format named: the state's copies
        also = run(chain, inputs, out, incremental=True, output_formats=["pubtator"])
    for result in (again, also):
        assert result[link_corpus.NOTHING_CHANGED] and result["generation"] == first["generation"]
        docs = result["counts"]["documents"]
        assert (docs["linked"], docs["unchanged"], docs["carried"]) == (0, 40, 0)
        assert result["counts"]["mentions"]["linked"] == 0
    assert (out / "manifest.json").read_bytes() == pointer and table_bytes(out) == tables
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == listing

    # anything a real run would publish differently runs it: a new copy format, another layout, a changed input file
    for kwargs in ({"output_formats": ["bioc-json"]}, {"id_prefix": "vocabulary"}, {"num_shards": 3}):
        result = run(chain, inputs, out, incremental=True, **kwargs)
        assert not result.get(link_corpus.NOTHING_CHANGED), kwargs
        assert result["counts"]["documents"]["unchanged"] == 40, kwargs
    changed = tmp_path / "b.pubtator"
    documents = read_pubtator(folder / "b.pubtator")
    with open(changed, "w") as fh:
        write_pubtator(documents[1:], fh)  # one document fewer: a real run carries it
    result = run(chain, [folder / "a.pubtator", changed], out, incremental=True)
    assert not result.get(link_corpus.NOTHING_CHANGED) and result["counts"]["documents"]["carried"] == 1
    # a run without --incremental always runs
    assert not run(chain, [folder / "a.pubtator", changed], out).get(link_corpus.NOTHING_CHANGED)


def test_a_changed_model_file_is_no_no_op(chain, corpus, tmp_path):
    """The no-op check reads no model, so it stands on the model folder's files: a model changed in place (which a
    real run refuses, its fingerprint no longer the index's) is never taken for an unchanged linker."""
    folder, _ = corpus
    model, index = chain
    copy = tmp_path / "model"
    copy.mkdir()
    for f in Path(model).iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    linker = AnnotatorSpec(model=str(copy), indexes=(("Disease", index),))
    out = tmp_path / "state"
    link_corpus.run([str(folder / "a.pubtator")], "pubtator", str(out), linker, pipeline_options([]), incremental=True)
    key = linker.linker_sha256()
    config = copy / "bioel_encoder.json"
    config.write_text(config.read_text() + " ")
    assert linker.linker_sha256() != key


def test_each_pipeline_verb_logs_its_start_counts_and_end(chain, corpus, tmp_path, caplog):
    model, _ = chain
    folder, _ = corpus
    with caplog.at_level(logging.INFO, logger="pipelines"):
        ingest_kb.run("medic-biosyn", [MEDIC_SAMPLE], str(tmp_path / "kb"), pipeline_options([]), num_shards=1)
        embed_names.run(model, str(tmp_path / "kb"), str(tmp_path / "emb"), pipeline_options([]), num_shards=1)
        from bioel_core.index import IndexSpec

        build_index.run(
            str(tmp_path / "emb"), str(tmp_path / "index"), pipeline_options([]), num_shards=1, spec=IndexSpec("flat")
        )
    by_verb = {}
    for r in caplog.records:
        if r.name in ("pipelines.ingest-kb", "pipelines.embed", "pipelines.build-index"):
            by_verb.setdefault(r.name, []).append(r.getMessage())
    assert re.fullmatch(r"reading 1 medic-biosyn file\(s\) into .*", by_verb["pipelines.ingest-kb"][0])
    assert re.fullmatch(
        r"ingested [\d,]+ records: [\d,]+ concepts, [\d,]+ names, 0 dead-lettered; published gen-.* in "
        r"\d+\.\d s",
        by_verb["pipelines.ingest-kb"][-1],
    )
    assert re.fullmatch(r"embedding [\d,]+ names of .* with .* on cpu into .*", by_verb["pipelines.embed"][0])
    assert re.fullmatch(r"embedded [\d,]+ names, 0 dead-lettered; published gen-.* in \d+\.\d s", by_verb["pipelines.embed"][-1])
    assert re.fullmatch(r"indexing [\d,]+ vectors of .*: flat, 1 shard\(s\), into .*", by_verb["pipelines.build-index"][0])
    assert re.fullmatch(
        r"indexed [\d,]+ vectors in 1 shard\(s\); published gen-.* in \d+\.\d s", by_verb["pipelines.build-index"][-1]
    )


def bioel(*argv, env: dict | None = None) -> subprocess.CompletedProcess:
    """`bioel ARGV` in a fresh interpreter, stderr a pipe as in a scheduled job; `env`: more environment variables."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *map(str, argv)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600
    )


STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO pipelines\.link: "


def test_verbose_link_prints_timestamped_start_counts_and_end_lines_and_a_plain_run_does_not(chain, corpus, tmp_path):
    model, index = chain
    folder, _ = corpus
    argv = [
        "link",
        "--model",
        model,
        "--index",
        f"Disease={index}",
        "--input-format",
        "pubtator",
        "--no-quality",
        "--input",
        folder / "a.pubtator",
        "--output",
        tmp_path / "out",
        "--incremental",
        "--output-format",
        *COPIES,
    ]
    plain = bioel(*argv)
    assert plain.returncode == 0, plain.stderr
    assert "INFO" not in plain.stderr
    verbose = bioel(*argv[:-3], "-v")  # the same run again: nothing changed, and the copies are the state's
    assert verbose.returncode == 0, verbose.stderr
    lines = [line for line in verbose.stderr.splitlines() if re.match(STAMP, line)]
    assert re.fullmatch(
        STAMP + r"reading 1 input file\(s\), [\d,]+ bytes of pubtator, into .*out \(incremental; copies: "
        r"pubtator, bioc-xml\)",
        lines[0],
    ), verbose.stderr
    assert re.fullmatch(STAMP + r"nothing changed: .* stands, nothing published in \d+\.\d s", lines[-1]), verbose.stderr
    assert verbose.stdout.startswith("nothing changed: ")
    linking = bioel(*argv[:-3], "-v", "--input", folder / "b.pubtator")  # new documents: linked
    assert linking.returncode == 0, linking.stderr
    lines = [line for line in linking.stderr.splitlines() if re.match(STAMP, line)]
    assert any(re.fullmatch(STAMP + r"linker opened and checked; linking on \w+ into 4 shard\(s\)", line) for line in lines)
    assert any(
        re.fullmatch(STAMP + r"pipeline done: 40 document rows, [\d,]+ annotation rows; publishing", line) for line in lines
    ), linking.stderr
    assert re.fullmatch(
        STAMP + r"linked 20 documents, [\d,]+ mentions \(0 NIL\); unchanged 0, deleted 0, carried 20; "
        r"published gen-\S+ in \d+\.\d s",
        lines[-1],
    ), linking.stderr


def test_a_checked_run_is_no_no_op_until_the_state_has_its_own_quality_report(chain, corpus, tmp_path):
    from bioel_core.quality import QualityGate

    folder, _ = corpus
    out, inputs = tmp_path / "state", [folder / "a.pubtator"]
    run(chain, inputs, out, incremental=True, gate=QualityGate("none"))
    changed = run(chain, [folder / "b.pubtator"], out, incremental=True)  # unchecked: publishing removed the report
    assert not (out / "quality").exists()
    checked = run(chain, [folder / "b.pubtator"], out, incremental=True, gate=QualityGate("none"))
    assert not checked.get(link_corpus.NOTHING_CHANGED) and checked["generation"] != changed["generation"]
    assert (out / "quality" / "summary.json").exists()
    assert run(chain, [folder / "b.pubtator"], out, incremental=True, gate=QualityGate("none"))[link_corpus.NOTHING_CHANGED]


def test_a_no_op_run_removes_what_a_run_killed_after_moving_the_pointer_left(chain, corpus, tmp_path):
    model, index = chain
    folder, _ = corpus
    out = tmp_path / "state"
    run(chain, [folder / "a.pubtator"], out, incremental=True)
    argv = [
        "link",
        "--model",
        model,
        "--index",
        f"Disease={index}",
        "--input-format",
        "pubtator",
        "--no-quality",
        "--input",
        folder / "a.pubtator",
        folder / "b.pubtator",
        "--output",
        out,
        "--incremental",
    ]
    killed = bioel(*argv, env={"BIOEL_FAULT_AT": "pointer_moved"})
    assert killed.returncode == -9, killed.stderr
    published = read_manifest(out)["generation"]
    assert len(list(out.glob("gen-*"))) == 2 and (out / "_lock.json").exists()  # the killed run's leftovers
    again = bioel(*argv)
    assert again.returncode == 0 and again.stdout.startswith("nothing changed: "), again.stderr
    assert [p.name for p in out.glob("gen-*")] == [published] and not (out / "_lock.json").exists()
