#!/usr/bin/env bash
# The main job on the committed sample, with no network: ingest the MEDIC cut -> embed its names with the
# shipped disease model -> FAISS shards -> link the 40 sample abstracts -> quality reports; then score the
# links against the sample's gold annotations.
set -euo pipefail
OUT=${1:-demo_output}
BIOEL=".venv/bin/bioel"
PY=".venv/bin/python"
RUNNER="--runner FnApiRunner"
export HF_HUB_OFFLINE=1 GX_ANALYTICS_ENABLED=false

echo "== 1/5 ingest: sample_data/medic_sample.txt -> $OUT/kb"
$BIOEL ingest-kb --input-format medic-biosyn --input sample_data/medic_sample.txt --output "$OUT/kb" --num-shards 2 $RUNNER

echo; echo "== 2/5 embed: every name with models/disease-default -> $OUT/embeddings"
$BIOEL embed --input "$OUT/kb" --output "$OUT/embeddings" --num-shards 2 $RUNNER

echo; echo "== 3/5 index: flat FAISS shards -> $OUT/index"
$BIOEL build-index --input "$OUT/embeddings" --output "$OUT/index" --num-shards 2 --index-kind flat $RUNNER

echo; echo "== 4/5 link: sample_data/abstracts_sample.jsonl -> $OUT/links (Parquet + one PubTator file)"
$BIOEL link --input sample_data/abstracts_sample.jsonl --input-format jsonl --index "Disease=$OUT/index" \
  --stop-list "Disease=models/stoplists/disease-medic.json" --output "$OUT/links" --output-format pubtator --single-file $RUNNER

echo; echo "== 5/5 score: the links against the sample's gold disease annotations (NCBI and BC5CDR disease types)"
# an output's tables live in the generation its manifest names (a re-run publishes a new one atomically)
generation() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1] + "/manifest.json"))["generation"])' "$1"; }
LINKS="$OUT/links/$(generation "$OUT/links")"
$BIOEL evaluate-e2e --gold sample_data/gold_ncbi_bc5cdr_sample.pubtator --pred "$OUT/links" \
  --types Disease SpecificDisease DiseaseClass Modifier CompositeMention

echo
echo "Results:"
echo "  KB tables      $OUT/kb/$(generation "$OUT/kb")/{concepts,names}/   quality: $OUT/kb/quality/report.html"
echo "  embeddings     $OUT/embeddings/$(generation "$OUT/embeddings")/embeddings/ quality: $OUT/embeddings/quality/report.html"
echo "  FAISS index    $OUT/index/$(generation "$OUT/index")/shards/          quality: $OUT/index/quality/report.html"
echo "  annotations    $LINKS/{annotations,documents}/   PubTator: $LINKS/pubtator/linked.pubtator"
echo "                 quality: $OUT/links/quality/report.html"
echo "  dead letters   $OUT/*/gen-*/dead_letter/   manifests (each names its generation): $OUT/*/manifest.json"
