"""evaluate-e2e over every corpus format that carries annotations (--gold-format / --pred-format, named as link's
--input-format): BC5CDR's BioC release scores as its PubTator release, the same content scores the same in each
format, a format without annotations and a bad record are one-line refusals, and a misnamed format says which to
name."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bioel_core.corpora import read_annotated, read_documents, read_pubtator, write_bioc_json, write_bioc_xml
from pipelines import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BIOC, PUBTATOR = FIXTURES / "corpora" / "bc5cdr_test_excerpt.bioc.xml", FIXTURES / "corpora" / "bc5cdr_test_excerpt.pubtator"
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def e2e(tmp_path, *argv) -> dict:
    out = tmp_path / "e2e.json"
    assert cli.main(["evaluate-e2e", *map(str, argv), "--json", str(out)]) == 0
    return json.loads(out.read_text())


def refusal(capsys, *argv) -> str:
    """The one stderr line of an evaluate-e2e that fails before scoring."""
    assert cli.main(["evaluate-e2e", *map(str, argv)]) != 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bioel evaluate-e2e: error: ")]
    assert len(lines) == 1
    return lines[0].removeprefix("bioel evaluate-e2e: error: ")


def test_bc5cdr_bioc_release_scores_100_against_its_pubtator_release(tmp_path, capsys):
    """Three BC5CDR test documents as each release states them. evaluate-e2e read PubTator only, and the BioC
    release states a composite's parts as annotations of their own (CompositeRole IndividualMention, one of them
    with two locations), which its PubTator release names in the composite's line: read as annotations, the BioC
    gold had 66 annotations for the PubTator release's 62, strict F1 97.67."""
    for side, other in (("gold", "pred"), ("pred", "gold")):
        s = e2e(tmp_path, f"--{side}", BIOC, f"--{side}-format", "bioc-xml", f"--{other}", PUBTATOR)
        assert s["strict"]["f1"] == s["partial"]["f1"] == 100.0
        assert s["strict"]["n_gold"] == s["strict"]["n_pred"] == 62
        assert s["gold_without_concept"] == s["pred_without_concept"] == 3  # bevacizumab, MESH -1
        assert (s[f"{side}_composite_parts"], s[f"{other}_composite_parts"]) == (4, 0)
        assert "left out (parts of a composite mention, BioC IndividualMention): " in capsys.readouterr().out


def test_bioc_json_with_identifier_infons_and_a_link_output_folder_score_as_the_pubtator(tmp_path, capsys):
    """The BC5CDR release's ids are `MESH` infons; PubTator Central's and bioel's own BioC copies write them as
    `identifier`. A `bioel link --output-format bioc-json` folder is read through its manifest."""
    out = tmp_path / "links"
    (out / "gen-1" / "bioc-json").mkdir(parents=True)
    write_bioc_json(read_annotated(BIOC, "bioc-xml"), out / "gen-1" / "bioc-json" / "linked.json", id_key="identifier")
    text = (out / "gen-1" / "bioc-json" / "linked.json").read_text()
    assert '"identifier": "D006470|D003556"' in text and '"MESH"' not in text
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "pipeline": "link",
                "complete": True,
                "generation": "gen-1",
                "output_format": "bioc-json",
                "outputs": {"bioc-json": {"files": ["bioc-json/linked.json"]}},
            }
        )
    )
    s = e2e(tmp_path, "--gold", PUBTATOR, "--pred", out, "--pred-format", "bioc-json")
    assert s["strict"]["f1"] == 100.0 and s["strict"]["n_pred"] == s["strict"]["n_gold"] == 62
    assert refusal(capsys, "--gold", PUBTATOR, "--pred", out) == (
        f"--pred {out}: this `bioel link` output has no PubTator copy (its copies: bioc-json); "
        "re-run link with the copy format pubtator"
    )


def _bioc_json(text: str, annotations: list[tuple[list[tuple[int, int]], str, dict]]) -> str:
    return json.dumps(
        {
            "documents": [
                {
                    "id": "1",
                    "passages": [
                        {
                            "infons": {"type": "title"},
                            "offset": 0,
                            "text": text,
                            "annotations": [
                                {
                                    "id": str(n),
                                    "infons": {"type": "Disease", **infons},
                                    "text": ann_text,
                                    "locations": [{"offset": o, "length": length} for o, length in locs],
                                }
                                for n, (locs, ann_text, infons) in enumerate(annotations)
                            ],
                        }
                    ],
                }
            ]
        }
    )


