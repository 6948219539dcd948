"""A synthetic UMLS MRCONSO.RRF of any size, in the file's real layout, for ingest benchmarks at UMLS scale.

    python benchmarks/synthetic_mrconso.py --rows 10000000 --output DIR [--seed 0] [--mesh-terms TSV]

Writes DIR/MRCONSO.RRF: the 18 pipe-separated fields of the UMLS Reference Manual (CUI|LAT|TS|LUI|STT|SUI|ISPREF|
AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF|), a trailing pipe, rows sorted by CUI as MetamorphoSys writes
them. Shaped like the 2024AA release: about 3.4 atoms a concept (geometric), the first one the concept's English
preferred atom (TS=P, STT=PF, ISPREF=Y), three quarters of the atoms English, a mix of sources and term types, a
few percent suppressed, strings of one to six words from a pseudo-medical vocabulary. With --mesh-terms (a MeSH
thesaurus TSV, as ../shared/data/mesh has), each MeSH descriptor follows as one more concept whose English atoms are
its terms, so that real text holds names of the KB. The same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterable
from pathlib import Path

LANGUAGES = (("ENG", 75), ("SPA", 9), ("FRE", 4), ("GER", 3), ("POR", 3), ("DUT", 2), ("ITA", 2), ("JPN", 2))
SOURCES = (
    ("SNOMEDCT_US", "PT"),
    ("SNOMEDCT_US", "FN"),
    ("SNOMEDCT_US", "SY"),
    ("MSH", "MH"),
    ("MSH", "ET"),
    ("MSH", "PEP"),
    ("NCI", "PT"),
    ("NCI", "SY"),
    ("MEDDRA", "LLT"),
    ("MDR", "PT"),
    ("RXNORM", "IN"),
    ("LNC", "LN"),
    ("ICD10CM", "PT"),
    ("CHV", "SY"),
    ("MTH", "AB"),
)
SUPPRESS = (("N", 95), ("O", 3), ("E", 1), ("Y", 1))
SYLLABLES = (
    "car",
    "dio",
    "neo",
    "pla",
    "sia",
    "hep",
    "ato",
    "itis",
    "gly",
    "co",
    "gen",
    "pro",
    "tein",
    "ase",
    "leu",
    "ke",
    "mia",
    "neu",
    "ro",
    "path",
    "y",
    "os",
    "teo",
    "por",
    "sis",
    "my",
    "o",
    "cyte",
    "lym",
    "pho",
    "ma",
    "derm",
    "al",
    "ren",
    "in",
    "sul",
    "fi",
    "bro",
    "tic",
    "vas",
    "cu",
    "lar",
)


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(size)]


def _weighted(pairs):
    values, weights = zip(*pairs)
    return list(values), list(weights)


def mesh_terms(path: Path) -> list[list[str]]:
    """Per descriptor of a MeSH thesaurus TSV, read by the KB reader `bioel ingest-kb --input-format mesh-tsv` uses,
    its term strings, the descriptor's name first; descriptors in file order."""
    from bioel_core.kb.mesh_tsv import MeshTsvReader
    from bioel_core.records import ConceptRecord, NameRecord

    terms: dict[str, list[str]] = {}
    for item in MeshTsvReader().read([str(path)]):
        if isinstance(item, ConceptRecord):
            terms[item.concept_id] = [item.preferred_name]
        elif isinstance(item, NameRecord) and item.name not in (names := terms[item.concept_id]):
            names.append(item.name)
    return list(terms.values())


def rows(n: int, seed: int = 0, real: Iterable[list[str]] = ()):
    """The n MRCONSO lines (with newline), CUI-sorted, then one concept a list of `real` strings (its English MeSH
    atoms, the first preferred), so that real text holds the KB's names as it would a real release's."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    langs, lang_w = _weighted(LANGUAGES)
    supp, supp_w = _weighted(SUPPRESS)
    written, cui = 0, 0
    while written < n:
        cui += 1
        atoms = min(n - written, 1 + int(rng.expovariate(1 / 2.4)))
        base = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        for a in range(atoms):
            preferred = a == 0
            lat = "ENG" if preferred else rng.choices(langs, lang_w)[0]
            sab, tty = rng.choice(SOURCES)
            # other atoms: the preferred string again (another source or language) or a variant of it
            text = base if preferred or rng.random() < 0.3 else f"{base} {' '.join(rng.sample(words, rng.randint(1, 2)))}"
            code = f"{sab[:1]}{rng.randrange(10**7):07d}"
            written += 1
            yield (
                f"C{cui:07d}|{lat}|{'P' if preferred else rng.choice('PS')}|L{written:07d}|"
                f"{'PF' if preferred else rng.choice(('PF', 'VO', 'VC', 'VCW'))}|S{written:07d}|"
                f"{'Y' if preferred else rng.choice('YN')}|A{written:08d}||{code}||{sab}|{tty}|{code}|{text}|"
                f"{rng.choice('0123')}|{'N' if preferred else rng.choices(supp, supp_w)[0]}|{rng.choice(('', '256', '4096'))}|\n"
            )
    for strings in real:
        cui += 1
        code = f"D{cui:07d}"
        for a, text in enumerate(strings):
            written += 1
            yield (
                f"C{cui:07d}|ENG|P|L{written:07d}|{'PF' if a == 0 else 'VO'}|S{written:07d}|{'Y' if a == 0 else 'N'}|"
                f"A{written:08d}||{code}|{code}|MSH|{'MH' if a == 0 else 'ET'}|{code}|{text}|0|N|256|\n"
            )


def write_mrconso(folder: Path, n: int, seed: int = 0, real: Iterable[list[str]] = ()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "MRCONSO.RRF"
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        out.writelines(rows(n, seed, real))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--output", required=True, help="folder to write MRCONSO.RRF into")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mesh-terms", type=Path, help="a MeSH thesaurus TSV whose descriptors are appended as real concepts")
    args = ap.parse_args()
    print(write_mrconso(Path(args.output), args.rows, args.seed, mesh_terms(args.mesh_terms) if args.mesh_terms else ()))


if __name__ == "__main__":
    main()
