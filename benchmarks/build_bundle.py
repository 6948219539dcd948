"""`bioel build` twice on unchanged inputs: the first builds every stage, the second finds each up to date and runs
none. Both wall times printed (each a whole `bioel` process: start, imports, hashing); exits 1 unless the second
re-ran no stage and took under a tenth of the first.

    .venv/bin/python benchmarks/build_bundle.py [--bundle FILE] [--output DIR] [--json OUT] [bioel build flags...]

Default bundle: bundles/demo.toml (the committed sample); benchmarks/diseases-chemicals.bundle.toml builds the
benchmark KBs (../shared/data). The output folder (default: a new temporary one) must not hold a bundle yet: the
first run is to build everything.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIOEL = [sys.executable, "-m", "pipelines.cli"]


def build(bundle: str, output: Path, extra: list[str]) -> tuple[float, str]:
    command = [*BIOEL, "build", bundle, "--output", str(output), "--runner", "FnApiRunner", *extra]
    began = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return seconds, proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=str(ROOT / "bundles" / "demo.toml"), help="the bundle file")
    parser.add_argument("--output", help="the bundle folder (default: a new temporary folder)")
    parser.add_argument("--json", help="write the figures here")
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="bioel-build-") as scratch:
        output = Path(args.output) if args.output else Path(scratch) / "bundle"
        if (output / "manifest.json").exists():
            raise SystemExit(f"{output} already holds a bundle: the first build would not build every stage")
        first, first_log = build(args.bundle, output, extra)
        second, second_log = build(args.bundle, output, extra)
    ran = [line for line in second_log.splitlines() if ": running (" in line]
    built = sum(": running (" in line for line in first_log.splitlines())
    print(f"bioel build {args.bundle}")
    print(f"  first build (every stage, {built} run): {first:8.1f} s")
    print(f"  second build (unchanged inputs):    {second:8.1f} s  ({second / first:.1%} of the first; stages run: {len(ran)})")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"bundle": args.bundle, "first_s": first, "second_s": second, "stages_first": built, "stages_second": len(ran)},
                indent=2,
            )
        )
    if ran or second >= first / 10:
        sys.exit(1)


if __name__ == "__main__":
    main()
