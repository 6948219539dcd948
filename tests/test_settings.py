"""The typed stage contracts (bioel_core.settings): each validated once, from Python or from a mapping, with errors
that name the field by its dotted path; `--set` overrides; paths taken from the file's folder or the working one."""

import argparse

import pytest

from bioel_core.settings import (
    BundleSettings,
    CalibrateSettings,
    EmbedSettings,
    EndToEndSettings,
    EvaluateSettings,
    IndexSettings,
    IngestSettings,
    LinkRunSettings,
    LinkSettings,
    ProbeSettings,
    QualitySettings,
    ReaderOptions,
    RefreshSettings,
    ReportSettings,
    RerankSettings,
    SettingsError,
    StageRun,
    fields_of,
    from_mapping,
    load_bundle_file,
    to_mapping,
)

INGEST = {"format": "medic-biosyn", "dumps": ["medic.txt"]}
LINK_RUN = {"input": ["a.jsonl"], "input_format": "jsonl", "output": "links"}
REFRESH = {"old": "a", "new": "b", "model": "m", "embeddings": "e", "index": "i", "output_embeddings": "oe", "output_index": "oi"}


def error_of(cls, data, prefix=""):
    with pytest.raises(SettingsError) as err:
        from_mapping(cls, data, prefix)
    return str(err.value)


@pytest.mark.parametrize(
    "cls, data, message",
    [
        (IngestSettings, {"format": "medic", "dumps": ["x"]}, "format: 'medic' is not one of biosyn-dict, ctd-chemicals"),
        (IngestSettings, {"format": "umls"}, "dumps: required: the KB dump files"),
        (IngestSettings, {"format": "umls", "dumps": []}, "dumps: no KB dump given (a umls file)"),
        (IngestSettings, {**INGEST, "num_shards": 0}, "num_shards: must be at least 1, got 0"),
        (IngestSettings, {**INGEST, "num_shard": 2}, "num_shard: unknown setting; did you mean num_shards?"),
        (
            IngestSettings,
            {**INGEST, "reader": {"mesh_exclude_permuted": True}},
            "reader.mesh_exclude_permuted: format medic-biosyn does not read this option (it takes no reader options)",
        ),
        (
            IngestSettings,
            {"format": "mesh-tsv", "dumps": ["x"], "reader": {"umls_sabs": ["MSH"]}},
            "reader.umls_sabs: format mesh-tsv does not read this option (its reader options: mesh_exclude_permuted)",
        ),
        (IngestSettings, {**INGEST, "keep_case": "yes"}, "keep_case: expected true or false, got 'yes'"),
        (IngestSettings, {**INGEST, "dumps": [""]}, "dumps[0]: expected a path, got an empty string"),
        (EmbedSettings, {"batch_size": 2.5}, "batch_size: expected a whole number, got 2.5 (float)"),
        (EmbedSettings, {"pooling": "max"}, "pooling: 'max' is not one of cls, mean"),
        (IndexSettings, {"kind": "ivf"}, "kind: 'ivf' is not one of flat, ivf-flat, ivf-pq, hnsw"),
        (IndexSettings, {"pq_nbits": 17}, "pq_nbits: must be at most 16, got 17"),
        (IndexSettings, {"refine": "fp32"}, "refine: 'fp32' is not one of flat, fp16, none, sq8"),
        (LinkSettings, {"detector": "span"}, "detector: 'span' is not one of dictionary, model, both"),
        (LinkSettings, {"copy_formats": ["parquet"]}, "copy_formats[0]: 'parquet' is not one of pubtator, bioc-json, bioc-xml"),
        (LinkSettings, {"types": {"Disease": {"nil_threshold": "high"}}}, "types.Disease.nil_threshold: expected a number"),
        (LinkSettings, {"types": {"two words": {}}}, "types.two words: not a valid name: an entity type is a letter"),
        (
            CalibrateSettings,
            {"gold": "dev.txt", "gold_format": "jsonl"},
            "gold_format: 'jsonl' is not one of pubtator, bioc-xml, bioc-json",
        ),
        (CalibrateSettings, {}, "gold: required: gold annotations"),
        (QualitySettings, {"fail_on": "error"}, "fail_on: 'error' is not one of critical, warning, none"),
        (StageRun, {"input": "kb"}, "output: required: the output folder"),
        (LinkRunSettings, {"input": [], "input_format": "jsonl", "output": "o"}, "input: no corpus file given"),
        (LinkRunSettings, {**LINK_RUN, "input_format": "xml"}, "input_format: 'xml' is not one of pubmed-xml, pubtator"),
        (LinkRunSettings, {**LINK_RUN, "mentions": "gold"}, "mentions: 'gold' is not one of detect, given"),
        (LinkRunSettings, {**LINK_RUN, "id_prefix": "mesh"}, "id_prefix: 'mesh' is not one of none, vocabulary"),
        (LinkRunSettings, {**LINK_RUN, "batch_size": 0}, "batch_size: must be at least 1, got 0"),
        (RerankSettings, {"rerank_depth": 0}, "rerank_depth: must be at least 1, got 0"),
        (RefreshSettings, {"old": "a"}, "new: required: the ingest-kb output of the new KB version"),
        (RefreshSettings, {**REFRESH, "examples": -1}, "examples: must be at least 0, got -1"),
        (ReportSettings, {"output": "q"}, "input: required: an output folder"),
        (EvaluateSettings, {"dataset": "d", "split": "train"}, "split: 'train' is not one of dev, test"),
        (EvaluateSettings, {"dataset": "d", "linker": "bm25"}, "linker: 'bm25' is not one of dense, exact, generative"),
        (
            EvaluateSettings,
            {"dataset": "d", "retriever_linker": "tfidf"},
            "retriever_linker: 'tfidf' is not one of dense, hybrid",
        ),
        (
            EvaluateSettings,
            {"dataset": "d", "names": "kb", "linker_dir": "l"},
            "linker_dir: give one source of names, not both names and linker_dir",
        ),
        (EvaluateSettings, {"dataset": "d", "record_in_card": True}, "record_in_card: needs a linker made of a model"),
        (EvaluateSettings, {"dataset": "d", "k": 0}, "k: must be at least 1, got 0"),
        (ProbeSettings, {"dataset": "d", "pooling": "max"}, "pooling: 'max' is not one of cls, mean"),
        (ProbeSettings, {}, "dataset: required: a BioSyn-format dataset folder"),
        (EndToEndSettings, {"gold": "g"}, "pred: required: predicted annotations"),
        (EndToEndSettings, {"gold": "g", "pred": "p", "pred_format": "conll"}, "pred_format: 'conll' is not one of"),
        (EndToEndSettings, {"gold": "g", "pred": "p", "types": "Disease"}, "types: expected a list, got 'Disease'"),
    ],
)
def test_each_contract_names_the_field_it_refuses(cls, data, message):
    assert error_of(cls, data).startswith(message)