def test_the_same_content_scores_the_same_in_pubtator_and_bioc(tmp_path):
    """A two-location annotation (scored as the span from its first start to its last end, as it is written to
    PubTator), a composite's `|` ids (any one of them right), an annotation with no id and one with -1 (left out)."""
    text = "Breast and ovarian cancer, heart attack and renal or hepatic failure after cisplatin."
    at = {
        w: (text.index(w), text.index(w) + len(w))
        for w in ("Breast and ovarian cancer", "ovarian cancer", "heart attack", "renal or hepatic failure", "cisplatin")
    }
    (b0, b1), (o0, o1), (h0, h1), (r0, r1), (c0, c1) = at.values()
    pubtator, bioc = tmp_path / "gold.pubtator", tmp_path / "gold.json"
    pubtator.write_text(
        f"1|t|{text}\n1|a|\n"
        f"1\t{b0}\t{b1}\tBreast and ovarian cancer\tDisease\tD001943\n"
        f"1\t{o0}\t{o1}\tovarian cancer\tDisease\tD010051\n"
        f"1\t{h0}\t{h1}\theart attack\tDisease\n"
        f"1\t{r0}\t{r1}\trenal or hepatic failure\tDisease\tD051437|D006501\trenal failure|hepatic failure\n"
        f"1\t{c0}\t{c1}\tcisplatin\tDisease\t-1\n\n"
    )
    bioc.write_text(
        _bioc_json(
            text,
            [
                ([(b0, 6), (o1 - 6, 6)], "Breast cancer", {"identifier": "D001943"}),
                ([(o0, o1 - o0)], "ovarian cancer", {"identifier": "D010051"}),
                ([(h0, h1 - h0)], "heart attack", {}),
                ([(r0, r1 - r0)], "renal or hepatic failure", {"identifier": "D051437|D006501"}),
                ([(c0, c1 - c0)], "cisplatin", {"identifier": "-1"}),
            ],
        )
    )
    pred = tmp_path / "pred.pubtator"
    pred.write_text(
        f"1|t|{text}\n1|a|\n1\t{b0}\t{b1}\tBreast and ovarian cancer\tDisease\tD001943\n"
        f"1\t{o0}\t{o1}\tovarian cancer\tDisease\tMESH:D010051\n1\t{h0}\t{h1}\theart attack\tDisease\tD009203\n"
        f"1\t{r0}\t{r1}\trenal or hepatic failure\tDisease\tD006501\n1\t{c0}\t{c1}\tcisplatin\tDisease\tD002945\n\n"
    )
    from_pubtator = e2e(tmp_path, "--gold", pubtator, "--pred", pred)
    from_bioc = e2e(tmp_path, "--gold", bioc, "--gold-format", "bioc-json", "--pred", pred)
    assert {k: v for k, v in from_bioc.items() if k != "gold"} == {k: v for k, v in from_pubtator.items() if k != "gold"}
    s = from_bioc["strict"]
    assert (s["n_gold"], s["n_pred"], s["correct_pred"], s["matched_gold"]) == (3, 5, 3, 3)
    assert from_bioc["gold_without_concept"] == 2


@pytest.mark.parametrize(
    "fmt, content",
    [
        ("text", "Heart attack after cisplatin.\n"),
        ("jsonl", '{"pmid": "1", "title": "Heart attack.", "abstract": ""}\n'),
        ("pubmed-xml", (FIXTURES / "pubmed" / "pubmed25n0001_sample.xml").read_text()),
    ],
)
def test_a_format_that_carries_no_annotations_is_refused_naming_the_file(tmp_path, capsys, fmt, content):
    """Such a --gold read as text would score nothing: it is refused before scoring, not given P/R/F1 0.00."""
    path = tmp_path / f"corpus.{fmt}"
    path.write_text(content)
    reason = f"the {fmt} format carries no annotations (formats that do: pubtator, bioc-xml, bioc-json)"
    assert refusal(capsys, "--gold", path, "--gold-format", fmt, "--pred", PUBTATOR) == f"--gold {path}: {reason}"
    assert refusal(capsys, "--gold", PUBTATOR, "--pred", path, "--pred-format", fmt) == f"--pred {path}: {reason}"


