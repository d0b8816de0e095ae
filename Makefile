# hookproxy: the two commands of README.md, and their set-up on a fresh Debian machine.
# The package list and build flags here are the single source of truth; docker/Dockerfile mirrors them
# (Tests check the two agree).

SYSTEM_PACKAGES := libcurl4-openssl-dev libssl-dev pkg-config curl openssl ca-certificates
SWIFT_BUILD_FLAGS := -c release
RULES ?= rules
ARGS ?=
# The Python packages the log tests read HAR files with (an independent HAR reader and a JSON Schema validator).
PYVENV := .build/pyvenv
PY_TEST_PACKAGES := haralyzer==2.4.0 jsonschema==4.26.0

.PHONY: deps pydeps build run test check bench docker-lint clean

# Installs the system libraries hookproxy links (and the tools its tests use) when missing.
deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# A Python venv under .build/pyvenv with PY_TEST_PACKAGES (python3 and python3-venv installed when missing).
pydeps:
	@if ! $(PYVENV)/bin/python3 -c 'import haralyzer, jsonschema' >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		rm -rf $(PYVENV); \
		if ! python3 -m venv $(PYVENV) >/dev/null 2>&1; then \
			rm -rf $(PYVENV); echo "installing: python3 python3-venv"; \
			$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3 python3-venv >/dev/null \
			&& python3 -m venv $(PYVENV) || exit 1; \
		fi; \
		echo "installing into $(PYVENV): $(PY_TEST_PACKAGES)"; \
		$(PYVENV)/bin/python3 -m pip install -q --disable-pip-version-check $(PY_TEST_PACKAGES) || exit 1; \
	fi

build: deps
	swift build $(SWIFT_BUILD_FLAGS)

# Runs the proxy on 127.0.0.1:8080 with the example rules.
run: build
	"$$(swift build $(SWIFT_BUILD_FLAGS) --show-bin-path)/hookproxy" run --rules $(RULES) $(ARGS)

# Builds and runs every test (unit, integration through real sockets, rule examples).
test: deps pydeps
	swift build --build-tests
	.build/debug/hookproxy check --rules rules
	.build/debug/hookproxy check --rules docker/demo-rules
	swift test --skip-build

docker-lint:
	bash docker/lint.sh

bench: deps
	bash bench/run.sh

clean:
	rm -rf .build
