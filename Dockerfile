# Worker / launcher image for bioel pipelines: usable as a Dataflow or portable-runner custom container
# (--sdk_container_image) and to launch jobs (`docker run IMAGE bioel link ...`, or `docker run IMAGE link ...`).
FROM apache/beam_python3.11_sdk:2.77.0

WORKDIR /opt/bioel
# Point TORCH_INDEX_URL at PyTorch's CPU wheel index for a slim CPU image; left empty, pip takes the
# default (CUDA) build, which is what a GPU worker image wants.
ARG TORCH_INDEX_URL=""
RUN pip install --no-cache-dir torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
# the runtime pins only (the test tools are in requirements-dev.lock.txt); the lock is a whole closure, so
# --no-deps keeps out what a package declares but bioel never imports (sentence-transformers)
COPY requirements.lock.txt .
RUN grep -v '^torch==' requirements.lock.txt > /tmp/req.txt && pip install --no-cache-dir --no-deps -r /tmp/req.txt
COPY setup.py README.md ./
COPY bioel ./bioel
COPY bioel_core ./bioel_core
COPY pipelines ./pipelines
COPY schemas ./schemas
# what the wheel ships as the bioel_models package (setup.py): the disease and chemical models and the stop-lists
COPY models/README.md ./models/
COPY models/disease-default ./models/disease-default
COPY models/chemical-default ./models/chemical-default
COPY models/stoplists ./models/stoplists
RUN pip install --no-cache-dir --no-deps . && bioel --help > /dev/null

ENV HF_HUB_OFFLINE=1 GX_ANALYTICS_ENABLED=false
# `bioel ...` or a bioel verb runs the CLI; anything else (the runner's --id=... flags) starts Beam's SDK
# harness (/opt/apache/beam/boot), so the image still works as a worker
COPY docker/entrypoint.sh /opt/bioel/entrypoint.sh
ENTRYPOINT ["/opt/bioel/entrypoint.sh"]
