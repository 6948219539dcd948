"""`bioel link` gives the same bytes however it runs: over the 2,292 PubMed abstracts of NCBI-disease and
BC5CDR (../shared/data/pubmed_abstracts), with a built bundle (--bundle) or diseases to MEDIC and chemicals to MeSH
tree D (benchmarks/kbs.py).

    .venv/bin/python benchmarks/reproducible_link.py [--bundle DIR | --model DIR] [--detector D] [--document-runtime R]
                                                     [--work DIR] [--json OUT] [--limit N]

Four runs into four output folders, then every Parquet file of each compared byte for byte with the first:
- in process (the local runner, one worker), twice into the same folder (the second run replaces the first);
- two worker processes (--direct_num_workers=2 --direct_running_mode=multi_processing);
- --incremental: first the first half of the abstracts, then all of them into the same folder.
Exits 1 when any file differs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bulk_link import ABSTRACTS, Linker, abstracts_parser, corpus  # noqa: E402
from benchmarks.kbs import BIOEL  # noqa: E402
from bioel_core.tables import data_root  # noqa: E402

TWO_WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def table_bytes(folder: Path) -> dict[str, bytes]:
    root = data_root(folder)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.glob("*/*.parquet"))}


def main() -> None:
    args = abstracts_parser(__doc__.splitlines()[0]).parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    linker = Linker.of(args, work)
    source = corpus(work, args.limit) if args.limit else ABSTRACTS
    lines = [line for line in open(source) if line.strip()]
    half = work / f"repro-first-half-{len(lines)}.jsonl"
    half.write_text("".join(lines[: len(lines) // 2]))

    def link(inputs: Path, output: Path, *extra: str) -> float:
        began = time.perf_counter()
        command = [
            *BIOEL,
            "link",
            *linker.flags,
            "--input",
            str(inputs),
            "--input-format",
            "jsonl",
            "--output",
            str(output),
            "--no-quality",
            "--runner",
            "FnApiRunner",
            *extra,
        ]
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{' '.join(command)} failed:\n{proc.stdout}\n{proc.stderr}")
        return time.perf_counter() - began

    runs = work / f"repro-{linker.detector}"
    # a folder left by an earlier run would be kept by the --incremental run as "nothing changed"
    shutil.rmtree(runs, ignore_errors=True)
    seconds = {
        "in process": link(source, runs / "one"),
        "in process, again over its own output": link(source, runs / "one-again"),
    }
    seconds["in process, again over its own output"] += link(source, runs / "one-again")
    seconds["2 workers"] = link(source, runs / "two", *TWO_WORKERS)
    seconds["--incremental after the first half"] = link(half, runs / "incremental", "--incremental") + link(
        source, runs / "incremental", "--incremental"
    )
    reference = table_bytes(runs / "one")
    rows = []
    for label, folder in (
        ("in process", "one"),
        ("in process, again over its own output", "one-again"),
        ("2 workers", "two"),
        ("--incremental after the first half", "incremental"),
    ):
        found = table_bytes(runs / folder)
        differ = sorted(f for f in reference.keys() | found.keys() if reference.get(f) != found.get(f))
        rows.append({"run": label, "seconds": round(seconds[label], 1), "files": len(found), "differing_files": differ})
    print(f"\n`bioel link` over {len(lines):,} abstracts ({source.name}), {linker.label}, model {linker.model}")
    print(f"{'run':<42}{'seconds':>9}{'files':>7}  identical to the first run")
    for r in rows:
        print(
            f"{r['run']:<42}{r['seconds']:>9.1f}{r['files']:>7}  {'yes' if not r['differing_files'] else 'NO: ' + ', '.join(r['differing_files'])}"
        )
    identical = all(not r["differing_files"] for r in rows)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "abstracts": len(lines),
                    "bundle": args.bundle,
                    "model": linker.model,
                    "runs": rows,
                    "byte_identical": identical,
                },
                indent=2,
            )
        )
    sys.exit(0 if identical else 1)


if __name__ == "__main__":
    main()
