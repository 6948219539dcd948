#!/usr/bin/env bash
# The main job on the committed sample, with no network: build the demo bundle (bundles/demo.toml: the MEDIC cut
# ingested, its names embedded with the shipped disease model, FAISS shards, each stage with its quality report)
# -> link the 40 sample abstracts with it -> score the links against the sample's gold annotations.
set -euo pipefail
OUT=${1:-demo_output}
BIOEL=".venv/bin/bioel"
PY=".venv/bin/python"
RUNNER="--runner FnApiRunner"
export HF_HUB_OFFLINE=1 GX_ANALYTICS_ENABLED=false

echo "== 1/3 build: bundles/demo.toml -> $OUT/bundle (ingest -> embed -> index; a stage runs only when its inputs changed)"
$BIOEL build bundles/demo.toml --output "$OUT/bundle" $RUNNER

echo; echo "== 2/3 link: sample_data/abstracts_sample.jsonl -> $OUT/links (Parquet + one PubTator file)"
$BIOEL link --bundle "$OUT/bundle" --input sample_data/abstracts_sample.jsonl --input-format jsonl \
  --output "$OUT/links" --single-file $RUNNER

echo; echo "== 3/3 score: the links against the sample's gold disease annotations (NCBI and BC5CDR disease types)"
# an output's tables live in the generation its manifest names (a re-run publishes a new one atomically)
generation() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1] + "/manifest.json"))["generation"])' "$1"; }
LINKS="$OUT/links/$(generation "$OUT/links")"
$BIOEL evaluate-e2e --gold sample_data/gold_ncbi_bc5cdr_sample.pubtator --pred "$OUT/links" \
  --types Disease SpecificDisease DiseaseClass Modifier CompositeMention

B="$OUT/bundle"
echo
echo "Results:"
echo "  bundle         $B (manifest.json: how to link; copy it anywhere, paths inside are relative)"
echo "    KB tables    $B/kb/Disease/$(generation "$B/kb/Disease")/{concepts,names}/   quality: $B/kb/Disease/quality/report.html"
echo "    embeddings   $B/embeddings/Disease/   quality: $B/embeddings/Disease/quality/report.html"
echo "    FAISS index  $B/index/Disease/        quality: $B/index/Disease/quality/report.html"
echo "  annotations    $LINKS/{annotations,documents}/   PubTator: $LINKS/pubtator/linked.pubtator"
echo "                 quality: $OUT/links/quality/report.html"
echo "  dead letters   $B/*/Disease/gen-*/dead_letter/, $LINKS/dead_letter/"
echo "  run it again:  the build does nothing (every stage up to date); the link replaces its output atomically"
