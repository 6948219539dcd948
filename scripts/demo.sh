#!/usr/bin/env bash
# The main job on the committed sample, with no network: ingest the sample MEDIC cut -> Parquet tables,
# manifest, dead letters and the data-quality report. Later stages join this chain as they land.
set -euo pipefail
OUT=${1:-demo_output}
BIOEL=".venv/bin/bioel"
export HF_HUB_OFFLINE=1 GX_ANALYTICS_ENABLED=false

echo "== ingest: sample_data/medic_sample.txt -> $OUT/kb"
$BIOEL ingest-kb --kb medic-biosyn --input sample_data/medic_sample.txt --output "$OUT/kb" --num-shards 2 --runner FnApiRunner

echo
echo "Results:"
echo "  tables        $OUT/kb/concepts/  $OUT/kb/names/  (Parquet)"
echo "  dead letters  $OUT/kb/dead_letter/"
echo "  manifest      $OUT/kb/manifest.json"
echo "  quality       $OUT/kb/quality/data_docs/index.html  $OUT/kb/quality/summary.json"
