"""--input as files, folders and globs (pipelines.outputs.expand_inputs over Beam's FileSystems), and the one
resolver of PubTator sources (a file, a parts folder, a `bioel link` output folder)."""

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from bioel_core.corpora import Document, Passage, pubtator_files, read_pubtator, write_pubtator
from bioel_core.tables import read_table
from objstore import ObjectStore
from pipelines import cli, ingest_kb
from pipelines.options import pipeline_options
from pipelines.outputs import expand_inputs

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BASELINE = FIXTURES / "pubmed" / "pubmed25n0001_sample.xml"
MEDIC_RAW = FIXTURES / "biosyn" / "medic_raw.txt"


def baseline_folder(folder: Path) -> Path:
    """A PubMed baseline folder as NCBI serves it: gzipped files from the DTD-true fixture (the second with
    other PMIDs) each with its `.md5` sidecar, plus what a synced folder picks up (a hidden file, a subfolder)."""
    folder.mkdir()
    xml = BASELINE.read_bytes()
    for name, data in (("pubmed25n0002.xml.gz", xml.replace(b">10000", b">20000")), ("pubmed25n0001.xml.gz", xml)):
        packed = gzip.compress(data, mtime=0)
        (folder / name).write_bytes(packed)
        (folder / f"{name}.md5").write_text(f"MD5({name})= {hashlib.md5(packed).hexdigest()}\n")
    (folder / ".DS_Store").write_bytes(b"\0\1")
    (folder / "old").mkdir()
    (folder / "old" / "pubmed24n0001.xml.gz").write_bytes(gzip.compress(xml, mtime=0))
    return folder


def test_a_folder_is_its_input_files_sorted_without_sidecars_hidden_or_subfolders(tmp_path):
    folder = baseline_folder(tmp_path / "baseline")
    (folder / "_SUCCESS").write_text("")
    expected = [str(folder / "pubmed25n0001.xml.gz"), str(folder / "pubmed25n0002.xml.gz")]
    assert expand_inputs([str(folder)]) == expected
    assert expand_inputs([str(folder) + "/"]) == expected
    assert expand_inputs([str(folder / "*.xml.gz")]) == expected
    # files in the order given (`bioel link` applies records in that order), each named once at its first place
    assert expand_inputs([expected[1], str(folder / "*.gz"), str(folder)]) == expected[::-1]
    assert expand_inputs([expected[1], expected[0]]) == expected[::-1]
    assert expand_inputs([str(folder / "**.xml.gz")]) == sorted(expected + [str(folder / "old" / "pubmed24n0001.xml.gz")])


def test_globs_and_paths_that_name_nothing_are_one_line_errors_naming_them(tmp_path):
    folder = baseline_folder(tmp_path / "baseline")
    with pytest.raises(FileNotFoundError, match=r"--input .*/baseline/\*\.xml: no input file matches this pattern$"):
        expand_inputs([str(folder / "*.xml")])
    with pytest.raises(FileNotFoundError, match=r"--input .*/nope\.xml: no such file or folder$"):
        expand_inputs([str(folder / "nope.xml")])
    (tmp_path / "hidden-only").mkdir()
    (tmp_path / "hidden-only" / ".keep").write_text("")
    with pytest.raises(FileNotFoundError, match="hidden-only: the folder holds no input file"):
        expand_inputs([str(tmp_path / "hidden-only")])
    # a glob of sidecars only matches no input file
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        expand_inputs([str(folder / "*.md5")], flag="--names")


def test_a_remote_folder_is_a_prefix_and_is_read_through_beam(tmp_path):
    local = baseline_folder(tmp_path / "baseline")
    ObjectStore.objects = {
        f"objstore://bucket/baseline/{p.relative_to(local).as_posix()}": p.read_bytes() for p in local.rglob("*") if p.is_file()
    }
    ObjectStore.objects["objstore://bucket/baseline-2024/pubmed24n0001.xml.gz"] = b"not under baseline/"
    expected = ["objstore://bucket/baseline/pubmed25n0001.xml.gz", "objstore://bucket/baseline/pubmed25n0002.xml.gz"]
    assert expand_inputs(["objstore://bucket/baseline"]) == expected
    assert expand_inputs(["objstore://bucket/baseline/"]) == expected
    assert expand_inputs(["objstore://bucket/baseline/*.xml.gz"]) == expected
    assert expand_inputs([expected[0]]) == expected[:1]
    with pytest.raises(FileNotFoundError, match=r"--input objstore://bucket/nothing/\*\.gz: no input file matches"):
        expand_inputs(["objstore://bucket/nothing/*.gz"])
    with pytest.raises(FileNotFoundError, match="--input objstore://bucket/base: no such file or folder"):
        expand_inputs(["objstore://bucket/base"])
    # a pipeline reads the expanded remote files through Beam and records them
    ObjectStore.objects["objstore://bucket/medic/CTD_diseases.txt"] = MEDIC_RAW.read_bytes()
    ObjectStore.objects["objstore://bucket/medic/CTD_diseases.txt.md5"] = b"0" * 32
    manifest = ingest_kb.run(
        "medic-biosyn", ["objstore://bucket/medic"], str(tmp_path / "kb"), pipeline_options([]), num_shards=1
    )
    assert [(i["path"], i["bytes"]) for i in manifest["inputs"]] == [
        ("objstore://bucket/medic/CTD_diseases.txt", len(MEDIC_RAW.read_bytes()))
    ]
    assert manifest["outputs"]["names"]["rows"] > 0


