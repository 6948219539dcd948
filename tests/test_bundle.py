"""Linker bundles: a bundle file built into one folder (`bioel build`), linked with (`bioel link --bundle`,
`Annotator.from_bundle`), relocated, and brought up to date stage by stage. One bundle, built once from the committed
sample (bundles/demo.toml, NIL calibrated on the sample's gold), is shared by the module: Beam runs are slow."""

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from bioel_core import bundle as layout
from bioel_core.bundle import StageRecord
from bioel_core.settings import load_bundle_file
from pipelines import cli
from pipelines.build_bundle import Build

from conftest import SAMPLE_DATA, table_bytes

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "bundles" / "demo.toml"
GOLD = SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator"
ABSTRACTS = SAMPLE_DATA / "abstracts_sample.jsonl"
STAGES = ["Disease.ingest", "Disease.embed", "Disease.index", "calibrate"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def build_args(bundle_dir, *assignments) -> list[str]:
    return [
        "build",
        str(DEMO),
        "--output",
        str(bundle_dir),
        "--no-quality",
        "--set",
        f"calibrate.gold={GOLD}",
        *[a for assignment in assignments for a in ("--set", assignment)],
    ]


def stage_lines(err: str) -> dict[str, str]:
    """`build: NAME: WHAT` lines of a build's stderr, by stage."""
    out = {}
    for line in err.splitlines():
        parts = line.split(": ", 2)
        if len(parts) == 3 and parts[0] == "build" and parts[1] in STAGES:
            out.setdefault(parts[1], parts[2])
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The demo bundle with NIL calibrated on the sample gold, built with the library call `bioel build` makes."""
    bundle_dir = tmp_path_factory.mktemp("bundles") / "demo"
    settings = load_bundle_file(DEMO, [f"calibrate.gold={GOLD}"])
    Build(settings, str(bundle_dir), ["--runner", "FnApiRunner"], fail_on=None, source=str(DEMO)).run()
    return bundle_dir


@pytest.fixture(scope="module")
def linked(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("links") / "links"
    assert (
        cli.main(
            [
                "link",
                "--bundle",
                str(built),
                "--input",
                str(ABSTRACTS),
                "--input-format",
                "jsonl",
                "--output",
                str(out),
                "--no-quality",
                "--num-shards",
                "2",
            ]
        )
        == 0
    )
    return out


def test_a_built_bundle_is_one_folder_with_relative_paths_and_calibrated_thresholds(built, linked):
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["pipeline"] == "build" and manifest["reconciliation"] == {"stages": True}
    link = manifest["link"]
    assert link["settings"] == {
        "model": "models/disease-default",
        "detector": "dictionary",
        "copy_formats": ["pubtator"],
        "types": {
            "Disease": {
                "index": "index/Disease",
                "stop_list": "stoplists/disease-medic.json",
                "nil_threshold": link["nil"]["Disease"]["threshold"],
            }
        },
    }
    assert link["nil"]["Disease"]["source"] == "calibrated"
    assert sorted(manifest["stages"]) == sorted(STAGES)
    for name in (
        "kb/Disease",
        "embeddings/Disease",
        "index/Disease",
        "models/disease-default/model.safetensors",
        "stoplists/disease-medic.json",
        f"{manifest['generation']}/settings/bundle.json",
    ):
        assert (built / name).exists(), name
    calibration = json.loads((built / manifest["generation"] / "settings" / "calibration.json").read_text())
    assert calibration["thresholds"]["Disease"]["threshold"] == link["nil"]["Disease"]["threshold"]
    # linked with the bundle: its copy format written, its threshold applied
    from bioel_core.tables import read_table

    rows = read_table(linked, "annotations").to_pylist()
    threshold = link["nil"]["Disease"]["threshold"]
    assert json.loads((linked / "manifest.json").read_text())["annotator"]["nil_thresholds"] == [["Disease", threshold]]
    assert rows and all(r["nil"] == (r["score"] < threshold) for r in rows)
    assert "pubtator/part-00000-of-00002.pubtator" in table_bytes(linked)


def test_a_relocated_bundle_links_byte_identically_and_builds_there(built, linked, tmp_path, capsys):
    """Copied elsewhere, the original moved away (nothing may read it), the bundle links to the same bytes; built there
    it is up to date, and a stage a changed setting runs reads the copy's own folders."""
    moved = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(built, moved)
    hidden = built.with_name("hidden")
    built.rename(hidden)
    try:
        capsys.readouterr()
        assert cli.main(build_args(moved)) == 0
        assert stage_lines(capsys.readouterr().err) == dict.fromkeys(STAGES, "up to date")
        rebuilt = tmp_path / "rebuilt"
        shutil.copytree(moved, rebuilt)
        assert cli.main(build_args(rebuilt, "types.Disease.index.num_shards=3")) == 0
        ran = stage_lines(capsys.readouterr().err)
        assert ran["Disease.embed"] == "up to date" and ran["Disease.index"] == "running (settings changed (num_shards))"
        assert ran["calibrate"] == "running (inputs changed (Disease.index))"
        out = tmp_path / "links"
        assert (
            cli.main(
                [
                    "link",
                    "--bundle",
                    str(moved),
                    "--input",
                    str(ABSTRACTS),
                    "--input-format",
                    "jsonl",
                    "--output",
                    str(out),
                    "--no-quality",
                    "--num-shards",
                    "2",
                ]
            )
            == 0
        )
    finally:
        hidden.rename(built)
    assert table_bytes(out) == table_bytes(linked)


def test_from_bundle_annotates_as_link_does(built, linked, tmp_path):
    from bioel_core import Annotator
    from bioel_core.corpora import read_jsonl
    from bioel_core.tables import read_table

    moved = tmp_path / "copy"
    shutil.copytree(built, moved)
    documents = read_jsonl(ABSTRACTS)[:3]
    by_api = [row for rows in Annotator.from_bundle(moved).annotate(documents) for row in rows]
    ids = {d.doc_id for d in documents}
    by_cli = sorted(
        (r for r in read_table(linked, "annotations").to_pylist() if r["doc_id"] in ids), key=lambda r: (r["doc_id"], r["start"])
    )
    assert by_api and sorted(by_api, key=lambda r: (r["doc_id"], r["start"])) == by_cli


def test_a_second_build_runs_nothing_and_writes_nothing(built, capsys):
    before = (built / "manifest.json").read_bytes()
    assert cli.main(build_args(built)) == 0
    err = capsys.readouterr().err
    assert stage_lines(err) == dict.fromkeys(STAGES, "up to date")
    assert f"build: nothing to do: {built} is up to date" in err
    assert (built / "manifest.json").read_bytes() == before


def test_a_dump_touched_but_unchanged_runs_nothing(built, tmp_path, capsys):
    dump = tmp_path / "medic_sample.txt"
    shutil.copyfile(SAMPLE_DATA / "medic_sample.txt", dump)  # another path and time, the same bytes
    assert cli.main(build_args(built, f"types.Disease.ingest.dumps={dump}")) == 0
    assert stage_lines(capsys.readouterr().err) == dict.fromkeys(STAGES, "up to date")


def test_a_changed_stage_runs_with_its_downstream_only(built, tmp_path, capsys):
    """An index setting re-runs the index and the calibration; a changed gold the calibration alone."""
    try:
        assert cli.main(build_args(built, "types.Disease.index.num_shards=1")) == 0
        lines = stage_lines(capsys.readouterr().err)
        assert lines["Disease.ingest"] == lines["Disease.embed"] == "up to date"
        assert lines["Disease.index"] == "running (settings changed (num_shards))"
        assert lines["calibrate"] == "running (inputs changed (Disease.index))"
        gold = tmp_path / "gold.pubtator"
        gold.write_text("\n\n".join(GOLD.read_text().split("\n\n")[:30]) + "\n")
        assert cli.main(build_args(built, "types.Disease.index.num_shards=1", f"calibrate.gold={gold}")) == 0
        lines = stage_lines(capsys.readouterr().err)
        assert [lines[s] for s in STAGES[:3]] == ["up to date"] * 3
        assert lines["calibrate"] == "running (inputs changed (gold))"
    finally:  # back to the module's bundle
        assert cli.main(build_args(built)) == 0
    lines = stage_lines(capsys.readouterr().err)
    assert lines["Disease.index"].startswith("running") and lines["Disease.embed"] == "up to date"


def test_a_short_form_support_recalibrates_and_reaches_the_linker(built, capsys):
    """The calibration links with the short-form rule, so setting it runs the calibration again (and only that)."""
    from bioel_core.bundle import BuiltBundle

    try:
        assert cli.main(build_args(built, "types.Disease.link.short_form_support=0.3")) == 0
        lines = stage_lines(capsys.readouterr().err)
        assert [lines[s] for s in STAGES[:3]] == ["up to date"] * 3
        assert lines["calibrate"] == "running (settings changed (short_forms))"
        assert BuiltBundle.read(built).link_settings().types["Disease"].short_form_support == 0.3
    finally:  # back to the module's bundle
        assert cli.main(build_args(built)) == 0
    assert stage_lines(capsys.readouterr().err)["calibrate"] == "running (settings changed (short_forms))"
    assert BuiltBundle.read(built).link_settings().types["Disease"].short_form_support is None


def test_a_change_of_detection_rules_recalibrates(built, capsys, monkeypatch):
    """The mentions the calibration links are detection's: a new version of its rules (a bioel upgrade, or a rule
    changed within a release) runs the calibration again, and only that."""
    import bioel_core.linking.annotate as annotate

    monkeypatch.setattr(annotate, "DETECTION_RULES", annotate.DETECTION_RULES + " a-new-rule/1")
    try:
        assert cli.main(build_args(built)) == 0
        lines = stage_lines(capsys.readouterr().err)
        assert [lines[s] for s in STAGES[:3]] == ["up to date"] * 3
        assert lines["calibrate"] == "running (settings changed (rules))"
    finally:  # back to the module's bundle
        monkeypatch.undo()
        assert cli.main(build_args(built)) == 0
    assert stage_lines(capsys.readouterr().err)["calibrate"] == "running (settings changed (rules))"


def test_extra_names_are_an_ingest_input_by_content_and_link_as_their_concept(built, tmp_path, capsys):
    """A bundle's extra-names file re-runs the ingest (and what depends on it) when its content changes, not its path;
    the dictionary finds its names and links them to their concept."""
    from bioel_core import Annotator
    from bioel_core.corpora.records import Document, Passage

    extra = tmp_path / "extra.tsv"
    extra.write_text("# a hand-written synonym\nconcept_id\tname\nMESH:D003693\tacute confusional episode\n", encoding="utf-8")
    try:
        assert cli.main(build_args(built, f"types.Disease.ingest.extra_names={extra}")) == 0
        assert stage_lines(capsys.readouterr().err)["Disease.ingest"] == "running (inputs changed (extra_names))"
        text = "She had an acute confusional episode."
        (row,) = Annotator.from_bundle(built).annotate([Document("1", [Passage("title", 0, text)])])[0]
        assert (row["mention"], row["concept_id"], row["matched_name"]) == (
            "acute confusional episode",
            "D003693",
            "acute confusional episode",
        )
        moved = tmp_path / "moved.tsv"
        shutil.copyfile(extra, moved)
        assert cli.main(build_args(built, f"types.Disease.ingest.extra_names={moved}")) == 0
        assert stage_lines(capsys.readouterr().err) == dict.fromkeys(STAGES, "up to date")
    finally:  # back to the module's bundle: without extra names, the ingest key is the one it had before they existed
        assert cli.main(build_args(built)) == 0
    assert stage_lines(capsys.readouterr().err)["Disease.ingest"] == "running (inputs changed (extra_names))"
    assert "extra_names" not in layout.read_record(built, "Disease.ingest").settings


def test_a_name_of_a_concept_the_kb_lacks_makes_it_with_add_missing_concepts(built, tmp_path, capsys):
    """MEDIC 2012 lacks cardiotoxicity (D066126): its extra name is a dead letter, or with add_missing_concepts makes
    the concept, which the dictionary then finds and links to; the setting re-runs the ingest."""
    from bioel_core import Annotator
    from bioel_core.corpora.records import Document, Passage
    from bioel_core.tables import read_table

    extra = tmp_path / "extra.tsv"
    extra.write_text("concept_id\tname\nD066126\tcardiotoxicity\nD066126\tcardiac toxicity\n", encoding="utf-8")
    document = Document("1", [Passage("title", 0, "Signs of cardiac toxicity after doxorubicin.")])
    try:
        assert cli.main(build_args(built, f"types.Disease.ingest.extra_names={extra}")) == 0
        dead = read_table(layout.stage_folder(built, layout.KB, "Disease"), "dead_letter").column("reason").to_pylist()
        assert dead == ["concept D066126 is not in the KB (neither a concept id nor an alt id)"] * 2
        assert Annotator.from_bundle(built).annotate([document])[0] == []
        made = [f"types.Disease.ingest.extra_names={extra}", "types.Disease.ingest.add_missing_concepts=true"]
        capsys.readouterr()
        assert cli.main(build_args(built, *made)) == 0
        assert stage_lines(capsys.readouterr().err)["Disease.ingest"] == "running (settings changed (add_missing_concepts))"
        kb = layout.stage_folder(built, layout.KB, "Disease")
        concept = [c for c in read_table(kb, "concepts").to_pylist() if c["concept_id"] == "D066126"]
        assert [(c["vocabulary"], c["preferred_name"]) for c in concept] == [("MESH", "cardiotoxicity")]
        assert read_table(kb, "dead_letter").num_rows == 0
        (row,) = Annotator.from_bundle(built).annotate([document])[0]
        assert (row["mention"], row["concept_id"], row["vocabulary"]) == ("cardiac toxicity", "D066126", "MESH")
    finally:
        assert cli.main(build_args(built)) == 0
    assert "add_missing_concepts" not in layout.read_record(built, "Disease.ingest").settings


def test_staleness_names_why_a_stage_runs(built, tmp_path):
    record = layout.read_record(built, "Disease.index")
    assert layout.staleness(built, "Disease.index", record.settings, record.inputs, "build-index") is None
    assert (
        layout.staleness(built, "Disease.index", {**record.settings, "kind": "hnsw"}, record.inputs, "build-index")
        == "settings changed (kind)"
    )
    assert (
        layout.staleness(built, "Disease.index", record.settings, {"embeddings": "0" * 64}, "build-index")
        == "inputs changed (embeddings)"
    )
    assert layout.staleness(tmp_path, "Disease.index", {}, {}) == "not built yet"
    # its output replaced by another run (another version) or gone
    fake = tmp_path / "fake"
    (fake / "index").mkdir(parents=True)
    (fake / "index" / "Disease").symlink_to(built / "index" / "Disease")
    layout.write_record(fake, "Disease.index", StageRecord(record.settings, record.inputs, record.output, "0" * 64))
    assert (
        layout.staleness(fake, "Disease.index", record.settings, record.inputs, "build-index")
        == "its output changed since it was built"
    )
    layout.write_record(fake, "Disease.index", StageRecord(record.settings, record.inputs, "index/Chemical", record.version))
    assert (
        layout.staleness(fake, "Disease.index", record.settings, record.inputs, "build-index")
        == "its output is missing or unreadable"
    )
    # a bundle copied elsewhere: the same inputs' versions, so up to date there too
    moved = tmp_path / "moved"
    shutil.copytree(built, moved)
    assert layout.staleness(moved, "Disease.index", record.settings, record.inputs, "build-index") is None


def test_link_flags_replace_single_settings_of_the_bundle(built, capsys):
    parser = cli.build_parser()

    def spec(*flags):
        from pipelines.cli_link import linker_spec

        args, _ = parser.parse_known_args(
            ["link", "--bundle", str(built), "--input", "x", "--input-format", "jsonl", "--output", "o", *flags]
        )
        return linker_spec(args, detect=True)

    plain = spec()
    assert plain.indexes == (("Disease", str(built / "index" / "Disease")),)
    assert plain.nil_thresholds[0][1] == json.loads((built / "manifest.json").read_text())["link"]["nil"]["Disease"]["threshold"]
    assert plain.embeddings == (("Disease", str(built / "embeddings" / "Disease")),)
    assert spec("--nil-threshold", "Disease=0.5").nil_thresholds == (("Disease", 0.5),)
    assert plain.document_runtime == "torch" and spec("--document-runtime", "onnx-int8").document_runtime == "onnx-int8"
    # on unless the bundle or a flag turns it off; the settings key of each run says which
    assert plain.spelling_variants and not spec("--no-spelling-variants").spelling_variants
    assert spec("--no-spelling-variants").settings_sha256() != plain.settings_sha256()
    stop_list = str(REPO / "models" / "stoplists" / "disease-medic.json")
    assert spec("--stop-list", f"Disease={stop_list}").stop_lists == (("Disease", stop_list),)
    # another index for the type: its own sources, not the bundle's
    overridden = spec("--index", f"Disease={built / 'index' / 'Disease'}x")
    assert overridden.embeddings == () and overridden.names == ()
    assert (
        cli.main(
            [
                "link",
                "--bundle",
                str(built),
                "--input",
                str(ABSTRACTS),
                "--input-format",
                "jsonl",
                "--output",
                "o",
                "--nil-threshold",
                "0.5",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.strip() == (
        "bioel link: error: --nil-threshold 0.5: name the entity type "
        "(--nil-threshold TYPE=VALUE); with --bundle, the bundle's types: Disease"
    )
    with pytest.raises(
        ValueError,
        match=r"^--stop-list Chemical=\.\.\.: the bundle has no entity type Chemical \(its "
        r"types: Disease\); a type of your own needs its --index too$",
    ):
        spec("--stop-list", f"Chemical={stop_list}")


def test_link_refuses_an_output_inside_the_bundle_and_a_folder_that_is_no_bundle(built, capsys):
    assert (
        cli.main(
            [
                "link",
                "--bundle",
                str(built),
                "--input",
                str(ABSTRACTS),
                "--input-format",
                "jsonl",
                "--output",
                str(built / "links"),
            ]
        )
        == 2
    )
    assert f"is inside the --bundle folder {built}" in capsys.readouterr().err
    index = built / "index" / "Disease"
    assert cli.main(["link", "--bundle", str(index), "--input", str(ABSTRACTS), "--input-format", "jsonl", "--output", "o"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"bioel link: error: --bundle {index}: written by pipeline 'build-index', not by `bioel build`"
    )


def test_build_refuses_bad_settings_naming_file_and_field(tmp_path, capsys):
    assert cli.main(build_args(tmp_path / "b", "types.Disease.index.kind=ivf")) == 2
    assert capsys.readouterr().err.strip() == (
        f"bioel build: error: types.Disease.index.kind: 'ivf' is not one of flat, ivf-flat, ivf-pq, hnsw (in {DEMO})"
    )
    assert cli.main(build_args(tmp_path / "b", "types.Disease.ingest.dumps=absent.txt")) == 2
    assert capsys.readouterr().err.strip() == (
        f"bioel build: error: types.Disease.ingest.dumps[0]: no such file: {Path.cwd() / 'absent.txt'}"
    )
    assert not (tmp_path / "b").exists()


def test_the_docs_bundle_example_runs_and_links(built, tmp_path, monkeypatch):
    """docs/python-api.md's first example, `Annotator.from_bundle("demo_output/bundle")`, on the demo bundle."""
    from test_python_api import docs_example

    (tmp_path / "demo_output").mkdir()
    (tmp_path / "demo_output" / "bundle").symlink_to(built)
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(
            compile(docs_example("Link with a bundle: `Annotator.from_bundle`"), "docs/python-api.md", "exec"),
            {"__name__": "docs"},
        )
    lines = printed.getvalue().splitlines()
    assert lines[0] == "['Disease']"
    assert lines[1] == "'subacute delirium' -> D003693 (subacute delirium, 1.000)"
    assert lines[2].startswith("'delirium, mixed origin' -> D003693 (delirium of mixed origin, 0.9")
    assert any(line.startswith("22 30 delirium D003693 ") for line in lines[3:]), lines


def test_a_model_cards_text_changes_no_model_digest(tmp_path):
    """A card's text (scores recorded, a command re-rendered) changes no vector: the digest a build's stages compare
    leaves the card out; every other file of the folder counts."""
    from bioel_core.models.cards import CARD_JSON, CARD_MD

    assert set(layout.MODEL_CARD_FILES) == {CARD_JSON, CARD_MD}
    model = tmp_path / "model"
    shutil.copytree(REPO / "models" / "disease-default", model)
    before = layout.file_digest(model, skip=layout.MODEL_CARD_FILES)
    (model / CARD_MD).write_text((model / CARD_MD).read_text() + "\nscores recorded later\n")
    assert layout.file_digest(model, skip=layout.MODEL_CARD_FILES) == before
    assert layout.file_digest(model) != layout.file_digest(REPO / "models" / "disease-default")  # the copy's check
    (model / "bioel_encoder.json").write_text((model / "bioel_encoder.json").read_text() + " ")
    assert layout.file_digest(model, skip=layout.MODEL_CARD_FILES) != before


def test_a_document_model_retrained_on_its_name_encoder_embeds_nothing_again(tmp_path, capsys):
    """A collective model's KB vectors are its frozen name encoder's: a retrained document side recalibrates and links
    against the bundle's index as it is; a changed name encoder embeds and indexes again."""
    import torch

    from bioel_core.models import CollectiveEncoder, TransformerEncoder, open_model
    from test_models import make_tiny_bert

    bert = make_tiny_bert(tmp_path / "bert")
    names = TransformerEncoder(bert, pooling="mean").save(tmp_path / "names")
    torch.manual_seed(0)
    model, bundle = tmp_path / "model", tmp_path / "bundle"
    CollectiveEncoder(bert, open_model(str(names)), ["Disease"]).save(model)
    args = build_args(bundle, f"model={model}")
    assert cli.main(args) == 0
    assert set(stage_lines(capsys.readouterr().err).values()) == {"running (not built yet)"}

    def retrain(side):
        trained = CollectiveEncoder.load(model)
        with torch.no_grad():
            if side == "document":
                next(trained.document.parameters()).add_(0.01)
                trained.mention.weight.mul_(1.5)
            else:
                trained.names.model.embeddings.word_embeddings.weight.add_(0.01)
        trained.save(model)
        assert cli.main(args) == 0
        return stage_lines(capsys.readouterr().err)

    lines = retrain("document")
    assert [lines[s] for s in STAGES[:3]] == ["up to date"] * 3
    assert lines["calibrate"] == "running (inputs changed (Disease.model, model))"
    out = tmp_path / "links"
    link = ["link", "--bundle", str(bundle), "--input", str(ABSTRACTS), "--input-format", "jsonl", "--output", str(out)]
    assert cli.main([*link, "--no-quality"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert all(manifest["reconciliation"].values())
    assert manifest["model_version"] == CollectiveEncoder.load(bundle / "models" / "model").fingerprint()
    lines = retrain("names")
    assert lines["Disease.ingest"] == "up to date" and lines["Disease.embed"] == "running (inputs changed (model))"
    assert lines["Disease.index"].startswith("running") and lines["calibrate"].startswith("running")


def test_the_vectors_folder_of_a_collective_model_is_its_name_encoder(tmp_path):
    """The embed stage's model digest is of the files that make the name vectors, told without torch by the folder's
    config, named as bioel_core.models names them."""
    from bioel_core.models.base import CONFIG_FILE
    from bioel_core.models.collective import NAMES_DIR, CollectiveEncoder

    assert (layout.MODEL_CONFIG_FILE, layout.COLLECTIVE, layout.COLLECTIVE_NAMES_DIR) == (
        CONFIG_FILE,
        CollectiveEncoder.encoder_type,
        NAMES_DIR,
    )
    default = REPO / "models" / "disease-default"
    assert layout.vectors_folder(default) == default
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"encoder_type": "collective"}))
    assert layout.vectors_folder(tmp_path) == tmp_path / NAMES_DIR


def test_gpu_workers_links_a_bundle_as_link_does_from_a_copy_without_its_vectors_and_index(built, linked, tmp_path):
    """benchmarks/gpu_workers.py --bundle (what a lent GPU machine runs): the bundle's annotator with its names
    searched in memory, read from the copy benchmarks/device_payload.py stages (no vectors, no index files), annotates
    the sample as `bioel link --bundle` did, up to the float32 rounding the FAISS shards apply (scores within 1e-6),
    which tips no mention across the calibrated NIL threshold."""
    from benchmarks.device_payload import copy_for_gpu_workers
    from benchmarks.gpu_workers import bundle_spec, embed_rate, in_memory_spec, link_rate, main
    from bioel_core.corpora import read_jsonl
    from bioel_core.tables import read_table

    copy = tmp_path / "bundle"
    copy_for_gpu_workers(built, copy)
    assert not list(copy.glob("index/*/gen-*/shards")) and not list(copy.glob("embeddings/*/gen-*/embeddings"))
    spec = bundle_spec(str(copy), None)("cpu")
    vectors = {t: embed_rate(spec.model, kb, "cpu", 256, None)[1] for t, kb in spec.names}
    figures, rows = link_rate(in_memory_spec(spec, vectors).open(), read_jsonl(ABSTRACTS), "cpu", batch_size=4)
    expected = read_table(linked, "annotations").to_pylist()
    order = lambda r: (r["doc_id"], r["start"], r["end"], r["concept_id"])  # noqa: E731
    rows, expected = sorted(rows, key=order), sorted(expected, key=order)
    assert len(rows) == len(expected) == figures["annotations"] > 0
    assert max(abs(a["score"] - b["score"]) for a, b in zip(rows, expected)) < 1e-6
    # the calibrated NIL threshold lies between the sample's scores, not at one that rounding could tip (it did)
    assert [{**r, "score": 0} for r in rows] == [{**r, "score": 0} for r in expected]

    report = main(["--bundle", str(copy), "--input", str(ABSTRACTS), "--devices", "cpu", "--limit", "3", "--processes", "2"])
    assert report["documents"] == 3 and report["detector"] == "dictionary" and report["link"]["cpu"]["dead_letters"] == []
    # two link processes at once (as workers sharing a machine): each links the 3 abstracts as the one process did
    together = report["link"]["cpu x2"]
    assert together["per_process_documents"] == [3, 3] and together["documents"] == 6
    assert together["same_rows_as_one_process"] is True and together["abstracts_per_s"] > 0
