"""Dev accuracy of each document runtime (LinkSettings.document_runtime): a built bundle's linker (the shipped
diseases-chemicals bundle: `bioel build benchmarks/diseases-chemicals.bundle.toml --output DIR`) run on the BC5CDR
development set with its document encoder on torch, ONNX Runtime float32 and ONNX Runtime int8, each runtime's NIL
thresholds calibrated on that set as the bundle's calibrate stage calibrates them (`calibrate_on_gold`).

    .venv/bin/python benchmarks/document_runtime_dev.py --bundle DIR [--limit N] [--json OUT]

Reported per runtime and entity type: the calibrated NIL threshold and the strict (span + concept) F1 with it and
without any, and the micro F1 over both types; then each fast runtime's difference from torch's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.kbs import DATA  # noqa: E402
from bioel_core.linking import DOCUMENT_RUNTIMES  # noqa: E402

DEV = DATA / "bc5cdr-corpus" / "CDR_DevelopmentSet.PubTator.txt"


def micro_f1(thresholds: dict) -> float:
    """Strict F1 over every type at the calibrated thresholds, from each type's kept, gold and precision counts."""
    correct = sum(t.precision * t.kept for t in thresholds.values())
    return 2 * correct / sum(t.kept + t.gold for t in thresholds.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a built bundle folder with a collective model")
    parser.add_argument("--limit", type=int, default=0, help="the first N dev documents only (0: all 500)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    import dataclasses

    from bioel_core.bundle import BuiltBundle
    from bioel_core.corpora import read_pubtator, write_pubtator
    from bioel_core.evaluation.nil_calibration import calibrate_on_gold

    gold = DEV
    if args.limit:
        gold = Path(tempfile.mkdtemp(prefix="bioel-dev-")) / "dev.pubtator"
        with open(gold, "w") as fh:
            write_pubtator(read_pubtator(DEV)[: args.limit], fh)
    spec = BuiltBundle.read(args.bundle).annotator_spec(thresholds=False, detect=True)
    rows = {}
    for runtime in DOCUMENT_RUNTIMES:
        found = calibrate_on_gold(dataclasses.replace(spec, document_runtime=runtime), str(gold), "pubtator")
        rows[runtime] = {
            "micro_f1": 100 * micro_f1(found),
            "types": {
                t: {"threshold": v.threshold, "f1": 100 * v.f1, "f1_without_threshold": 100 * v.f1_without_threshold}
                for t, v in sorted(found.items())
            },
        }
        print(f"{runtime}: done", file=sys.stderr)
    print(
        f"\nBC5CDR dev ({gold}), bundle {args.bundle}, detector {spec.detector}: strict F1, NIL thresholds calibrated per runtime"
    )
    print(f"{'runtime':<12}{'type':<10}{'threshold':>10}{'F1':>8}{'F1 no NIL':>11}{'micro F1':>10}{'vs torch':>10}")
    for runtime, row in rows.items():
        for t, v in row["types"].items():
            print(f"{runtime:<12}{t:<10}{v['threshold']:>10.4f}{v['f1']:>8.2f}{v['f1_without_threshold']:>11.2f}", end="")
            print(f"{row['micro_f1']:>10.2f}{row['micro_f1'] - rows['torch']['micro_f1']:>+10.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"bundle": args.bundle, "gold": str(gold), "runtimes": rows}, indent=2))


if __name__ == "__main__":
    main()
