"""benchmarks/sanity_audit.py: what it counts as garbage in annotation rows, and its protein-descriptor rule."""

from __future__ import annotations

from benchmarks.sanity_audit import audit, protein_descriptors


def row(mention, etype="Disease", concept="D1", link_text="", nil=False, name="x"):
    return {
        "doc_id": "1",
        "start": 0,
        "end": len(mention),
        "mention": mention,
        "link_text": link_text or mention,
        "entity_type": etype,
        "concept_id": None if nil else concept,
        "matched_name": name,
        "nil": nil,
    }


def test_counts_statistics_numbers_clause_crossing_expansions_and_proteins():
    rows = [
        row("OR=12.619", link_text="OR=7.18, 95 CI=2.612-19.708), bipolar disorder"),  # a statistic, crossing
        row("n=101", "Chemical", "D009553"),  # a statistic
        row("12", nil=True),  # a bare number, NIL or not
        row("ILK", "Chemical", "D000001", link_text="integrin-linked kinase"),  # an expansion, no clause crossed
        row("G6PD", "Chemical", "D005954"),
        row("G6PD", "Chemical", "D005954"),  # an enzyme typed Chemical
        row("G6PD", "Disease", "D005955"),  # the deficiency, a disease: fine
        row("psychosis", concept="D011605"),
        row("psychosis", concept="D011605"),
    ]
    report = audit(rows, {"D005954": "Glucosephosphate Dehydrogenase"})
    assert report["counts"] == {
        "statistic_mentions": 2,
        "bare_number_mentions": 1,
        "expansions_crossing_a_clause": 1,
        "protein_descriptors_typed_chemical": 2,
    }
    assert (report["mentions"], report["linked"], report["expansions"]) == (9, 8, 2)
    assert report["examples"]["protein_descriptors_typed_chemical"] == [
        {"mention": "G6PD", "link_text": "G6PD", "concept_id": "D005954", "count": 2}
    ]
    assert [(t["mention"], t["count"]) for t in report["top"]["Disease"]] == [("psychosis", 2), ("OR=12.619", 1), ("G6PD", 1)]
    assert report["top"]["Chemical"][0] == {"mention": "G6PD", "count": 2, "concept_id": "D005954", "matched_name": "x"}


def test_protein_descriptors_are_those_whose_every_tree_number_is_a_protein_branch(tmp_path):
    trees = tmp_path / "trees.tsv"
    lines = [
        "DescriptorUI\tDescriptorName\ttree_location\tcode",
        "D005954\tGlucosephosphate Dehydrogenase\tD08.811.682.047.150.300\tD",
        "D016189\tDystrophin\tD12.776.210.500.250\tD",
        "D016189\tDystrophin\tD12.776.543.250\tD",
        "D018076\tDNA, Complementary\tD13.444.308.497.220\tD",
        "D000804\tAngiotensin II\tD06.472.699.094.078\tD",
        "D000804\tAngiotensin II\tD12.776.631.650.070.078\tD",
        "D006493\tHeparin\tD09.698.373.400\tD",
    ]
    trees.write_text("\n".join(lines) + "\n")
    assert protein_descriptors(trees) == {
        "D005954": "Glucosephosphate Dehydrogenase",
        "D016189": "Dystrophin",
        "D018076": "DNA, Complementary",
    }


def test_false_positive_categories_read_a_composite_concepts_parts_as_its_ids():
    """A row linked to a composite concept (`D006470|D003556`, made from the training corpora's composite mentions) is
    right where the gold states those ids (BC5CDR's `D006470|D003556`), as the interchange copies write it."""
    from benchmarks.fp_categories import categorize

    composite = {**row("hemorrhagic cystitis", concept="D006470|D003556"), "alt_ids": []}
    single = {**row("hemorrhagic cystitis", concept="D003556"), "doc_id": "2", "alt_ids": []}
    wrong = {**row("hemorrhagic cystitis", concept="D000001|D000002"), "doc_id": "3", "alt_ids": []}
    gold = {d: [(0, 20, "Disease", frozenset({"D006470", "D003556"}), "hemorrhagic cystitis")] for d in "123"}
    report = categorize(gold, [composite, single, wrong], {})
    assert report["true_positives"] == {"Disease": 2}
    assert report["false_positives"] == {"Disease": {"wrong_id": 1}}