def test_errors_name_the_whole_dotted_path_and_python_construction_validates_too():
    bundle = {"types": {"Disease": {"ingest": INGEST, "index": {"kind": "ivf"}}}}
    assert error_of(BundleSettings, bundle) == "types.Disease.index.kind: 'ivf' is not one of flat, ivf-flat, ivf-pq, hnsw"
    assert error_of(IndexSettings, {"kind": "ivf"}, "types.Chemical.index").startswith("types.Chemical.index.kind:")
    with pytest.raises(SettingsError, match=r"^kind: 'ivf' is not one of"):
        IndexSettings(kind="ivf")
    with pytest.raises(SettingsError, match=r"^umls_languages\[0\]: expected a string, got 1 \(int\)"):
        ReaderOptions(umls_languages=[1])


def test_a_bundle_refuses_settings_the_build_owns():
    for where, value, message in (
        ("link", {"index": "idx"}, "types.Disease.link.index: set by the build"),
        ("link", {"model": "m"}, "types.Disease.link.model: a type's model is embed.model"),
    ):
        assert error_of(BundleSettings, {"types": {"Disease": {"ingest": INGEST, where: value}}}).startswith(message)
    assert error_of(BundleSettings, {"types": {}}).startswith("types: no entity type declared")
    assert error_of(BundleSettings, {"link": {"model": "m"}, "types": {"D": {"ingest": INGEST}}}).startswith("link.model:")


def test_contract_round_trips_through_a_mapping():
    settings = from_mapping(
        BundleSettings,
        {
            "model": "/m",
            "calibrate": {"gold": "/dev.txt"},
            "types": {
                "Chemical": {
                    "ingest": {"format": "mesh-tsv", "dumps": ["/t.tsv"], "scope": {"tree_include": ["D"]}},
                    "index": {"kind": "hnsw", "num_shards": 2},
                    "link": {"nil_threshold": 0.5},
                }
            },
        },
    )
    assert from_mapping(BundleSettings, to_mapping(settings)) == settings
    chemical = settings.types["Chemical"]
    assert chemical.ingest.reader_kwargs() == {"include_permuted": True, "scope": {"tree_include": ["D"]}}
    assert chemical.index.spec().kind == "hnsw" and settings.model_of("Chemical") == "/m"