def test_a_bad_bioc_record_is_a_one_line_error_naming_file_record_and_reason(tmp_path, capsys):
    outside = tmp_path / "outside.xml"
    outside.write_text(BIOC.read_text().replace('<location offset="26" length="10" />', '<location offset="26" length="9999" />'))
    assert refusal(capsys, "--gold", outside, "--gold-format", "bioc-xml", "--pred", PUBTATOR) == (
        f"{outside}: document 1 (id 23949582), line 7, annotation 0: span 26-10025 is outside the document (length 1224)"
    )
    broken = tmp_path / "broken.xml"
    broken.write_text(BIOC.read_text().replace("</passage>", "", 1))
    assert refusal(capsys, "--gold", broken, "--gold-format", "bioc-xml", "--pred", PUBTATOR) == (
        f"{broken}: document 1 (id 23949582), line 158, column 4: malformed XML: mismatched tag"
    )
    not_json = tmp_path / "gold.json"
    not_json.write_text("{not json\n")
    assert refusal(capsys, "--gold", not_json, "--gold-format", "bioc-json", "--pred", PUBTATOR) == (
        f"{not_json}: line 1: neither JSON nor JSON lines: Expecting property name enclosed in double quotes; "
        "10 bytes (1 line) from line 1 on not read"
    )


NAMES = {"pubtator": "PubTator", "bioc-xml": "BioC XML", "bioc-json": "BioC JSON"}


@pytest.mark.parametrize("given, actual", [(g, a) for g in NAMES for a in NAMES if g != a])
def test_a_misnamed_format_ends_its_error_with_the_flag_that_names_the_right_one(tmp_path, capsys, given, actual):
    """A BioC XML gold read as PubTator (the default) failed with "line 1: annotation or relation line before any
    title/abstract line", as if the file were broken. A file's first record that fails while its first bytes plainly
    are another annotated format (after a byte-order mark, gzipped too) now ends the error with the flag to pass."""
    files = {"pubtator": PUBTATOR, "bioc-xml": BIOC, "bioc-json": tmp_path / "gold.json"}
    write_bioc_json(read_annotated(BIOC, "bioc-xml"), files["bioc-json"])
    path = tmp_path / f"misnamed.{given}.gz"
    path.write_bytes(gzip.compress(b"\xef\xbb\xbf" + files[actual].read_bytes()))
    for side, other in (("gold", "pred"), ("pred", "gold")):
        err = refusal(capsys, f"--{side}", path, f"--{side}-format", given, f"--{other}", PUBTATOR)
        assert err.startswith(f"{path}: line 1") and err.endswith(
            f" (this looks like {NAMES[actual]}: pass --{side}-format {actual})"
        )


def test_the_hint_names_each_verbs_own_format_flag_and_only_for_another_format(tmp_path, capsys):
    from pipelines import cli

    for argv, flag in (
        (["calibrate-nil", "--index", f"Disease={tmp_path / 'index'}", "--gold", BIOC], "--gold-format"),
        (
            [
                "train",
                "collective",
                "--train-corpus",
                BIOC,
                "--dev-corpus",
                BIOC,
                "--names",
                f"Disease={tmp_path / 'kb'}",
                "--output",
                tmp_path / "model",
            ],
            "--corpus-format",
        ),
    ):
        assert cli.main(list(map(str, argv))) == 2
        assert capsys.readouterr().err.endswith(f" (this looks like BioC XML: pass {flag} bioc-xml)\n")
    # a bad first record in a file of the format named is that format's error alone
    bad = tmp_path / "bad.pubtator"
    bad.write_text("1\t0\t4\tSome\tDisease\tD1\n")
    assert refusal(capsys, "--gold", bad, "--pred", PUBTATOR) == (
        f"{bad}: line 1: annotation or relation line before any title/abstract line"
    )


@pytest.mark.parametrize("given", ["pubtator", "bioc-json"])
@pytest.mark.parametrize(
    "gold, name",
    [(FIXTURES / "corpora" / "sample.jsonl", "JSONL"), (FIXTURES / "pubmed" / "pubmed25n0001_sample.xml", "PubMed XML")],
)
def test_a_gold_of_a_format_without_annotations_is_named_and_not_offered(capsys, given, gold, name):
    """Any file starting with `{` was hinted as BioC JSON: a JSONL gold read as PubTator was told to pass
    bioc-json (which fails again), and read as BioC JSON was not hinted at all. Then named, it was offered
    (`pass --gold-format jsonl`), which the next run refused as a format without annotations: now one step says what
    the file is and what the flag takes."""
    assert refusal(capsys, "--gold", gold, "--gold-format", given, "--pred", PUBTATOR).endswith(
        f" (this looks like {name}, which --gold-format does not take: it takes pubtator, bioc-xml or bioc-json)"
    )


