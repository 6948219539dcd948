"""British spellings read as the KB's American ones: the rules, the KB's own words deciding, the detector (offsets
as written) and the linker's queries, on MEDIC where the shared data is at hand."""

from __future__ import annotations

import pytest

from bioel_core.corpora import Document, Passage
from bioel_core.kb.biosyn import MedicBioSynReader
from bioel_core.linking.exact import ExactLinker
from bioel_core.names import NameSet
from bioel_core.normalize import Normalizer
from bioel_core.records import NameRecord
from bioel_core.text.detect import DictionaryDetector
from bioel_core.text.spelling import SpellingVariants, american
from conftest import shared_file

NORM = Normalizer()


@pytest.mark.parametrize(
    "british, us",
    [
        ("anaemia", "anemia"),
        ("haemorrhagic", "hemorrhagic"),
        ("ischaemic", "ischemic"),
        ("leucaemia", "leukemia"),
        ("leucopenia", "leukopenia"),
        ("paediatric", "pediatric"),
        ("aetiology", "etiology"),
        ("oedema", "edema"),
        ("oesophagitis", "esophagitis"),
        ("oestradiol", "estradiol"),
        ("diarrhoea", "diarrhea"),
        ("dyspnoea", "dyspnea"),
        ("foetal", "fetal"),
        ("coeliac", "celiac"),
        ("tumours", "tumors"),
        ("behavioural", "behavioral"),
        ("immunisation", "immunization"),
        ("hospitalised", "hospitalized"),
        ("paralysed", "paralyzed"),
        ("fibre", "fiber"),
        ("goitre", "goiter"),
        ("analogue", "analog"),
        ("sulphasalazine", "sulfasalazine"),
        ("aluminium", "aluminum"),
    ],
)
def test_the_rules_give_the_american_spelling(british, us):
    assert american(british) == us


@pytest.mark.parametrize(
    "word", ["four", "hours", "does", "shoes", "this", "there", "here", "aerobic", "vertebrae", "coenzyme", "thromboembolic"]
)
def test_the_rules_leave_common_words_and_non_british_digraphs(word):
    assert american(word) == word


def variants(*names: str) -> SpellingVariants:
    return SpellingVariants.from_names(NORM(n) for n in names)


def test_the_kbs_words_decide():
    # "anaemia" is the KB's too, in one name, "anemia" in two: the more frequent spelling stands for both
    v = variants("Anemia", "Hemolytic anemia", "Fanconi anaemia", "Edema", "Tumour lysis syndrome")
    assert v("anaemia") == "anemia" and v("anemia") == "anemia"
    assert v("oedema of the legs") == "edema of the legs"  # words the KB lacks and no rule changes stay
    assert v("tumour") == "tumour"  # the KB writes it so, and lacks "tumor"
    assert v("leukaemia") == "leukaemia"  # the variant is not a KB word either
    # a KB written in British English keeps its words
    british = variants("Anaemia", "Aplastic anaemia", "Anemia")
    assert british("anaemia") == "anaemia"


def test_the_words_of_a_names_table_are_those_of_its_names(tmp_path):
    from test_detect import _write_names_table

    _write_names_table(tmp_path / "kb")
    from_table = SpellingVariants.from_names_table(tmp_path / "kb")
    assert from_table.words == SpellingVariants.from_names(NameSet.from_names_table(tmp_path / "kb").names).words
    assert from_table.words >= {"anemia", "albumins"}


def test_short_words_are_symbols_not_spellings():
    v = variants("ET syndrome", "Rem sleep disorder")
    assert v("aet") == "aet" and v("raem") == "raem"


def detect(det: DictionaryDetector, text: str) -> list[tuple[str, int, int]]:
    document = Document("1", [Passage("abstract", 0, text)])
    return [(m.text, m.start, m.end) for m in det.detect(document)]


def test_the_detector_finds_british_spellings_with_offsets_as_written():
    names = [NORM(n) for n in ("anemia", "ischemic heart disease", "edema", "breast cancer", "ovarian cancer")]
    text = "Anaemia and ischaemic heart disease; oedema."
    plain = DictionaryDetector(names, NORM)
    assert detect(plain, text) == []
    det = DictionaryDetector(names, NORM, spelling=SpellingVariants.from_names(names))
    assert detect(det, text) == [("Anaemia", 0, 7), ("ischaemic heart disease", 12, 35), ("oedema", 37, 43)]


def test_a_name_written_the_british_way_still_matches_as_written():
    # a learned synonym keeps the British word ("haematological toxicity"), the KB's other names the American one
    names = [NORM(n) for n in ("hematological disease", "hematological neoplasm", "haematological toxicity", "toxicity")]
    det = DictionaryDetector(names, NORM, spelling=SpellingVariants.from_names(names))
    text = "Haematological toxicity and haematological disease."
    assert detect(det, text) == [("Haematological toxicity", 0, 23), ("haematological disease", 28, 50)]


def test_a_coordinated_mention_of_british_words():
    names = [NORM(n) for n in ("renal ischemia", "myocardial ischemia")]
    det = DictionaryDetector(names, NORM, spelling=SpellingVariants.from_names(names))
    document = Document("1", [Passage("abstract", 0, "Renal and myocardial ischaemia.")])
    (mention,) = det.detect(document)
    assert (mention.text, mention.parts) == ("Renal and myocardial ischaemia", ("Renal ischaemia", "myocardial ischaemia"))


def test_the_linker_reads_queries_through_the_variants():
    names = NameSet.from_pairs([("Ischemic heart disease", ("D017202",)), ("Anemia", ("D000740",))], NORM)
    linker = ExactLinker(names)
    assert linker.link(["ischaemic heart disease", "Anaemia"], k=1) == [[], []]  # BioSyn's protocol: as normalized
    linker.spelling = SpellingVariants.from_names(names.names)
    assert [c[0].concept_ids[0] for c in linker.link(["ischaemic heart disease", "Anaemia"], k=1)] == ["D017202", "D000740"]


def test_a_query_that_is_a_name_as_written_stays_so():
    names = NameSet.from_pairs(
        [
            ("Hematological disease", ("D006402",)),
            ("Hematological disorder", ("D006402",)),
            ("Haematological toxicity", ("D006402",)),
            ("Toxicity", ("D064420",)),
        ],
        NORM,
    )
    linker = ExactLinker(names)
    spelling = SpellingVariants.from_names(names.names)
    assert spelling("haematological toxicity") == "hematological toxicity"  # word by word
    linker.spelling = spelling.with_names(linker.index.row_of)
    assert [c.name for c in linker.link(["Haematological toxicity"], k=1)[0]] == ["haematological toxicity"]


def test_medic_reads_the_british_spellings_of_bc5cdr_and_leaves_its_own():
    medic = shared_file("medic/medic_06Jul2012.txt")
    names = {NORM(r.name) for r in MedicBioSynReader().read([str(medic)]) if isinstance(r, NameRecord)}
    v = SpellingVariants.from_names(names)
    for british, us in [("anaemia", "anemia"), ("oedema", "edema"), ("haemorrhage", "hemorrhage"), ("tumour", "tumor")]:
        assert v(british) == us
    assert v("aesthesia") == "aesthesia"  # neither spelling is MEDIC's
