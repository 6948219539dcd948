"""An entity type's scope in its KB (bioel_core.kb.scope, IngestSettings.scope): the tree, semantic-type and category
filters of the readers, their settings' errors, and what the ingest manifest counts.

tests/fixtures/mesh_tsv_scope holds real rows of the MeSH 2024 thesaurus and trees TSVs (../shared/data/mesh):
Calcimycin (D02, D03, D04: a chemical), Angiotensin II (hormones D06, peptides D12.644, proteins D12.776, D23), DNA-Binding
Proteins (D12.776 only), Glucosephosphate Dehydrogenase (enzymes D08.811 only), Ataxia Telangiectasia (C only) and
Carbohydrates (a category descriptor: no tree number in the trees file). tests/fixtures/umls_semgroups/SemGroups.txt
has lines of NLM's SemGroups.txt (ABBR|Group name|TUI|Type name, as NLM documents and publishes them).
"""

import pytest

from bioel_core.kb import get_reader
from bioel_core.kb.scope import EXCLUDED, NO_TREE_NUMBER, NOT_INCLUDED, Scope, under
from bioel_core.records import ConceptRecord, ReadStats
from bioel_core.settings import IngestSettings, SettingsError, from_mapping
from conftest import FIXTURES

MESH = [str(FIXTURES / "mesh_tsv_scope/thesaurus.tsv"), str(FIXTURES / "mesh_tsv_scope/trees.tsv")]
SEMGROUPS = str(FIXTURES / "umls_semgroups/SemGroups.txt")
UMLS = [str(FIXTURES / "umls" / f) for f in ("MRCONSO.RRF", "MRSTY.RRF")]
# BC5CDR's chemical guideline, as the shipped diseases-chemicals bundles declare it
CHEMICALS = {"tree_include": ["D"], "tree_exclude": ["D08.811", "D08.244", "D08.622", "D12.776", "D13.444", "D13.150"]}


def concepts_and_stats(reader, paths):
    items = list(reader.read(paths))
    return [i.concept_id for i in items if isinstance(i, ConceptRecord)], [i for i in items if isinstance(i, ReadStats)]


def error_of(data: dict) -> str:
    with pytest.raises(SettingsError) as err:
        from_mapping(IngestSettings, data).reader_kwargs()
    return str(err.value)


def test_a_tree_number_lies_under_a_branch_by_whole_segments():
    assert under("D08.811.277", ["D08.811"]) and under("D08.811", ["D08.811"]) and under("D08.811", ["D"])
    assert not under("D08.8110", ["D08.811"]) and not under("D08.81", ["D08.811"]) and not under("C10.228", ["D"])
    assert under("D02.455.426.100.440.050/C112297", ["D02.455.426.100.440.050"])  # CTD's extension of a tree number


def test_several_tree_numbers_are_kept_when_one_is_included_and_not_excluded():
    scope = Scope.of(CHEMICALS)
    assert scope.tree_reason(["D06.472.699.094.078", "D12.776.631.650.070.078"]) is None  # angiotensin II
    assert scope.tree_reason(["D08.811.682.047.150.300"]) == EXCLUDED  # an enzyme only
    assert scope.tree_reason(["C10.562.100", "D12.776.260"]) == EXCLUDED  # its only included number is excluded
    assert scope.tree_reason(["C10.562.100"]) == NOT_INCLUDED
    assert scope.tree_reason([]) == NO_TREE_NUMBER
    assert Scope.of({"tree_exclude": ["D12.776"]}).tree_reason([]) is None  # nothing to exclude it for
    assert Scope().tree_reason([]) is None


def test_mesh_tsv_keeps_the_chemicals_of_the_guideline_and_counts_every_row_it_drops():
    concepts, stats = concepts_and_stats(get_reader("mesh-tsv", scope=CHEMICALS), MESH)
    assert concepts == ["D000001", "D000804"]  # Calcimycin, Angiotensin II
    thesaurus = next(s for s in stats if s.source.endswith("thesaurus.tsv"))
    assert thesaurus.skipped_by_filter == {EXCLUDED: 6, NOT_INCLUDED: 3, NO_TREE_NUMBER: 2}
    assert thesaurus.records_accepted == 6 and thesaurus.reconciles()
    # without an include, a descriptor without tree numbers is kept and so is every non-D one
    concepts, _ = concepts_and_stats(get_reader("mesh-tsv", scope={"tree_exclude": CHEMICALS["tree_exclude"]}), MESH)
    assert concepts == ["D000001", "D000804", "D001260", "D002241"]


