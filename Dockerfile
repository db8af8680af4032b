# koordlet (Python) image: the agent and its cffi helper, built in two stages so the compiler never
# reaches the runtime image. Build: docker build -t koordlet-py:latest .
#
# Stage 1 compiles csrc/ through cffi (setup.py's cffi_modules) into a wheel, and collects wheels of the
# dependencies, so stage 2 installs from local files only.
FROM python:3.11-slim AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The files setuptools needs for the sdist-free wheel build: metadata, the cffi shim and C sources,
# and the two packages (tests, bench and deploy stay out of the image).
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY csrc/ csrc/
COPY koordlet/ koordlet/
COPY qosplugins/ qosplugins/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Stage 2: the runtime. It runs as root on purpose: cgroup and resctrl files are root's, and killing BE
# processes needs root (the DaemonSet adds only CAP_KILL, the container is not privileged).
# The version check fails the build if the helper did not compile: the agent would otherwise fall back
# to pure Python without a word.
FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels koordlet \
    && rm -rf /wheels \
    && koordlet version | grep -q "native helpers: compiled"
# Bytecode was compiled at install time; the DaemonSet's root filesystem is read-only anyway.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# The DaemonSet mounts the host's roots here (--cgroup-root-dir=/host-cgroup/ ...) and an emptyDir
# at /metric-data/ for the metric cache.
EXPOSE 9316
ENTRYPOINT ["koordlet", "run"]
