# Production image of the response-ranking service: ONNX Runtime and OpenVINO on CPU (`--backend auto`
# serves the faster on the host's CPU), the shipped model baked in.
#   docker build -t ranking-service:0.1.0 .
#   docker run --rm -p 8000:8000 ranking-service:0.1.0
# Flags after the image name go to `ranker serve` (e.g. `--log-level debug`); every setting is
# also a RANKER_* variable (`-e RANKER_ONNX__INTRA_OP_THREADS=2`).

# Both stages use the same image: the venv's interpreter is a link to the base image's python.
FROM python:3.11.15-slim-bookworm AS builder

# No version check: it is a network call whose only output is a warning in the build log.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python -m venv /opt/venv
WORKDIR /src
# Only what the project's install needs: the project file, the package's root modules and its
# serving subpackage. training/, export/ and evaluation/ are not in the build context
# (.dockerignore), so nothing of them lands in the image (`ranker train` there says so).
COPY pyproject.toml ./
COPY src/dialogue_ranker/__init__.py src/dialogue_ranker/cli.py src/dialogue_ranker/
COPY src/dialogue_ranker/serving/ src/dialogue_ranker/serving/
# The project's base install, the same step as `make serve` (no extras: no torch at serving time). It
# includes OpenVINO (a serving dependency on this platform), so `auto` chooses among every runtime.
RUN /opt/venv/bin/pip install --no-cache-dir .


FROM python:3.11.15-slim-bookworm AS runtime

LABEL org.opencontainers.image.title="ranking-service" \
      org.opencontainers.image.description="Response-ranking inference service for dialogue systems: calibrated cross-encoder scores over HTTP." \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

# A fixed numeric UID so that Kubernetes' runAsNonRoot can verify it without a passwd lookup;
# --no-log-init keeps a high UID from creating a huge sparse /var/log/lastlog.
RUN groupadd --system --gid 10001 ranker \
    && useradd --system --no-log-init --uid 10001 --gid 10001 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin ranker

ENV PATH="/opt/venv/bin:${PATH}" \
    VIRTUAL_ENV=/opt/venv \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    RANKER_HOST=0.0.0.0 \
    RANKER_PORT=8000 \
    RANKER_MODEL=/app/models/dialogue-minilm-l6 \
    RANKER_AUTO__CACHE_DIR=/tmp/ranker

WORKDIR /app
# Files stay owned by root: the service only reads them, so the ranker user cannot alter code or model.
COPY --from=builder /opt/venv /opt/venv
# The package is installed in the venv (its guidelines asset with it); the model directory is
# named by RANKER_MODEL above.
COPY models/dialogue-minilm-l6/ models/dialogue-minilm-l6/

USER 10001:10001
EXPOSE 8000

# Liveness only (/healthz answers while the model loads); readiness is /readyz. The slim image has
# no curl, so the probe is the standard library, on the port the service was told to use.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('RANKER_PORT', '8000') + '/healthz', timeout=4)"]

# Exec form: the server is PID 1 and receives SIGTERM itself; uvicorn then stops accepting, lets
# requests in flight finish and runs the app's shutdown (batchers, backends) before exiting 0.
# uvicorn waits at most RANKER_SHUTDOWN_TIMEOUT_S (15 s by default) for them, so give the runtime's
# stop grace period (`docker stop -t`, Kubernetes' terminationGracePeriodSeconds) a few seconds more.
STOPSIGNAL SIGTERM
ENTRYPOINT ["ranker", "serve"]
