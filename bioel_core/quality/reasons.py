"""The kind of a dead letter's reason, what the report groups dead letters by.

A reason is free text that names its record's specifics ("document 12345 has neither title nor abstract",
"concept id 'X1' does not match ...", "malformed XML: Opening and ending tag mismatch: b line 3 and a, line 4"), so
grouping by the reason itself gives a group per record. Its kind is the reason with those specifics taken out, by one
rule:
1. quoted values ('...' or "...", as Python's repr and the readers quote them) become '...', but for quoted
   punctuation ('||', ','), which is the format's syntax, not a record's value;
2. only the first two clauses are kept: the text is cut at its second ": " outside brackets (the readers lead with
   what went wrong and add details, a parser's message, after a colon: "malformed JSON: Expecting value: line 1
   column 1 (char 0)" is of kind "malformed JSON: Expecting value");
3. numbers (1,234, 0.5, -1, a range 3-9, 0xff) and ids (letters, perhaps a colon, then three digits or more:
   D000001, MESH:D000001, C0000005, PMC123456) become #; a digit inside a name such as UTF-8 or RF2, or a regex's
   {6}, stays.
Reasons that differ only in such specifics are one kind. Ids of other shapes (a BioC document id "doc-a") stay
and make kinds of their own.
"""

from __future__ import annotations

import re

QUOTED = re.compile(r"""(?<!\w)(?:'(?:[^'\\]|\\.)*\w(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\w(?:[^"\\]|\\.)*")(?!\w)""")
NUMBER_OR_ID = re.compile(
    r"""(?<![\w{-])(?:
      0x[0-9a-fA-F]+                                  # a byte
    | [A-Za-z][A-Za-z_]*:?[A-Za-z]*\d{3,}[\w.]*       # an id: D000001, MESH:D000001, OMIM:123456
    | [-+]?\d+(?:[.,]\d+)*(?:-\d+(?:[.,]\d+)*)?       # a number, 1,234 or 0.5, or a range 3-9
    )(?!\w)""",
    re.VERBOSE,
)
CLAUSES = 2
OPEN, CLOSE = "([{", ")]}"


def _first_clauses(text: str, clauses: int = CLAUSES) -> str:
    depth, seen = 0, 0
    for i, char in enumerate(text):
        if char in OPEN:
            depth += 1
        elif char in CLOSE:
            depth = max(0, depth - 1)
        elif char == ":" and depth == 0 and text.startswith(": ", i):
            seen += 1
            if seen == clauses:
                return text[:i]
    return text


def reason_kind(reason: str) -> str:
    """The kind of a dead letter's `reason` (the module's rule)."""
    kind = _first_clauses(QUOTED.sub("'...'", reason))
    return " ".join(NUMBER_OR_ID.sub("#", kind).split())
