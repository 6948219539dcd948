"""The in-process API (bioel_core.Annotator) as docs/python-api.md shows it, and `python -m bioel`."""

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bioel_core import Annotator
from bioel_core.corpora import Document, Mention, Passage
from bioel_core.index import IndexSpec
from bioel_core.linking.annotate import DocumentError
from bioel_core.settings import LinkSettings, LinkTarget
from pipelines import build_index, embed_names, ingest_kb
from pipelines.options import pipeline_options

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def docs_example(heading: str) -> str:
    """The first ```python block under a `## heading` of docs/python-api.md."""
    section = (REPO / "docs" / "python-api.md").read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory):
    """What `make demo` writes before linking: the sample MEDIC cut ingested, embedded with the shipped default
    model and indexed, under WORKDIR/demo_output."""
    workdir = tmp_path_factory.mktemp("workdir")
    out = workdir / "demo_output"
    options = pipeline_options([])
    ingest_kb.run("medic-biosyn", [str(REPO / "sample_data" / "medic_sample.txt")], str(out / "kb"), options, num_shards=2)
    embed_names.run(None, str(out / "kb"), str(out / "embeddings"), options, num_shards=2)
    build_index.run(str(out / "embeddings"), str(out / "index"), options, num_shards=2, spec=IndexSpec("flat"))
    return workdir


def test_the_docs_folders_example_runs_and_links(demo_output, monkeypatch):
    bundle_index = demo_output / "demo_output" / "bundle" / "index" / "Disease"  # where `make demo` has it
    bundle_index.parent.mkdir(parents=True, exist_ok=True)
    if not bundle_index.exists():
        bundle_index.symlink_to(demo_output / "demo_output" / "index")
    monkeypatch.chdir(demo_output)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(
            compile(docs_example("Link with folders: `Annotator.from_folders`"), "docs/python-api.md", "exec"),
            {"__name__": "docs"},
        )
    assert printed.getvalue().splitlines() == ["D003693"]  # delirium


def test_link_and_annotate_are_the_linkers_and_the_annotator_rows(demo_output):
    index = str(demo_output / "demo_output" / "index")
    annotator = Annotator.from_folders(indexes={"Disease": index})
    assert annotator.entity_types == ["Disease"]
    [found] = annotator.link(["Subacute Deliriums"], k=3)
    assert [c.concept_ids for c in found["Disease"]][0] == ("D003693",) and len(found["Disease"]) == 3
    assert found["Disease"][0].score >= found["Disease"][1].score >= found["Disease"][2].score
    text = "Mixed origin delirium after surgery."
    document = Document("pmid-1", [Passage("title", 0, text)])
    by_string, by_document = annotator.annotate([text]), annotator.annotate([document])
    assert [r["doc_id"] for r in by_string[0]] == ["0"] and [r["doc_id"] for r in by_document[0]] == ["pmid-1"]
    assert [(r["mention"], r["concept_id"]) for r in by_document[0]] == [("Mixed origin delirium", "D003693")]
    assert text[by_document[0][0]["start"] : by_document[0][0]["end"]] == "Mixed origin delirium"
    # given mentions and NIL thresholds, as `bioel link --mentions given --nil-threshold`
    given = Annotator.from_folders(indexes={"Disease": index}, mentions="given", nil_thresholds={"Disease": 1.01})
    mention = Mention("delirium", "pmid-1", 13, 21, "Disease")
    [[row]] = given.annotate([Document("pmid-1", [Passage("title", 0, text)], [mention])])
    assert (row["mention"], row["nil"], row["concept_id"]) == ("delirium", True, None)
    with pytest.raises(DocumentError, match="document 1: empty document"):
        annotator.annotate(["fine text", "   "])
    with pytest.raises(ValueError, match="^mentions: 'find' is not one of detect, given$"):
        Annotator.from_folders(indexes={"Disease": index}, mentions="find")
    if not torch.cuda.is_available():  # was torch's "AssertionError: Torch not compiled with CUDA enabled" at first use
        with pytest.raises(ValueError, match="^device: cuda: no CUDA device is available here$"):
            Annotator.from_folders(indexes={"Disease": index}, device="cuda")


def test_from_folders_opens_each_model_folder_once(demo_output, monkeypatch):
    """The model is checked against every index and then linked with: one load, not one per step."""
    import bioel_core.models as models

    opened, real = [], models.open_encoder

    def counting(folder, *args, **kwargs):
        opened.append(str(folder))
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(models, "open_encoder", counting)
    index = str(demo_output / "demo_output" / "index")
    annotator = Annotator.from_folders(indexes={"Disease": index, "Chemical": index})
    assert opened == [str(models.DEFAULT_MODEL.resolve())]
    assert annotator.link(["Subacute Deliriums"])[0]["Chemical"][0].concept_ids == ("D003693",)


