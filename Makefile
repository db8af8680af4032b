# Entry points, each doing all of its own set-up on a fresh clone:
#   make run   venv -> install -> the agent running standalone on this host
#   make loop  venv -> install -> the whole colocation loop on this host (root, cgroup v1; no cluster)
#   make test  venv -> install (+ Debian packages the tests need, when root) -> Kubernetes binaries (Go,
#              cached outside the repo) -> lint, types, imports, dead code, tests (the real-cluster tier too)
#   make cluster / make cluster-stop   a real single-node Kubernetes with our stack on it (root, Go)
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
STATE   ?= $(CURDIR)/var
ARGS    ?=
PYTEST_ARGS ?=
DEBIAN_TOOLS := stress-ng:stress-ng iperf3:iperf3 prometheus:prometheus promtool:prometheus gcc:gcc kubectl:kubernetes-client openssl:openssl losetup:mount ip:iproute2 tc:iproute2 \
	containerd:containerd runc:runc busybox:busybox-static /usr/lib/cni/bridge:containernetworking-plugins
KUBE_BUILD := $(STATE)/kube-build.txt

.PHONY: run loop test lint bench deps-system kube-binaries cluster cluster-stop clean

$(STAMP): pyproject.toml setup.py requirements.lock $(wildcard csrc/*.c csrc/*.h)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c requirements.lock -e '.[test]'
	@touch $@

deps-system:
	@missing=""; for pair in $(DEBIAN_TOOLS); do \
	  tool=$${pair%%:*}; pkg=$${pair##*:}; \
	  command -v $$tool >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "note: missing tools ($$missing); tests that need them will be skipped (run as root to install)"; fi; \
	fi

run: $(STAMP)
	@mkdir -p $(STATE)/run
	$(BIN)/koordlet run --tsdb-path $(STATE)/metric-data --var-run-root-dir $(STATE)/run $(ARGS)

loop: $(STAMP)
	$(BIN)/python -m tests.loop $(ARGS)
	@echo "(the fake API server and simulated nodes; the real thing: make cluster, see the README)"

# The real cluster's binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, etcd) from
# tests/realcluster/kubebin; the build's wall time is shown at the end of the test run.
kube-binaries: $(STAMP)
	@mkdir -p $(STATE)
	@if command -v go >/dev/null 2>&1; then \
	  $(BIN)/python -m tests.realcluster build --timing-file $(KUBE_BUILD) || exit 1; \
	else echo "note: no Go toolchain: the real-cluster tier will be skipped (CI fails it)" > $(KUBE_BUILD); cat $(KUBE_BUILD); fi

cluster: $(STAMP) deps-system kube-binaries
	$(BIN)/python -m tests.realcluster up $(ARGS)

cluster-stop: $(STAMP)
	$(BIN)/python -m tests.realcluster down

lint: $(STAMP)
	$(BIN)/ruff check koordlet koordshared koord qosplugins tests bench .ci deploy setup.py
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python .ci/deadcode.py

test: $(STAMP) deps-system kube-binaries lint
	KOORD_REAL_BUILD="$$(cat $(KUBE_BUILD) 2>/dev/null)" $(BIN)/pytest $(PYTEST_ARGS)

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python -m bench.$$(basename $$b .py) --quick || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info $(STATE) koordlet/system/_native*.so