def test_each_file_is_listed_with_its_folder_and_a_text_document_is_named_below_it(tmp_path):
    """A text document's id is its path below the folder or glob root it was listed from (local or remote), so one
    file name in two subfolders gives two ids, and a file given alone or directly in a folder keeps its name."""
    from bioel_core.corpora.text import document_stem
    from pipelines.outputs import listed_inputs

    local = baseline_folder(tmp_path / "baseline")
    (local / "new").mkdir()
    (local / "new" / "pubmed25n0001.xml.gz").write_bytes(b"a file of the same name in another subfolder")
    ObjectStore.objects = {
        f"objstore://bucket/baseline/{p.relative_to(local).as_posix()}": p.read_bytes() for p in local.rglob("*") if p.is_file()
    }
    for root in (str(local), "objstore://bucket/baseline"):
        listed = listed_inputs([f"{root}/**.xml.gz", f"{root}/pubmed25n0002.xml.gz"])
        assert {document_stem(path, folder) for path, folder in listed.items()} == {
            "pubmed25n0001",
            "pubmed25n0002",
            "old/pubmed24n0001",
            "new/pubmed25n0001",
        }
        assert listed[f"{root}/pubmed25n0002.xml.gz"] == root  # named again: its first listing's folder
        (alone,) = listed_inputs([f"{root}/old/pubmed24n0001.xml.gz"]).items()
        assert document_stem(*alone) == "pubmed24n0001"


def test_ingest_kb_reads_a_folder_and_records_the_expanded_files(tmp_path):
    folder = tmp_path / "medic"
    folder.mkdir()
    lines = MEDIC_RAW.read_text().splitlines(keepends=True)
    (folder / "b.txt").write_text("".join(lines[len(lines) // 2 :]))
    (folder / "a.txt").write_text("".join(lines[: len(lines) // 2]))
    (folder / "a.txt.md5").write_text("0" * 32)
    manifest = ingest_kb.run("medic-biosyn", [str(folder)], str(tmp_path / "kb"), pipeline_options([]), num_shards=1)
    assert [i["path"] for i in manifest["inputs"]] == [str(folder / "a.txt"), str(folder / "b.txt")]
    whole = ingest_kb.run("medic-biosyn", [str(MEDIC_RAW)], str(tmp_path / "kb-whole"), pipeline_options([]), num_shards=1)
    assert read_table(tmp_path / "kb", "names").to_pylist() == read_table(tmp_path / "kb-whole", "names").to_pylist()
    assert whole["counts"]["names"] == manifest["counts"]["names"]


def _docs(n: int) -> list[Document]:
    return [Document(f"{i}", [Passage("title", 0, f"Title {i}.")]) for i in range(n)]


def test_pubtator_sources_file_parts_folder_and_link_output(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    write_pubtator(_docs(3)[1:], parts / "part-00001-of-00002.pubtator")
    write_pubtator(_docs(1), parts / "part-00000-of-00002.pubtator")
    assert pubtator_files(parts) == [str(parts / "part-00000-of-00002.pubtator"), str(parts / "part-00001-of-00002.pubtator")]
    assert [d.doc_id for d in read_pubtator(parts)] == ["0", "1", "2"]
    assert pubtator_files(parts / "part-00000-of-00002.pubtator") == [str(parts / "part-00000-of-00002.pubtator")]
    # a finished link output: the generation its manifest names, the files its manifest lists
    out = tmp_path / "links"
    (out / "gen-1" / "pubtator").mkdir(parents=True)
    write_pubtator(_docs(2), out / "gen-1" / "pubtator" / "linked.pubtator")
    (out / "gen-0-stale").mkdir()
    manifest = {
        "pipeline": "link",
        "complete": True,
        "generation": "gen-1",
        "output_format": "pubtator",
        "outputs": {"pubtator": {"files": ["pubtator/linked.pubtator"]}},
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert pubtator_files(out) == [str(out / "gen-1" / "pubtator" / "linked.pubtator")]
    assert [d.doc_id for d in read_pubtator(out)] == ["0", "1"]
    # the same resolver behind link --input: a link output folder is read for its PubTator copy
    assert expand_inputs([str(out)], output_folder=pubtator_files) == pubtator_files(out)
    with pytest.raises(ValueError, match="is a bioel output folder, not a folder of input files"):
        expand_inputs([str(out)])


def test_pubtator_sources_refuse_outputs_without_pubtator(tmp_path, capsys):
    out = tmp_path / "links"
    out.mkdir()
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "pipeline": "link",
                "complete": True,
                "generation": "g",
                "output_format": "bioc-xml",
                "outputs": {"bioc-xml": {"files": []}},
            }
        )
    )
    with pytest.raises(ValueError, match="--pred .*links: this `bioel link` output has no PubTator copy .*bioc-xml"):
        read_pubtator(out, "--pred")
    (out / "manifest.json").write_text(json.dumps({"pipeline": "embed", "complete": True}))
    with pytest.raises(ValueError, match="a `bioel embed` output, not a `bioel link` one"):
        pubtator_files(out)
    code = cli.main(["evaluate-e2e", "--gold", str(tmp_path / "gold.pubtator"), "--pred", str(out)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "gold.pubtator: no such file or folder" in err
