"""Bad records for every KB reader, each class of them placed between valid records: the valid concepts are kept,
each bad record is exactly the dead letters named here (file, record, reason), the counts reconcile and nothing
raises. `CASES` (reader level) and `CLI_CASES` (`bioel ingest-kb`: exit code and manifest) are module-level tables,
so a benchmark script can import them and print `reader | bad input | kept | dead letters | exit code`.

Each case builds its input files from the readers' fixtures (tests/fixtures, written from the formats' published
specifications) in a folder given to it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bioel_core.kb import get_reader
from bioel_core.kb.io import MAX_LINE_BYTES
from bioel_core.records import ConceptRecord, DeadLetter, ReadStats
from bioel_core.xml_records import MAX_RECORD_BYTES

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Case:
    reader: str  # the --input-format
    file: str  # the name of the file holding the bad input
    bad: str  # the class of bad input, as a summary table prints it
    build: Callable[[Path], list[Path]]  # writes the inputs into a folder, returns them in reading order
    kept: int  # concepts the reader yields
    dead: tuple[tuple[str, str, str], ...]  # each dead letter: (file name, location, how its reason begins), in order
    exit_code: int | None = None  # `bioel ingest-kb`'s, for the CLI cases
    options: dict = field(default_factory=dict)  # the reader's

    @property
    def id(self) -> str:
        return f"{self.reader} {self.file}: {self.bad}"


# ---- line-oriented readers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineFormat:
    """A reader's fixture files, and the valid line of its `target` file that each bad line is made from (inserted
    right after it, so valid records lie before and after)."""

    reader: str
    files: tuple[str, ...]  # fixture paths; the first is the target
    line: int  # 1-based line of the target that the bad line copies
    name: bytes  # the name field of that line, which the bad line damages
    kept: int  # concepts of the clean files
    separator: bytes  # between fields (an extra one makes a wrong field count)
    truncated: str  # how the reason of a truncated line begins
    wrong_count: str  # how the reason of a line with one field too many begins
    options: dict = field(default_factory=dict)

    def case(self, bad: str, damage: Callable[[bytes], bytes], reason: str) -> Case:
        def build(folder: Path) -> list[Path]:
            paths = []
            for fixture in self.files:
                path = folder / Path(fixture).name
                data = (FIXTURES / fixture).read_bytes()
                if not paths:  # the target
                    lines = data.splitlines(keepends=True)
                    valid = lines[self.line - 1]
                    assert self.name in valid
                    lines.insert(self.line, damage(valid))
                    data = b"".join(lines)
                path.write_bytes(data)
                paths.append(path)
            return paths

        target = Path(self.files[0]).name
        return Case(
            self.reader, target, bad, build, self.kept, ((target, f"line {self.line + 1}", reason),), options=self.options
        )

    def cases(self) -> list[Case]:
        def in_name(damaged: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
            return lambda line: line.replace(self.name, damaged(self.name), 1)

        overlong = MAX_LINE_BYTES + 1
        return [
            self.case("invalid UTF-8", in_name(lambda n: n[:2] + b"\xff" + n[2:]), "invalid UTF-8: invalid start byte"),
            self.case(
                "lone surrogate (UTF-8 bytes of U+D800)",
                in_name(lambda n: n[:2] + b"\xed\xa0\x80" + n[2:]),
                "invalid UTF-8: invalid continuation byte",
            ),
            self.case("truncated line", self.truncate, self.truncated),
            self.case("one field too many", in_name(lambda n: n + self.separator + b"extra"), self.wrong_count),
            self.case(
                f"overlong field ({overlong:,} bytes)",
                in_name(lambda n: n + b"A" * overlong),
                f"line longer than {MAX_LINE_BYTES:,} bytes",
            ),
        ]

    def truncate(self, line: bytes) -> bytes:
        """The line cut where it cannot be read as a shorter record: before the `||` that starts its names, else
        after its name field."""
        cut = line.index(b"||") if self.separator == b"||" else line.index(self.name) + len(self.name)
        return line[:cut] + b"\n"


LINE_FORMATS = [
    LineFormat(
        "medic-biosyn",
        ("biosyn/medic_raw.txt",),
        3,
        b"Ataxia Telangiectasia",
        4,
        b"||",
        "expected 'ID[|ALT]||preferred name",
        "expected one '||'",
    ),
    LineFormat(
        "biosyn-dict",
        ("biosyn/composite_dictionary.txt",),
        3,
        b"recurrent meningitis",
        4,
        b"||",
        "expected 'ID[|ALT][+ID...]||name'",
        "expected one '||'",
    ),
    LineFormat(
        "ctd-diseases",
        ("ctd/CTD_diseases.tsv",),
        10,
        b"10p Deletion Syndrome (Partial)",
        4,
        b"\t",
        "expected 9 tab-separated columns, found 1",
        "expected 9 tab-separated columns, found 10",
    ),
    LineFormat(
        "ctd-chemicals",
        ("ctd/CTD_chemicals_13col.csv",),
        10,
        b"Aspirin",
        3,
        b",",
        "expected 13 comma-separated columns, found 1",
        "expected 13 comma-separated columns, found 14",
    ),
    LineFormat(
        "mesh-tsv",
        ("mesh_tsv/thesaurus.tsv", "mesh_tsv/trees.tsv"),
        3,
        b"A-23187",
        2,
        b"\t",
        "expected 9 tab-separated columns, found 5",
        "expected 9 tab-separated columns, found 10",
    ),
    LineFormat(
        "umls",
        ("umls/MRCONSO.RRF", "umls/MRSTY.RRF", "umls/MRDEF.RRF"),
        6,
        b"Diabetes Mellitus",
        3,
        b"|",
        "expected 18 fields each ending in '|' (MRCONSO), found 14",
        "expected 18 fields each ending in '|' (MRCONSO), found 19",
    ),
    LineFormat(
        "snomed",
        ("snomed/sct2_Description_Snapshot-en_INT_20240101.txt", "snomed/sct2_Concept_Snapshot_INT_20240101.txt"),
        4,
        b"Heart attack",
        4,
        b"\t",
        "expected 9 tab-separated columns, found 8",
        "expected 9 tab-separated columns, found 10",
    ),
]

LINE_CASES = [case for fmt in LINE_FORMATS for case in fmt.cases()] + [
    # html.unescape reads a reference to no character as U+FFFD, silently
    LINE_FORMATS[0].case(
        "character reference to a lone surrogate (&#xd800;)",
        lambda line: line.replace(b"Ataxia", b"Ata&#xd800;xia", 1),
        "name 'Ata&#xd800;xia Telangiectasia' has a character reference",
    ),
]


# ---- MeSH XML ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class XmlFormat:
    """A MeSH XML fixture: its prolog, its records and its end; a bad record is a damaged copy of the first record
    under a new UI, inserted as record 2."""

    fixture: str
    record: str  # the record element
    ui: str  # its UI element
    new_ui: bytes  # the bad record's UI

    def parts(self) -> tuple[bytes, list[bytes], bytes]:
        data = (FIXTURES / self.fixture).read_bytes()
        starts = [m.start() for m in re.finditer(rb"<" + self.record.encode() + rb" ", data)]
        end = data.rindex(b"</" + self.record.encode() + b">") + len(self.record) + 4
        return data[: starts[0]], [data[a:b] for a, b in zip(starts, [*starts[1:], end])], data[end:]

    def bad_record(self) -> bytes:
        first = self.parts()[1][0]
        return re.sub(rb"<" + self.ui.encode() + rb">\w+<", b"<" + self.ui.encode() + b">" + self.new_ui + b"<", first, count=1)

    def file(self, folder: Path, record: bytes | None = None, prolog: bytes | None = None, between: bytes = b"") -> list[Path]:
        """The fixture with `record` inserted as record 2 (`between` before it), under `prolog` if given."""
        head, records, tail = self.parts()
        if prolog is not None:
            head = prolog + head[head.index(b"<" + self.record.encode().replace(b"Record", b"RecordSet")) :]
        path = folder / Path(self.fixture).name
        path.write_bytes(head + records[0] + between + (record or b"") + b"".join(records[1:]) + tail)
        return [path]

    def case(
        self, bad: str, build: Callable[[Path], list[Path]], kept: int, *dead: tuple[str, str], exit_code: int | None = None
    ) -> Case:
        name = Path(self.fixture).name
        return Case("mesh-xml", name, bad, build, kept, tuple((name, where, reason) for where, reason in dead), exit_code)

    def damaged(
        self, bad: str, damage: Callable[[bytes], bytes], reason: str, prolog: bytes | None = None, exit_code: int | None = None
    ) -> Case:
        where = f"record 2 ({self.ui} {self.new_ui.decode()})"
        kept = len(self.parts()[1])
        return self.case(
            bad, lambda folder: self.file(folder, damage(self.bad_record()), prolog), kept, (where, reason), exit_code=exit_code
        )


def xxe_prolog(secret: Path) -> bytes:
    """A DOCTYPE declaring an external entity (and a literal holding "]>", which must not end the DOCTYPE)."""
    return (
        b'<?xml version="1.0"?>\n<!DOCTYPE set [\n  <!ENTITY xxe SYSTEM "file://'
        + str(secret).encode()
        + b'">\n  <!ENTITY quoted "]>">\n]>\n'
    )


# "billion laughs": &lol9; expands to 10^9 "lol"s
BOMB = (
    b'<?xml version="1.0"?>\n<!DOCTYPE set [\n  <!ENTITY lol "lol">\n'
    + b"".join(
        b'  <!ENTITY lol%d "%s">\n' % (i, b"&lol%s;" % (b"" if i == 1 else str(i - 1).encode()) * 10) for i in range(1, 10)
    )
    + b"]>\n"
)
SECRET = b"bioel-xxe-canary-5b1f"


def xxe_case(fmt: XmlFormat) -> Case:
    def build(folder: Path) -> list[Path]:
        secret = folder / "secret.txt"
        secret.write_bytes(SECRET)
        return fmt.file(folder, fmt.bad_record().replace(b"<String>", b"<String>&xxe;", 1), xxe_prolog(secret))

    return fmt.case(
        "external entity (XXE) in a record",
        build,
        len(fmt.parts()[1]),
        (f"record 2 ({fmt.ui} {fmt.new_ui.decode()})", "malformed XML: undefined entity"),
    )


DESC = XmlFormat("mesh_xml/desc2024.xml", "DescriptorRecord", "DescriptorUI", b"D099999")
SUPP = XmlFormat("mesh_xml/supp2024.xml", "SupplementalRecord", "SupplementalRecordUI", b"C099999")


def xml_cases(fmt: XmlFormat) -> list[Case]:
    n = len(fmt.parts()[1])
    end_tag = b"</" + fmt.record.encode() + b">"
    start_tag = b"<" + fmt.record.encode() + b">"
    name = fmt.record.replace("Record", "RecordSet")
    last_ui = re.search(rb"<" + fmt.ui.encode() + rb">(\w+)<", fmt.parts()[1][-1]).group(1).decode()

    def truncated(folder: Path) -> list[Path]:
        (path,) = fmt.file(folder, fmt.bad_record())
        data = path.read_bytes()
        path.write_bytes(data[: data.index(b"<ConceptList>", data.rindex(b"<" + fmt.record.encode() + b" "))])
        return [path]

    def appended(folder: Path) -> list[Path]:
        (path,) = fmt.file(folder)
        path.write_bytes(path.read_bytes() + b"<" + name.encode() + b">\n" + fmt.bad_record() + b"</" + name.encode() + b">\n")
        return [path]

    return [
        fmt.damaged("mismatched tag", lambda r: r.replace(b"</String>", b"</Strin>", 1), "malformed XML: mismatched tag: line "),
        fmt.damaged(
            "invalid UTF-8",
            lambda r: r.replace(b"<String>", b"<String>\xff", 1),
            "malformed XML: not well-formed (invalid token): line ",
        ),
        fmt.damaged(
            "lone surrogate (UTF-8 bytes of U+D800)",
            lambda r: r.replace(b"<String>", b"<String>\xed\xa0\x80", 1),
            "malformed XML: not well-formed (invalid token): line ",
        ),
        fmt.damaged(
            "lone surrogate (&#xD800;)",
            lambda r: r.replace(b"<String>", b"<String>&#xD800;", 1),
            "malformed XML: reference to invalid character number: line ",
        ),
        xxe_case(fmt),
        fmt.damaged(
            "entity expansion bomb",
            lambda r: r.replace(b"<String>", b"<String>&lol9;", 1),
            "malformed XML: undefined entity: line ",
            prolog=BOMB,
        ),
        fmt.damaged("record not closed", lambda r: r.replace(end_tag, b""), f"malformed XML: <{fmt.record}> on line "),
        fmt.case(
            "record without its UI",
            lambda folder: fmt.file(
                folder, re.sub(rb"<" + fmt.ui.encode() + rb">\w+</" + fmt.ui.encode() + rb">", b"", fmt.bad_record(), count=1)
            ),
            n,
            ("record 2", "concept id '' does not match the mesh id pattern"),
        ),
        fmt.case(
            "text and a stray element between records",
            lambda folder: fmt.file(folder, between=b"<<junk & </Foo> text\n"),
            n,
            ("after record 1", f"not a <{fmt.record}> record: 21 bytes of text or markup between records on line "),
        ),
        fmt.case(
            "end tag and start tag inside a CDATA section (valid)",
            lambda folder: fmt.file(
                folder, fmt.bad_record().replace(b"<String>", b"<String><![CDATA[" + end_tag + start_tag + b"]]>", 1)
            ),
            n + 1,
        ),
        fmt.case(
            "end tag inside a comment (valid)",
            lambda folder: fmt.file(
                folder, fmt.bad_record().replace(b"<ConceptList>", b"<!-- " + end_tag + b" --><ConceptList>", 1)
            ),
            n + 1,
        ),
        # the copy of record 1 is valid here: records 1 to n are kept, record n + 1 (the fixture's last) is cut
        fmt.case(
            "file cut inside its last record", truncated, n, (f"record {n + 1} ({fmt.ui} {last_ui})", "unread rest of file: ")
        ),
        fmt.case("a second document after the root element", appended, n, (f"after record {n}", "unread rest of file: ")),
    ]


XML_CASES = (
    xml_cases(DESC)
    + xml_cases(SUPP)
    + [
        DESC.damaged(
            f"overlong field ({MAX_RECORD_BYTES + 1:,} bytes)",
            lambda r: r.replace(b"<String>", b"<String>" + b"A" * (MAX_RECORD_BYTES + 1), 1),
            f"record longer than {MAX_RECORD_BYTES:,} bytes",
        ),
    ]
)

CASES = LINE_CASES + XML_CASES


def read(case: Case, folder: Path) -> tuple[list[ConceptRecord], list[DeadLetter], list[ReadStats], list]:
    paths = case.build(folder)
    items = list(get_reader(case.reader, **case.options).read([str(p) for p in paths]))
    return (
        [i for i in items if isinstance(i, ConceptRecord)],
        [i for i in items if isinstance(i, DeadLetter)],
        [i for i in items if isinstance(i, ReadStats)],
        items,
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_record_is_its_dead_letters_and_every_valid_record_is_kept(case, tmp_path):
    concepts, dead, stats, items = read(case, tmp_path)
    assert len(concepts) == case.kept, [c.concept_id for c in concepts]
    assert len(dead) == len(case.dead), [(d.location, d.reason[:120]) for d in dead]
    for letter, (name, location, reason) in zip(dead, case.dead):
        assert (Path(letter.source).name, letter.location) == (name, location) and letter.reason.startswith(reason), (
            letter.reason[:300]
        )
        assert len(letter.raw) <= 2000
    assert all(s.reconciles() for s in stats)
    assert sum(s.dead_lettered for s in stats) == len(dead)
    assert SECRET not in repr(items).encode()  # an external entity is never resolved


def test_the_unread_rest_of_a_file_says_how_much_was_not_read(tmp_path):
    case = next(c for c in XML_CASES if c.bad == "file cut inside its last record")
    (path,) = case.build(tmp_path)
    _, dead, _, _ = read(case, tmp_path)
    data = path.read_bytes()
    rest = data[data.rindex(b"<DescriptorRecord ") :]
    line, lines = data[: -len(rest)].count(b"\n") + 1, rest.count(b"\n") + 1
    assert dead[0].reason.startswith(
        f"unread rest of file: {len(rest):,} bytes on {lines} lines from line {line} "
        "(the file ends inside the record (truncated?): no element found: line "
    )


# ---- bioel ingest-kb --------------------------------------------------------------------------------------------


def cli_case(fmt: XmlFormat, bad: str, exit_code: int) -> Case:
    return dataclasses.replace(
        next(c for c in XML_CASES if c.file == Path(fmt.fixture).name and c.bad == bad), exit_code=exit_code
    )


# a bad record among valid ones is a warning (exit 0, published); a file's unread rest fails the checks (exit 4)
CLI_CASES = [
    cli_case(DESC, "mismatched tag", 0),
    cli_case(DESC, "external entity (XXE) in a record", 0),
    cli_case(SUPP, "mismatched tag", 0),
    cli_case(DESC, "file cut inside its last record", 4),
    cli_case(SUPP, "a second document after the root element", 4),
]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_ingest_kb_exit_code_and_manifest(case, tmp_path, capsys):
    from bioel_core.tables import read_manifest, read_table
    from pipelines import cli

    (tmp_path / "in").mkdir()
    inputs = case.build(tmp_path / "in")
    out = tmp_path / "kb"
    argv = ["ingest-kb", "--input-format", case.reader, "--output", str(out), "--num-shards", "1"]
    for path in inputs:
        argv += ["--input", str(path)]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == case.exit_code, err
    if code == 4:  # refused by the quality checks: nothing published, the report names the unread rest
        assert "nothing published" in err and not (out / "manifest.json").exists()
        rejected = json.loads((out / "rejected" / "summary.json").read_text())
        failed = [(c["table"], c["expectation"]) for c in rejected["checks"] if not c["success"] and c["severity"] == "critical"]
        assert failed == [("inputs", "expect_column_values_to_be_null")]
        # published when asked, with the same counts (into a folder of its own: a first run's rejected/ report still
        # blocks its folder, issue 40's output-layer part)
        out = tmp_path / "published"
        code = cli.main([*(a if a != str(tmp_path / "kb") else str(out) for a in argv), "--fail-on", "none"])
        assert code == 0, capsys.readouterr().err
    manifest = read_manifest(out)
    assert any(i.get("unread") for i in manifest["inputs"]) == (case.exit_code == 4)  # as bioel link lists it
    counts = manifest["counts"]
    assert all(manifest["reconciliation"].values())
    assert counts["concepts"]["written"] == case.kept and counts["dead_lettered"] == len(case.dead)
    assert counts["records_read"] == case.kept + len(case.dead) + counts["filtered"] and counts["filtered"] == 0
    dead = read_table(out, "dead_letter").to_pylist()
    assert [(Path(d["source"]).name, d["location"]) for d in dead] == [(name, where) for name, where, _ in case.dead]
