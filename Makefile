# One entry point for a fresh machine: `make demo` and `make test` set up everything they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := iproute2 iperf3 iputils-ping ethtool tmux nftables openssh-server openssh-client prometheus nginx-light tcpdump curl openssl

.PHONY: demo test lint unit system-deps install clean completions schema bench man wheel

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing" >&2; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "warning: missing Debian packages ($$missing); run 'sudo make system-deps'" >&2; fi; \
	fi

$(BIN)/python:
	$(PY) -m venv $(VENV)

# Strict editable mode builds a link tree mypy can follow; re-run after adding a module.
install: $(BIN)/python system-deps
	@# pip's notes about this machine's unused local indexes are noise; its exit status is kept.
	@bash -o pipefail -c "$(BIN)/pip install -q -e '.[dev]' --config-settings editable_mode=strict 2>&1 \
	  | { grep -v 'is neither a file nor a directory' || true; }"
	@# Bytecode now, as a wheel install has it: with PYTHONDONTWRITEBYTECODE set, every
	@# tcpwizard process (serve, each check a test starts) would compile ~0.3 s of modules.
	@$(BIN)/python -c "import compileall, os, tcpwizard; \
	  compileall.compile_dir(os.path.dirname(tcpwizard.__file__), quiet=1)"
	@touch $(STAMP)

demo: install
	$(BIN)/tcpwizard lab demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy tests
	$(BIN)/lint-imports

unit: install
	$(BIN)/pytest -q -m "not lab"

# The unit tests on every core; the lab's measurements alone, one at a time.
test: install lint
	$(BIN)/pytest -q -m "not lab" -n auto
	$(BIN)/pytest -q -m lab --durations=40

completions: install
	$(BIN)/python -m tcpwizard.completion_gen completions

man: install
	$(BIN)/python -m tcpwizard.man_gen man/tcpwizard.1

# The wheel and sdist in dist/ (pip install dist/tcpwizard-*.whl, or pipx install .).
wheel: install
	$(BIN)/python -m build --outdir dist .

# The benchmarks, from this checkout (benchmarks/, not in the wheel), e.g.
# `sudo make bench ARGS='paper --quick'`; `make bench` alone lists them.
bench: install
	$(BIN)/python -m benchmarks $(or $(ARGS),--help)

schema: install
	$(BIN)/python -m tcpwizard.output.schema_files docs

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .pytest_cache .ruff_cache
