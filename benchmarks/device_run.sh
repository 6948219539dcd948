#!/bin/bash
# The one call on a lent GPU machine (the `device` tool): goal A of issue 42 (train the collective model on BC5CDR
# and NCBI-disease together, `bioel train collective --device cuda`), then goal B of issue 43
# (benchmarks/gpu_workers.py: embed and link rates on cuda beside the machine's CPU, annotations compared).
#
# Here, first: `python benchmarks/device_payload.py stage CHECKOUT/.devpayload --kb Disease=.bench/Disease-kb
# Chemical=.bench/Chemical-kb` (the checkout the tool sends; the KBs made by `bioel ingest-kb` as benchmarks/kbs.py
# makes them), `/.devpayload/` in that checkout's .git/info/exclude, then the call, from its root:
#     export PYTHONUNBUFFERED=1; bash .devpayload/device_run.sh        (carry: .devpayload; timeout_s 580)
# It writes to $OUT: train.log, the trained model folder as a tar cut in 15 MiB parts (model.tar.part-*; `cat` them
# and untar), gpu_workers.json and .log. Settings by environment: EPOCHS, MAX_MINUTES, TRAIN_TIMEOUT, TOTAL (seconds
# the whole script may take), DEVICE, DEVICES, LINK_MAX_SECONDS, EMBED_LIMIT, LIMIT. Dry-run it here on the CPU with
# DEVICE=cpu DEVICES="cpu cpu" EPOCHS=1 MAX_MINUTES=0.3 and a payload staged with --sample.
set -o pipefail
T0=$(date +%s)
REPO=$PWD
PAYLOAD=$REPO/.devpayload
W=${WORK:-/tmp/w}
OUT=${OUT:-$W/out}
EPOCHS=${EPOCHS:-12}; MAX_MINUTES=${MAX_MINUTES:-3.5}; TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-420}; TOTAL=${TOTAL:-568}
LINK_MAX_SECONDS=${LINK_MAX_SECONDS-45}; EMBED_LIMIT=${EMBED_LIMIT-20000}
DEVICE=${DEVICE:-cuda}; DEVICES=${DEVICES:-cuda cpu}; PY=${PY:-python3}
mkdir -p "$OUT" "$W/bioel" "$W/shared"
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/train.log"; }
log "setup"
{ nvidia-smi; $PY -c "import torch, transformers, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available()); print('transformers', transformers.__version__)"; nproc; } >> "$OUT/train.log" 2>&1
tar -xJf "$PAYLOAD/code.tar.xz" -C "$W/bioel" || exit 11
tar -xJf "$PAYLOAD/data.tar.xz" -C "$W" || exit 12
cp -r "$REPO/models/disease-default" "$W/bioel/models/" || exit 13
cd "$W/bioel" || exit 14
export PYTHONPATH=$W/bioel:$W/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 GX_ANALYTICS_ENABLED=false
$PY benchmarks/device_payload.py unpack "$PAYLOAD/minilm" --init .bench/minilm-init --site "$W/site" >> "$OUT/train.log" 2>&1 || exit 15
# fail fast: what the GPU image lacks must not be imported, and the name encoder must open from the stand-in package
$PY -c "
import sys
for m in ('apache_beam', 'faiss', 'great_expectations'):
    sys.modules[m] = None
import bioel_core.training.collective, pipelines.cli, pipelines.cli_train, benchmarks.gpu_workers
from bioel_core.models import open_model
print('imports ok; name encoder', open_model(None).fingerprint()[:12])
" >> "$OUT/train.log" 2>&1 || { log "import check failed"; exit 16; }
log "training"
timeout "$TRAIN_TIMEOUT" $PY -m pipelines.cli train collective \
    --train-corpus ../shared/data/bc5cdr-corpus/CDR_TrainingSet.PubTator.txt Disease=../shared/data/ncbi-disease/raw_corpus/NCBItrainset_corpus.txt \
    --dev-corpus ../shared/data/bc5cdr-corpus/CDR_DevelopmentSet.PubTator.txt Disease=../shared/data/ncbi-disease/raw_corpus/NCBIdevelopset_corpus.txt \
    --names Disease=.bench/Disease-kb Chemical=.bench/Chemical-kb --init .bench/minilm-init \
    --output models/cdr-ncbi-collective --epochs "$EPOCHS" --max-minutes "$MAX_MINUTES" --seed 0 --device "$DEVICE" \
    --no-progress -v 2>&1 | tee -a "$OUT/train.log"
rc=$?
log "training exit $rc"
if [ -f models/cdr-ncbi-collective/bioel_encoder.json ]; then  # with no card.json: the best epoch, untuned
    tar -cf - -C models cdr-ncbi-collective | split -b 15M - "$OUT/model.tar.part-"
    log "model packed: $(ls "$OUT" | tr '\n' ' ')"
else
    log "no trained model"; exit 17
fi
LEFT=$(( TOTAL - ($(date +%s) - T0) - 10 ))
log "gpu_workers, $LEFT s left"
[ "$LEFT" -gt 30 ] || exit 18
timeout "$LEFT" $PY benchmarks/gpu_workers.py --model models/cdr-ncbi-collective \
    --kb Disease=.bench/Disease-kb Chemical=.bench/Chemical-kb \
    --input ../shared/data/pubmed_abstracts/abstracts_ncbi_bc5cdr.jsonl --devices $DEVICES \
    ${LINK_MAX_SECONDS:+--max-seconds $LINK_MAX_SECONDS} ${EMBED_LIMIT:+--embed-limit $EMBED_LIMIT} ${LIMIT:+--limit $LIMIT} \
    --json "$OUT/gpu_workers.json" 2>&1 | tee "$OUT/gpu_workers.log"
log "gpu_workers exit $?"