def test_an_undecodable_pubtator_line_is_refused_as_invalid_utf8(tmp_path, capsys):
    """Read strictly, the line's dead-letter reason ("document dropped: invalid UTF-8 ...": what bulk linking does
    with its document) was the error, as if the read had gone on without it."""
    latin1 = tmp_path / "gold.pubtator"
    latin1.write_bytes(PUBTATOR.read_bytes().replace(b"cystitis", b"cystitis\xe9", 1))
    assert refusal(capsys, "--gold", latin1, "--pred", PUBTATOR) == (
        f"{latin1}: line 2: invalid UTF-8: invalid continuation byte at byte 188"
    )
    dead = next(iter(read_documents([str(latin1)], "pubtator")))
    assert (dead.location, dead.reason) == ("line 2", "document dropped: invalid UTF-8: invalid continuation byte at byte 188")


@pytest.mark.skipif(not DATA.is_dir(), reason=f"shared benchmark data not found at {DATA}")
def test_bc5cdr_test_set_written_as_bioc_xml_scores_100_against_its_pubtator(tmp_path):
    """The whole BC5CDR test set: passages at document offsets, annotations in their passage, ids as `MESH` infons."""
    pubtator = DATA / "bc5cdr-corpus" / "CDR_TestSet.PubTator.txt"
    bioc = tmp_path / "CDR_TestSet.BioC.xml"
    write_bioc_xml(read_pubtator(pubtator), bioc, id_key="MESH")
    s = e2e(tmp_path, "--gold", bioc, "--gold-format", "bioc-xml", "--pred", pubtator)
    assert s["strict"]["f1"] == s["partial"]["f1"] == 100.0
    assert s["strict"]["n_gold"] == s["strict"]["n_pred"] and s["gold_without_concept"] == s["pred_without_concept"]
    assert s["documents"]["gold"] == s["documents"]["pred"] == 500


def _first_block(text: str) -> str:
    return text[: text.index("\n\n") + 2]


_FIRST = _first_block(PUBTATOR.read_text())
_FIRST_LESS_ONE = "".join(line + "\n" for line in _FIRST.splitlines() if "\tnitrogen\t" not in line) + "\n"

# verb | bad input | documents kept | dead letters | outcome: a gold or pred holding one document id twice
E2E_DUPLICATE_CASES = [
    (
        "evaluate-e2e --gold: one id in two blocks of a file, other annotations",
        "gold",
        {"gold.pubtator": _FIRST_LESS_ONE + PUBTATOR.read_text()},
        "gold.pubtator",
        "refused",
    ),
    (
        "evaluate-e2e --gold: one id in two files of a folder, other annotations",
        "gold",
        {"a.pubtator": PUBTATOR.read_text(), "b.pubtator": _FIRST_LESS_ONE},
        "b.pubtator",
        "refused",
    ),
    (
        "evaluate-e2e --pred: one id in two blocks of a file, other annotations",
        "pred",
        {"pred.pubtator": PUBTATOR.read_text() + _FIRST_LESS_ONE},
        "pred.pubtator",
        "refused",
    ),
    (
        "evaluate-e2e --gold: one block given twice, the same",
        "gold",
        {"gold.pubtator": _FIRST + PUBTATOR.read_text()},
        None,
        "scored as once",
    ),
]


@pytest.mark.parametrize("case, side, files, named, outcome", E2E_DUPLICATE_CASES, ids=[c[0] for c in E2E_DUPLICATE_CASES])
def test_a_document_id_given_twice_with_other_annotations_is_refused_naming_file_and_id(
    tmp_path, capsys, case, side, files, named, outcome
):
    """A gold with one document id in two blocks was scored with both blocks' annotations merged, unsaid (`bioel link`
    keeps the later one): which is the gold is unclear, so it is a one-line refusal naming the file and the id. The
    same document repeated as it is (the NCBI disease training set gives PMID 8528200 twice) scores as given once."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    given = folder if len(files) > 1 else folder / next(iter(files))
    other = "pred" if side == "gold" else "gold"
    if outcome == "refused":
        first = str(folder / "a.pubtator") if len(files) > 1 else str(folder / named)
        assert refusal(capsys, f"--{side}", given, f"--{other}", PUBTATOR) == (
            f"{folder / named}: document 23949582: given again with other text or annotations (first in {first}): which "
            "one is meant is unclear; give each document once"
        )
    else:
        assert e2e(tmp_path, f"--{side}", given, f"--{other}", PUBTATOR) == {
            **e2e(tmp_path, f"--{side}", PUBTATOR, f"--{other}", PUBTATOR),
            side: str(given),
        }
