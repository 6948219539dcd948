#!/usr/bin/env bash
# The image's entrypoint: `docker run IMAGE bioel VERB ...` or `docker run IMAGE VERB ...` runs the bioel CLI;
# anything else (a runner starting a worker passes --id=..., --logging_endpoint=..., ...) goes to Beam's SDK
# harness, so the image still serves as a Dataflow / portable-runner custom container.
set -euo pipefail

# bioel's verbs (tests/test_packaging.py checks this list against the CLI); a verb such as `link` must not
# reach coreutils' link(1) or Beam's boot
VERBS="ingest-kb report evaluate probe evaluate-e2e train ensemble embed build-index link calibrate-nil build refresh"
BOOT="${BEAM_BOOT:-/opt/apache/beam/boot}"

if [[ "${1:-}" == "bioel" ]]; then
  shift
  exec bioel "$@"
fi
for verb in $VERBS; do
  if [[ "${1:-}" == "$verb" ]]; then
    exec bioel "$@"
  fi
done
exec "$BOOT" "$@"
