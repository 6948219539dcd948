# Worker / launcher image for bioel pipelines: usable as a Dataflow or portable-runner custom container
# (--sdk_container_image) and to launch jobs (`docker run IMAGE bioel ...`).
FROM apache/beam_python3.11_sdk:2.77.0

WORKDIR /opt/bioel
# Point TORCH_INDEX_URL at PyTorch's CPU wheel index for a slim CPU image; left empty, pip takes the
# default (CUDA) build, which is what a GPU worker image wants.
ARG TORCH_INDEX_URL=""
RUN pip install --no-cache-dir torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
COPY requirements.lock.txt .
RUN grep -v '^torch==' requirements.lock.txt > /tmp/req.txt && pip install --no-cache-dir -r /tmp/req.txt
COPY setup.py README.md ./
COPY bioel_core ./bioel_core
COPY pipelines ./pipelines
COPY schemas ./schemas
COPY models ./models
RUN pip install --no-cache-dir --no-deps .

ENV HF_HUB_OFFLINE=1 GX_ANALYTICS_ENABLED=false BIOEL_DEFAULT_MODEL=/opt/bioel/models/disease-default
# The Beam SDK harness stays the entrypoint so the image works as a worker; launch jobs with `bioel ...`.
ENTRYPOINT ["/opt/apache/beam/boot"]