def test_mesh_xml_judges_descriptors_and_keeps_supplementary_records():
    paths = [str(FIXTURES / "mesh_xml/desc2024.xml"), str(FIXTURES / "mesh_xml/supp2024.xml")]
    everything, _ = concepts_and_stats(get_reader("mesh-xml"), paths)
    concepts, stats = concepts_and_stats(get_reader("mesh-xml", scope={"tree_include": ["C"]}), paths)
    supplementary = [c for c in everything if c.startswith("C")]
    assert supplementary and "D000001" in everything  # Calcimycin, D03
    assert concepts == [c for c in everything if c != "D000001"]
    desc = next(s for s in stats if s.source.endswith("desc2024.xml"))
    assert desc.skipped_by_filter == {NOT_INCLUDED: 1} and desc.reconciles()


def test_ctd_rows_are_judged_by_their_tree_numbers_else_their_parents_and_diseases_by_category(tmp_path):
    chemicals = str(FIXTURES / "ctd/CTD_chemicals.tsv")
    everything, _ = concepts_and_stats(get_reader("ctd-chemicals"), [chemicals])
    concepts, stats = concepts_and_stats(get_reader("ctd-chemicals", scope={"tree_include": ["D03"]}), [chemicals])
    assert "C112297" in concepts and "D000001" in concepts and "D001241" not in concepts  # aspirin is D02 only
    assert stats[0].skipped_by_filter == {NOT_INCLUDED: len(everything) - len(concepts)} and stats[0].reconciles()
    # a row without TreeNumbers: its ParentTreeNumbers place it
    header = "# Fields:\n# ChemicalName\tChemicalID\tCasRN\tDefinition\tParentIDs\tTreeNumbers\tParentTreeNumbers\tSynonyms\n#\n"
    rows = "Orphan\tMESH:C000001\t\t\tMESH:D012459\t\tD08.811.277\t\nPlaced\tMESH:C000002\t\t\tMESH:D001241\t\tD02.241\t\n"
    (tmp_path / "CTD_chemicals.tsv").write_text(header + rows)
    concepts, stats = concepts_and_stats(get_reader("ctd-chemicals", scope=CHEMICALS), [str(tmp_path / "CTD_chemicals.tsv")])
    assert concepts == ["C000002"] and stats[0].skipped_by_filter == {EXCLUDED: 1}
    diseases = str(FIXTURES / "ctd/CTD_diseases.tsv")
    concepts, stats = concepts_and_stats(get_reader("ctd-diseases", scope={"categories": ["Cancer"]}), [diseases])
    assert "D000008" in concepts and "C538288" not in concepts  # Abdominal Neoplasms; a chromosome deletion
    assert set(stats[0].skipped_by_filter) == {"out of scope (scope.categories): no selected category"}


def test_umls_semantic_groups_are_read_from_the_users_semgroups_file():
    settings = from_mapping(
        IngestSettings,
        {"format": "umls", "dumps": UMLS, "scope": {"semantic_groups": ["DISO"], "semantic_groups_file": SEMGROUPS}},
    )
    kwargs = settings.reader_kwargs()
    assert kwargs["scope"] == {"semantic_types": ["T019", "T046", "T047", "T191"]}
    concepts, _ = concepts_and_stats(get_reader("umls", **kwargs), UMLS)
    assert concepts == ["C0004096", "C0011849", "C0027051"]
    chem = from_mapping(
        IngestSettings,
        {"format": "umls", "dumps": UMLS, "scope": {"semantic_groups": ["CHEM"], "semantic_groups_file": SEMGROUPS}},
    )
    concepts, stats = concepts_and_stats(get_reader("umls", **chem.reader_kwargs()), UMLS)
    assert concepts == [] and "out of scope (scope.semantic_types): no selected semantic type" in stats[0].skipped_by_filter


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"format": "mesh-tsv", "dumps": MESH, "scope": {"tree_include": ["D08.8"]}},
            "scope.tree_include[0]: 'D08.8' is not a MeSH tree branch",
        ),
        (
            {"format": "mesh-tsv", "dumps": MESH, "scope": {"tree_include": ["D12.776"], "tree_exclude": ["D12"]}},
            "scope.tree_exclude: excludes every branch tree_include keeps (D12.776): nothing would be kept",
        ),
        (
            {"format": "medic-biosyn", "dumps": MESH, "scope": {"tree_include": ["C"]}},
            "scope.tree_include: format medic-biosyn does not read this option (it takes no scope settings)",
        ),
        (
            {"format": "mesh-tsv", "dumps": MESH, "scope": {"categories": ["Cancer"]}},
            "scope.categories: format mesh-tsv does not read this option (its scope settings: tree_include, tree_exclude)",
        ),
        (
            {"format": "umls", "dumps": UMLS, "scope": {"semantic_types": ["047"]}},
            "scope.semantic_types[0]: '047' is not a semantic type's TUI (T047)",
        ),
        (
            {"format": "umls", "dumps": UMLS, "scope": {"semantic_groups": ["DISO"]}},
            "scope.semantic_groups_file: required by semantic_groups",
        ),
        (
            {"format": "umls", "dumps": UMLS, "scope": {"semantic_groups": ["DISX"], "semantic_groups_file": SEMGROUPS}},
            f"scope.semantic_groups[0]: 'DISX' is not a group of {SEMGROUPS} (CHEM, DISO)",
        ),
        (
            {"format": "umls", "dumps": UMLS, "scope": {"semantic_groups": ["DISO"], "semantic_groups_file": UMLS[1]}},
            f"scope.semantic_groups_file: {UMLS[1]}: line 1: expected ABBR|Group name|TUI|Type name",
        ),
    ],
)
def test_scope_errors_name_the_setting(data, message):
    assert error_of(data).startswith(message)