def test_paths_are_taken_from_the_file_and_set_paths_from_the_working_folder(tmp_path):
    (tmp_path / "conf").mkdir()
    bundle = tmp_path / "conf" / "b.toml"
    bundle.write_text(
        'model = "../models/m"\n[types.Disease.ingest]\nformat = "medic-biosyn"\ndumps = ["kb/medic.txt"]\n'
        "[types.Disease.link]\nnil_threshold = 1\n"
    )
    settings = load_bundle_file(
        bundle, ["types.Disease.embed.model=here/model", "types.Disease.index.num_shards=2"], cwd=tmp_path / "work"
    )
    assert settings.model == str(tmp_path / "models" / "m")
    assert settings.types["Disease"].ingest.dumps == [str(tmp_path / "conf" / "kb" / "medic.txt")]
    assert settings.model_of("Disease") == str(tmp_path / "work" / "here" / "model")
    assert settings.types["Disease"].index.num_shards == 2
    assert settings.types["Disease"].link.nil_threshold == 1.0  # a TOML integer is a number
    lists = load_bundle_file(bundle, ["types.Disease.ingest.dumps=a.txt,b.txt", "name=2024"], cwd=tmp_path)
    assert lists.types["Disease"].ingest.dumps == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert lists.name == "2024"


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("types.Disease.index.kind=ivf", "types.Disease.index.kind: 'ivf' is not one of"),
        ("types.Disease.index.knd=flat", "types.Disease.index.knd: unknown setting; did you mean kind?"),
        ("types.Disease.index=flat", "types.Disease.index: a table; name one of its settings"),
        ("types.Disease.index.kind.x=1", "types.Disease.index.kind.x: kind is a single setting"),
        ("types.Disease.index.kind", "'types.Disease.index.kind': expected NAME=VALUE"),
    ],
)
def test_set_overrides_name_the_setting(tmp_path, assignment, message):
    bundle = tmp_path / "b.toml"
    bundle.write_text('[types.Disease.ingest]\nformat = "medic-biosyn"\ndumps = ["medic.txt"]\n')
    with pytest.raises(SettingsError) as err:
        load_bundle_file(bundle, [assignment])
    assert str(err.value).startswith(message)
    assert str(bundle) in str(err.value) or assignment.count("=") == 0


