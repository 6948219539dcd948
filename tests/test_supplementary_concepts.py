"""MeSH supplementary concepts (`C...` ids) linked end to end: a user with MeSH's descriptor and supplementary record
files (descYYYY.xml + suppYYYY.xml, the committed fixtures) ingests both as ONE entity type's KB, embeds and indexes it
(the tiny test model) and links; once with the verbs, once through a bundle file; `bioel evaluate-e2e --kb BUNDLE`
and benchmarks/e2e_bc5cdr.py's report then say how many gold ids those KBs cannot name."""

from pathlib import Path

import pytest

from benchmarks.e2e_bc5cdr import kb_gap_lines
from bioel_core.corpora import read_pubtator
from bioel_core.evaluation.concepts import kb_folders, unlinkable_in
from bioel_core.models import TransformerEncoder
from bioel_core.tables import read_table
from pipelines import cli
from test_models import make_tiny_bert

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mesh_xml"
DESC, SUPP = FIXTURES / "desc2024.xml", FIXTURES / "supp2024.xml"
# quetiapine (C069541) is a supplementary concept the fixtures do not hold
GOLD = (
    "9000001|t|Olanzapine versus calcimycin in rats.\n"
    "9000001|a|Zyprexa, quetiapine and olanzapine were given.\n"
    "9000001\t0\t10\tOlanzapine\tChemical\tC076029\n"
    "9000001\t18\t28\tcalcimycin\tChemical\tD000001\n"
    "9000001\t38\t45\tZyprexa\tChemical\tC076029\n"
    "9000001\t47\t57\tquetiapine\tChemical\tC069541\n"
    "9000001\t62\t72\tolanzapine\tChemical\tC076029\n"
    "\n"
)
# every mention a KB name, quetiapine aside, linked to its own record, the supplementary ones to their C ids
LINKED = [("Olanzapine", "C076029"), ("calcimycin", "D000001"), ("Zyprexa", "C076029"), ("olanzapine", "C076029")]
BEAM = ["--runner", "FnApiRunner"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("model")
    return str(TransformerEncoder(make_tiny_bert(root / "tiny-bert"), pooling="mean").save(root / "model"))


@pytest.fixture(scope="module")
def gold(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gold") / "gold.pubtator"
    path.write_text(GOLD)
    return path


def linked(out: Path) -> list[tuple[str, str]]:
    """(mention, concept id) of a link output's PubTator copy, in text order."""
    return [(m.text, m.concept_ids[0]) for d in read_pubtator(out) for m in sorted(d.mentions, key=lambda m: m.start)]


def test_desc_and_supp_dumps_are_one_kb_whose_c_ids_link(model, gold, tmp_path):
    kb, emb, index, out = (tmp_path / name for name in ("kb", "emb", "index", "links"))
    assert cli.main(["ingest-kb", "--input-format", "mesh-xml", "--input", str(DESC), str(SUPP), "--output", str(kb), *BEAM]) == 0
    concepts = {r["concept_id"]: r for r in read_table(kb, "concepts").to_pylist()}
    assert {"D000001", "D000163", "D009203", "C076029", "C000002"} <= set(concepts)
    assert concepts["C076029"]["alt_ids"] == ["MESH:D001569"] and concepts["D000001"]["alt_ids"] == []
    assert cli.main(["embed", "--model", model, "--input", str(kb), "--output", str(emb), *BEAM]) == 0
    assert cli.main(["build-index", "--input", str(emb), "--output", str(index), *BEAM]) == 0
    argv = ["link", "--model", model, "--index", f"Chemical={index}", "--input", str(gold), "--input-format", "pubtator"]
    argv += ["--mentions", "detect", "--output", str(out), "--output-format", "pubtator", "--no-quality", *BEAM]
    assert cli.main(argv) == 0
    assert linked(out) == LINKED
    # the annotations table carries the concept's mapped descriptor as its alt id
    rows = read_table(out, "annotations").to_pylist()
    assert {(r["concept_id"], r["vocabulary"], tuple(r["alt_ids"])) for r in rows if r["concept_id"].startswith("C")} == {
        ("C076029", "MESH", ("MESH:D001569",))
    }


def test_a_bundle_with_desc_and_supp_dumps_links_c_ids_and_counts_what_its_kb_cannot_name(model, gold, tmp_path, capsys):
    toml = tmp_path / "chemicals.toml"
    toml.write_text(
        f"""name = "mesh-chemicals"
model = "{model}"
[link]
detector = "dictionary"
copy_formats = ["pubtator"]
[types.Chemical.ingest]
format = "mesh-xml"
dumps = ["{DESC}", "{SUPP}"]
num_shards = 1
[types.Chemical.embed]
num_shards = 1
[types.Chemical.index]
num_shards = 1
"""
    )
    bundle, out = tmp_path / "bundle", tmp_path / "links"
    assert cli.main(["build", str(toml), "--output", str(bundle), "--no-quality", *BEAM]) == 0
    argv = ["link", "--bundle", str(bundle), "--input", str(gold), "--input-format", "pubtator", "--mentions", "detect"]
    assert cli.main([*argv, "--output", str(out), "--no-quality", *BEAM]) == 0
    assert linked(out) == LINKED
    capsys.readouterr()
    assert cli.main(["evaluate-e2e", "--gold", str(gold), "--pred", str(out), "--kb", str(bundle)]) == 0
    printed = capsys.readouterr().out
    # quetiapine: one annotation of five, one document concept of three
    assert "gold Chemical ids the KB lacks: annotations 1 of 5 (20.0%), document concepts 1 of 3 (33.3%)" in printed
    assert ["strict", "100.00", "80.00", "88.89", "4", "5"] in [line.split() for line in printed.splitlines()]
    # and benchmarks/e2e_bc5cdr.py's report on its bundle row, counted by the same rule
    missing = unlinkable_in(read_pubtator(gold), kb_folders([str(bundle)]))
    assert kb_gap_lines(missing, "the KBs of chemicals.toml") == [
        "gold Chemical ids the KBs of chemicals.toml cannot name: annotations 1 of 5 (20.0%), document concepts 1 of 3 (33.3%)"
    ]