def test_the_ingest_manifest_counts_what_the_scope_drops_and_refuses_a_scope_that_keeps_nothing(tmp_path):
    from bioel_core.guards import EmptyOutputError
    from pipelines import ingest_kb
    from pipelines.options import pipeline_options

    options = pipeline_options(["--runner", "FnApiRunner"])
    manifest = ingest_kb.run("mesh-tsv", MESH, str(tmp_path / "kb"), options, reader_options={"scope": CHEMICALS})
    assert manifest["out_of_scope"] == {EXCLUDED: 6, NOT_INCLUDED: 3, NO_TREE_NUMBER: 2}
    assert manifest["outputs"]["concepts"]["rows"] == 2 and manifest["outputs"]["dead_letter"]["rows"] == 0
    assert manifest["counts"]["filtered"] == 11 and all(manifest["reconciliation"].values())
    assert "out_of_scope" not in ingest_kb.run("mesh-tsv", MESH, str(tmp_path / "all"), options)
    with pytest.raises(EmptyOutputError, match=r"nothing published; filtered: out of scope \(scope.tree_include\)"):
        ingest_kb.run("mesh-tsv", MESH, str(tmp_path / "none"), options, reader_options={"scope": {"tree_include": ["B"]}})


def test_a_bundle_declares_a_scope_and_a_changed_scope_re_runs_the_types_stages(tmp_path, capsys, one_torch_thread):
    from pipelines import cli
    from conftest import REPO

    bundle_file = tmp_path / "scoped.toml"
    bundle_file.write_text(
        f'model = "{REPO / "models" / "disease-default"}"\n'
        "[types.Chemical.ingest]\n"
        f'format = "mesh-tsv"\ndumps = {MESH!r}\nnum_shards = 1\n'
        "[types.Chemical.ingest.scope]\n"
        f"tree_include = {CHEMICALS['tree_include']!r}\ntree_exclude = {CHEMICALS['tree_exclude']!r}\n"
        "[types.Chemical.embed]\nnum_shards = 1\n[types.Chemical.index]\nnum_shards = 1\n"
    )
    out = tmp_path / "bundle"

    def build(*assignments) -> dict[str, str]:
        sets = [a for assignment in assignments for a in ("--set", assignment)]
        code = cli.main(["build", str(bundle_file), "--output", str(out), "--no-quality", *sets, "--runner", "FnApiRunner"])
        err = capsys.readouterr().err
        assert code == 0, err
        lines: dict[str, str] = {}  # each stage's first line: whether it runs, and why
        for parts in (line.split(": ", 2) for line in err.splitlines()):
            if len(parts) == 3 and parts[0] == "build":
                lines.setdefault(parts[1], parts[2])
        return lines

    def kb_manifest() -> dict:
        from bioel_core.tables import read_manifest

        return read_manifest(out / "kb" / "Chemical")

    assert build()["Chemical.ingest"].startswith("running")
    assert kb_manifest()["out_of_scope"] == {EXCLUDED: 6, NOT_INCLUDED: 3, NO_TREE_NUMBER: 2}
    assert kb_manifest()["outputs"]["concepts"]["rows"] == 2
    lines = build("types.Chemical.ingest.scope.tree_exclude=[]")
    assert lines["Chemical.ingest"] == "running (settings changed (scope))"
    assert lines["Chemical.embed"].startswith("running") and lines["Chemical.index"].startswith("running")
    assert kb_manifest()["outputs"]["concepts"]["rows"] == 4  # the enzyme and the protein are back
    code = cli.main(["build", str(bundle_file), "--output", str(out), "--set", "types.Chemical.ingest.scope.tree_include=D08.8"])
    assert code == 2
    assert "types.Chemical.ingest.scope.tree_include[0]: 'D08.8' is not a MeSH tree branch" in capsys.readouterr().err