def test_bad_bundle_files_are_named(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("[types.Disease\n")
    with pytest.raises(ValueError, match=r"broken.toml: not a readable TOML bundle file"):
        load_bundle_file(broken)
    with pytest.raises(FileNotFoundError, match=r"bundle file .*absent.toml"):
        load_bundle_file(tmp_path / "absent.toml")


def test_check_inputs_names_the_missing_one(tmp_path):
    (tmp_path / "medic.txt").write_text("D000001||a\n")
    ensemble = tmp_path / "ensemble"
    ensemble.mkdir()
    (ensemble / "bioel_encoder.json").write_text('{"encoder_type": "ensemble"}')
    ok = {"types": {"Disease": {"ingest": {"format": "medic-biosyn", "dumps": ["medic.txt"]}}}}
    from_mapping(BundleSettings, ok, base=tmp_path).check_inputs()
    for change, message in (
        (("types", "Disease", "ingest", "dumps"), ["gone.txt"]),
        (("calibrate",), {"gold": "dev.txt"}),
        (("model",), "ensemble"),
    ):
        data = {"types": {"Disease": {"ingest": {"format": "medic-biosyn", "dumps": ["medic.txt"]}}}}
        table = data
        for key in change[:-1]:
            table = table[key]
        table[change[-1]] = message
        with pytest.raises(SettingsError) as err:
            from_mapping(BundleSettings, data, base=tmp_path).check_inputs()
        field = {
            "dumps": "types.Disease.ingest.dumps[0]: no such file",
            "calibrate": "calibrate.gold: no such file or folder",
            "model": "model: ",
        }[change[-1]]
        assert str(err.value).startswith(field)
    assert "an ensemble refers to its member models' folders" in str(err.value)


def test_check_inputs_refuses_a_span_detector_without_a_collective_model():
    from conftest import REPO

    bundle = REPO / "bundles" / "demo.toml"
    with pytest.raises(SettingsError, match=r"^link.detector: 'both' needs a collective model as the bundle's `model`"):
        load_bundle_file(bundle, ["link.detector=both"]).check_inputs()
    collective = str(REPO / "models" / "bc5cdr-collective-small")
    with pytest.raises(SettingsError, match=r"^types.Disease.embed.model: the collective model's one pass links every"):
        load_bundle_file(
            bundle,
            ["link.detector=model", f"model={collective}", f"types.Disease.embed.model={REPO / 'models' / 'disease-default'}"],
        ).check_inputs()
    load_bundle_file(bundle, ["link.detector=both", f"model={collective}"]).check_inputs()


def test_flags_can_be_made_from_the_fields():
    """Each field carries what a flag needs: name, type, default, help, choices (the CLI migration generates them)."""
    parser = argparse.ArgumentParser()
    for info in fields_of(IndexSettings):
        kwargs = {"help": info.help, "default": info.default}
        if info.choices:
            kwargs["choices"] = info.choices
        parser.add_argument("--" + info.name.replace("_", "-"), **kwargs)
    args = parser.parse_args(["--kind", "hnsw", "--num-shards", "2"])
    assert args.kind == "hnsw" and args.hnsw_m == 32 and all(f.help for f in fields_of(IndexSettings))
    assert {f.name for f in fields_of(IndexSettings)} - {"num_shards", "faiss_threads"} == set(
        IndexSettings().spec().to_dict()
    )  # every IndexSpec parameter, one contract field each


def test_the_shipped_bundle_files_are_valid():
    """Every bundle file under bundles/ and benchmarks/ parses and validates; those whose data is here find it all."""
    from conftest import REPO, SHARED_DATA

    files = sorted((REPO / "bundles").glob("*.toml")) + sorted((REPO / "benchmarks").glob("*.bundle.toml"))
    assert {f.name for f in files} >= {"demo.toml", "diseases-chemicals.toml", "umls.toml", "diseases-chemicals.bundle.toml"}
    for f in files:
        settings = load_bundle_file(f)
        assert settings.name and settings.types
    load_bundle_file(REPO / "bundles" / "demo.toml").check_inputs()
    if SHARED_DATA.exists():
        load_bundle_file(REPO / "benchmarks" / "diseases-chemicals.bundle.toml").check_inputs()
    best = load_bundle_file(REPO / "bundles" / "diseases-chemicals.toml")
    assert best.link.detector == "both" and best.model.endswith("models/cdr-ncbi-collective-1layer-ff384")
    chemical = best.types["Chemical"].ingest.reader_kwargs()["scope"]
    assert chemical["tree_include"] == ["D"] and "D12.776" in chemical["tree_exclude"]  # BC5CDR's chemical guideline
    for f in (REPO / "bundles" / "diseases-chemicals.toml", REPO / "benchmarks" / "diseases-chemicals.bundle.toml"):
        types = load_bundle_file(f).types  # short forms need context (issue 42 item 3)
        assert (types["Disease"].link.short_form_support, types["Chemical"].link.short_form_support) == (0.1, 0.2)


def test_the_umls_bundle_takes_each_type_from_its_semantic_group():
    from bioel_core.kb import get_reader
    from bioel_core.records import ConceptRecord
    from conftest import FIXTURES, REPO

    fixtures = FIXTURES / "umls"
    dumps = f"{fixtures / 'MRCONSO.RRF'},{fixtures / 'MRSTY.RRF'}"
    settings = load_bundle_file(
        REPO / "bundles" / "umls.toml", [f"types.Disease.ingest.dumps={dumps}", f"types.Chemical.ingest.dumps={dumps}"]
    )
    settings.check_inputs()
    found = {}
    for name, t in settings.types.items():
        reader = get_reader(t.ingest.format, **t.ingest.reader_kwargs())
        found[name] = [i.concept_id for i in reader.read(t.ingest.dumps) if isinstance(i, ConceptRecord)]
    assert found == {"Disease": ["C0004096", "C0011849", "C0027051"], "Chemical": []}  # the fixtures' are all disorders


def test_docs_describe_every_bundle_setting():
    from conftest import REPO

    from bioel_core.settings import ScopeSettings, TypeSettings

    page = (REPO / "docs" / "bundles.md").read_text()
    classes = (BundleSettings, TypeSettings, IngestSettings, ReaderOptions, ScopeSettings, EmbedSettings, IndexSettings)
    for cls in (*classes, CalibrateSettings):
        for info in fields_of(cls):
            assert f"`{info.name}`" in page, f"docs/bundles.md does not describe {cls.__name__}.{info.name}"
    for name in ("detector", "copy_formats", "stop_list", "nil_threshold"):
        assert f"`{name}`" in page


@pytest.mark.parametrize(
    "support, message",
    [
        (-1, "types.Disease.short_form_support: must be at least 0, got -1.0"),
        (2.0, r"types.Disease.short_form_support: 2.0: a share of occurrences and a span probability, so in \[0, 1\]"),
        ("x", "types.Disease.short_form_support: expected a number, got 'x'"),
    ],
)
def test_a_short_form_support_outside_0_1_is_named_by_its_type(support, message, tmp_path):
    link = {"types": {"Disease": {"index": str(tmp_path), "short_form_support": support}}}
    with pytest.raises(SettingsError, match="^" + message + "$"):
        from_mapping(LinkSettings, link).annotator_spec()