def test_annotate_gives_the_rows_bioel_link_writes(demo_output, tmp_path):
    from bioel_core.models import shipped_path
    from bioel_core.tables import read_table
    from pipelines import cli

    index, stop = str(demo_output / "demo_output" / "index"), str(shipped_path("stoplists/disease-medic.json"))
    texts = {
        "a": "Famotidine-associated delirium in gout. Délirium — 肝炎 and subacute delirium.",
        "b": "The weather was fine.",
        "c": "😀 Gouty arthritis, then mixed origin delirium; DELIRIUM.",
    }
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{i}\t{t}\n" for i, t in texts.items()), encoding="utf-8")
    assert (
        cli.main(
            [
                "link",
                "--input",
                str(corpus),
                "--input-format",
                "text",
                "--text-per-line",
                "--index",
                f"Disease={index}",
                "--stop-list",
                f"Disease={stop}",
                "--output",
                str(tmp_path / "links"),
                "--num-shards",
                "1",
                "--no-quality",
            ]
        )
        == 0
    )
    by_cli = sorted(read_table(tmp_path / "links", "annotations").to_pylist(), key=lambda r: (r["doc_id"], r["start"]))
    annotator = Annotator.from_folders(indexes={"Disease": index}, stop_lists={"Disease": stop})
    documents = [Document(i, [Passage("text", 0, t)]) for i, t in texts.items()]
    by_api = [row for rows in annotator.annotate(documents) for row in rows]
    assert len(by_api) >= 4 and by_api == by_cli  # same spans, ids, scores, versions
    # the contract `bioel link` makes of those flags, given to the API as it is
    link = LinkSettings(types={"Disease": LinkTarget(index=index, stop_list=stop)})
    assert [row for rows in Annotator.from_settings(link).annotate(documents) for row in rows] == by_cli


def test_one_string_instead_of_a_list_is_refused(demo_output):
    # a str is a sequence of strings: link("delirium") linked each of its 8 characters (8 answers, exit fine) and
    # annotate("delirium in gout") annotated each character as a document, then failed on 'document 8: empty document'
    annotator = Annotator.from_folders(indexes={"Disease": str(demo_output / "demo_output" / "index")})
    with pytest.raises(TypeError) as err:
        annotator.link("delirium")
    assert str(err.value) == "texts: a list of strings, got one str (wrap one text in a list: ['delirium'])"
    with pytest.raises(TypeError) as err:
        annotator.annotate("delirium in gout")
    assert (
        str(err.value) == "documents: a list of documents or strings, got one str (wrap one text in a list: ['delirium in gout'])"
    )
    assert len(annotator.link(["delirium"])) == 1 and annotator.link([]) == [] and annotator.annotate([]) == []


def test_what_is_not_a_text_is_named_in_one_line(demo_output):
    # were TypeErrors from deep inside: "expected string or bytes-like object, got 'NoneType'" (the normalizer),
    # "can only concatenate str (not "bytes") to str" (the passages joined), "'NoneType' object is not iterable"
    annotator = Annotator.from_folders(indexes={"Disease": str(demo_output / "demo_output" / "index")})
    for call, arg, message in [
        (annotator.link, ["gout", None], "texts: a list of strings, got NoneType at position 1: None"),
        (annotator.link, [b"gout"], "texts: a list of strings, got bytes at position 0: b'gout'"),
        (annotator.link, None, "texts: a list of strings, got NoneType"),
        (annotator.annotate, [7], "documents: a list of documents or strings, got int at position 0: 7"),
        (
            annotator.annotate,
            [{"text": "gout"}],
            "documents: a list of documents or strings, got dict at position 0: {'text': 'gout'}",
        ),
    ]:
        with pytest.raises(TypeError) as err:
            call(arg)
        assert str(err.value) == message
    assert annotator.link(("gout",)) == annotator.link(t for t in ["gout"])  # any iterable of strings


def test_a_text_with_nothing_to_link_gets_no_concept(demo_output):
    # its empty query was answered by the name nearest the empty string's vector: 'disease' at 0.63
    annotator = Annotator.from_folders(indexes={"Disease": str(demo_output / "demo_output" / "index")})
    found = annotator.link(["", "gout", "  ", "!!! —", "délirium ☃"], k=2)
    assert [len(f["Disease"]) for f in found] == [0, 2, 0, 0, 2]
    assert found[1]["Disease"] == annotator.link(["gout"], k=2)[0]["Disease"]  # the others, as linked alone
    assert found[4]["Disease"][0].concept_ids == ("D003693",)
    with pytest.raises(ValueError, match="k must be at least 1"):
        annotator.link([""], k=0)


def test_an_argument_that_is_not_a_mapping_of_entity_types_is_named(demo_output):
    # were AttributeError: 'str' object has no attribute 'items', and "could not convert string to float: 'x'"
    index = str(demo_output / "demo_output" / "index")
    for kwargs, error, message in [
        # the value is named by its repr, cut at 60 characters
        (
            {"indexes": index},
            TypeError,
            f"indexes: a mapping of entity type -> value ({{'Disease': ...}}), got str {index!r:.60}",
        ),
        (
            {"indexes": {"Disease": index}, "stop_lists": "stop.json"},
            TypeError,
            "stop_lists: a mapping of entity type -> value ({'Disease': ...}), got str 'stop.json'",
        ),
        (
            {"indexes": {"Disease": index}, "nil_thresholds": 0.8},
            TypeError,
            "nil_thresholds: a mapping of entity type -> value ({'Disease': ...}), got float 0.8",
        ),
        (
            {"indexes": {"Disease": index}, "nil_thresholds": {"Disease": "high"}},
            ValueError,
            "nil_thresholds: 'Disease' -> 'high' is not a float",
        ),
        (
            {"indexes": {"Disease": index}, "inner_names": "Disease"},
            TypeError,
            "inner_names: a collection of entity types (['Disease']), got the string 'Disease'",
        ),
    ]:
        with pytest.raises(error) as err:
            Annotator.from_folders(**kwargs)
        assert str(err.value).startswith(message), err.value


@pytest.mark.parametrize("module", ["bioel", "pipelines.cli"])
def test_python_dash_m_runs_the_cli(module, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: bioel ") and "link" in done.stdout and "evaluate-e2e" in done.stdout
