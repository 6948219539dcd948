"""A full `bioel link` then a no-op `bioel link --incremental` (the same inputs, nothing changed), side by side: both
wall times (each a whole `bioel` process, as a scheduled job runs it) and their ratio printed, with two copy formats;
exits 1 unless both copies are still there, whole, after the incremental run and it took under a quarter of the full.

    .venv/bin/python benchmarks/incremental_link.py [--input FILE] [--input-format FMT] [--json OUT] [bioel link flags...]

Default input: the 2,292 shared PubMed abstracts (../shared/data/pubmed_abstracts). The linker: the demo bundle
(bundles/demo.toml: the committed MEDIC sample, the shipped disease model), built by `bioel build` into
.bench/incremental_link/bundle (gitignored) and brought up to date there on each run (seconds when it is).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIOEL = [sys.executable, "-m", "pipelines.cli"]
CACHE = ROOT / ".bench" / "incremental_link"
ABSTRACTS = ROOT.parent / "shared" / "data" / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl"
COPIES = ("pubtator", "bioc-xml")


def bioel(*argv: str) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    proc = subprocess.run([*BIOEL, *argv], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if proc.returncode:
        raise SystemExit(f"bioel {' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return seconds, proc


def copies_of(output: Path) -> dict[str, int]:
    """Each interchange copy of the state in `output` whose files are all there: its documents."""
    manifest = json.loads((output / "manifest.json").read_text())
    generation = output / manifest["generation"]
    return {
        fmt: manifest["outputs"][fmt]["documents"]
        for fmt in COPIES
        if fmt in manifest["outputs"] and all((generation / f).is_file() for f in manifest["outputs"][fmt]["files"])
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default=str(ABSTRACTS), help="the corpus (default: the 2,292 shared abstracts)")
    parser.add_argument("--input-format", default="jsonl")
    parser.add_argument("--json", help="write the figures here")
    args, extra = parser.parse_known_args()
    bundle = CACHE / "bundle"
    bioel("build", str(ROOT / "bundles" / "demo.toml"), "--output", str(bundle))
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="links-", dir=CACHE))
    try:
        output = scratch / "links"
        link = [
            "link",
            "--bundle",
            str(bundle),
            "--input",
            args.input,
            "--input-format",
            args.input_format,
            "--output",
            str(output),
            "--output-format",
            *COPIES,
            *extra,
        ]
        full, _ = bioel(*link)
        documents = json.loads((output / "manifest.json").read_text())["outputs"]["documents"]["rows"]
        noop, proc = bioel(*link, "--incremental")
        copies = copies_of(output)
    finally:
        shutil.rmtree(scratch)
    ratio = noop / full
    print(
        f"bioel link --bundle {bundle.relative_to(ROOT)} --input {args.input} ({documents:,} documents), copies "
        f"{' + '.join(COPIES)}"
    )
    print(f"  full run:                      {full:8.1f} s")
    print(f"  no-op --incremental run:       {noop:8.1f} s  ({ratio:.1%} of the full run): {proc.stdout.strip()}")
    print(f"  copies after the incremental run: {', '.join(f'{fmt} ({n:,} documents)' for fmt, n in copies.items()) or 'none'}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"input": args.input, "documents": documents, "full_s": full, "noop_s": noop, "ratio": ratio, "copies": copies},
                indent=2,
            )
        )
    if ratio >= 0.25 or sorted(copies) != sorted(COPIES) or set(copies.values()) != {documents}:
        sys.exit(1)


if __name__ == "__main__":
    main()
