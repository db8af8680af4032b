# koordlet (Python) image: the agent and its cffi helper, built in two stages so the compiler never
# reaches the runtime image. Build: docker build -t koordlet-py:0.1.0 .
#
# Stage 1 compiles csrc/ through cffi (setup.py's cffi_modules) into a wheel, and collects wheels of the
# dependencies at the versions of requirements.lock, so stage 2 installs from local files only. The full
# Python image already has gcc and the libc headers: no apt-get, hence no unpinned system package.
FROM python:3.11-bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
# The files setuptools needs for the sdist-free wheel build: metadata, the cffi shim and C sources,
# and the three packages (tests, bench and deploy stay out of the image).
COPY pyproject.toml setup.py MANIFEST.in README.md requirements.lock ./
COPY csrc/ csrc/
COPY koordlet/ koordlet/
COPY koordshared/ koordshared/
COPY koord/ koord/
COPY qosplugins/ qosplugins/
RUN pip wheel --no-cache-dir --constraint requirements.lock --wheel-dir /wheels .

# Stage 2: the runtime. It runs as root on purpose: cgroup and resctrl files are root's, and killing BE
# processes needs root (our DaemonSet adds only CAP_KILL, the container is not privileged).
# The version check fails the build if the helper did not compile: the agent would otherwise fall back
# to pure Python without a word.
FROM python:3.11-slim-bookworm
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=build /wheels /wheels
COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-cache-dir --no-index --find-links=/wheels --constraint /tmp/requirements.lock \
        /wheels/koordlet-*.whl \
    && rm -rf /wheels /tmp/requirements.lock \
    && koordlet version | grep -q "native helpers: compiled" \
    && ln -s "$(command -v koordlet)" /koordlet
# Bytecode was compiled at install time; the DaemonSet's root filesystem is read-only anyway.
# The KOORDLET_* defaults are koordlet's DaemonSet-mode paths, so Koordinator's own koordlet DaemonSet
# (command /koordlet, its mounts, its arguments) runs this image unchanged; flags override them.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    KOORDLET_CGROUP_ROOT_DIR=/host-cgroup/ \
    KOORDLET_SYS_ROOT_DIR=/host-sys/ \
    KOORDLET_SYS_FS_ROOT_DIR=/host-sys-fs/ \
    KOORDLET_VAR_RUN_ROOT_DIR=/host-var-run/ \
    KOORDLET_PROC_ROOT_DIR=/proc/ \
    KOORDLET_TSDB_PATH=/metric-data/
EXPOSE 9316
ENTRYPOINT ["koordlet", "run"]
