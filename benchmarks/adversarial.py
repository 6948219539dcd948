"""The adversarial suite's summary (issue 40): bad-input classes x readers and faults x verbs, with the outcome of each.

    python benchmarks/adversarial.py [--markdown OUT.md]

Reader-level cases (every corpus reader, every KB reader) are run here, from the same tables the tests assert
(tests/test_adversarial_readers.py, tests/test_adversarial_kb.py): each row prints the valid records kept, the dead
letters, and the valid records lost (must be 0). Verb-level cases (`bioel link`, `ingest-kb`, `embed`,
`build-index` under faults; link on unreadable files; ingest-kb exit codes) take minutes each and are printed from
their tables, which tests/test_adversarial_faults.py, tests/test_link_pipeline.py and tests/test_adversarial_kb.py
assert on every `make test`. Exit code 1 when a reader-level case does not come out as its table says.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def corpus_rows(folder: Path) -> tuple[list[tuple], int]:
    import test_adversarial_readers as t

    rows, wrong = [], 0
    for case in t.CASES:
        kept, dead = t.outcome(case, folder)
        lost = len(set(case.kept) - set(kept))
        ok = kept == list(case.kept) and len(dead) == case.dead
        wrong += not ok
        rows.append(
            (
                case.reader,
                case.fault,
                f"{len(kept)} of {len(case.kept)}",
                len(dead),
                lost,
                "as the table says" if ok else "DIFFERS",
            )
        )
    return rows, wrong


def kb_rows(folder: Path) -> tuple[list[tuple], int]:
    import test_adversarial_kb as t

    rows, wrong = [], 0
    for i, case in enumerate(t.CASES):
        sub = folder / f"kb{i}"
        sub.mkdir()
        concepts, dead, stats, _ = t.read(case, sub)
        ok = len(concepts) == case.kept and len(dead) == len(case.dead) and all(s.reconciles() for s in stats)
        wrong += not ok
        rows.append(
            (
                case.reader,
                case.bad,
                f"{len(concepts)} of {case.kept}",
                len(dead),
                max(case.kept - len(concepts), 0),
                "as the table says, counts reconcile" if ok else "DIFFERS",
            )
        )
    return rows, wrong


def verb_rows() -> tuple[list[tuple], int]:
    """The verb-level rows, and the false successes among them: a run that left a file unread and exited 0 though
    not told to publish what it read (--fail-on none)."""
    import test_adversarial_faults as faults
    import test_adversarial_kb as kb
    import test_link_pipeline as link

    rows = [(c.verb, c.fault, c.outcome, c.exit_code, c.previous) for c in faults.CASES]
    rows += [
        (
            "ingest-kb",
            f"{c.reader} {c.file}: {c.bad}",
            f"{c.kept} concepts, {len(c.dead)} dead letter(s)",
            c.exit_code,
            "reconciled" if c.exit_code == 0 else "nothing published",
        )
        for c in kb.CLI_CASES
    ]
    rows += [
        (
            "link",
            case,
            f"{linked} documents, {dead} dead letter(s), {len(unread)} file(s) unread",
            code,
            "published" if code == 0 else "nothing published",
        )
        for case, _, _, linked, dead, unread, code in link.UNREAD_FILE_CASES
    ]
    false_success = sum(
        1 for _, _, flags, _, _, unread, code in link.UNREAD_FILE_CASES if unread and code == 0 and "--fail-on" not in flags
    )
    return rows, false_success


def table(header: tuple, rows: list[tuple]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", help="also write the tables here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus, corpus_wrong = corpus_rows(Path(tmp))
        kb, kb_wrong = kb_rows(Path(tmp))
    verbs, false_success = verb_rows()
    by_reader: dict[str, int] = defaultdict(int)
    for row in corpus + kb:
        by_reader[row[0]] += 1
    lost = sum(r[4] for r in corpus + kb)
    out = [
        f"Reader level: {len(corpus)} corpus cases, {len(kb)} KB cases over {len(by_reader)} readers; valid records lost: "
        f"{lost}; cases not as their table says: {corpus_wrong + kb_wrong}. Verb level: {len(verbs)} cases; false "
        f"successes (a file left unread, exit 0 without --fail-on none): {false_success}.",
        "",
        "### Bad records x corpus readers (each bad record is record 2 of 5)",
        "",
        table(("reader", "bad input", "valid kept", "dead letters", "valid lost", "outcome"), corpus),
        "",
        "### Bad records x KB readers (placed between valid records)",
        "",
        table(("reader", "bad input", "valid kept", "dead letters", "valid lost", "outcome"), kb),
        "",
        "### Faults x verbs (asserted by make test)",
        "",
        table(("verb", "fault or input", "outcome", "exit code", "previous state"), verbs),
    ]
    text = "\n".join(out)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 1 if corpus_wrong + kb_wrong or lost or false_success else 0


if __name__ == "__main__":
    sys.exit(main())
