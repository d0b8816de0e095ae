# hookproxy: the two commands of README.md, and their set-up on a fresh Debian machine.
# The package list and build flags here are the single source of truth; docker/Dockerfile mirrors them
# (Tests check the two agree).

SYSTEM_PACKAGES := libcurl4-openssl-dev libssl-dev libpcre2-dev libyaml-dev pkg-config curl openssl ca-certificates
# Release, with the binary's code laid out for a small footprint: every function in a section of its own, placed by
# lld in the order of linker/startup.order (what start-up runs first, contiguous: idle RSS about -5 MiB), and relative
# relocations packed (RELR: -1.1 MiB of .rela.dyn the loader reads at every start). `make startup-order` renews
# the list; bench/README.md ("Session 15") has the measurements.
# Exclusive access is checked at compile time only (-enforce-exclusivity=unchecked, every module): the run-time
# checks cost 7 % of a proxied request's instructions and 21 % of a WebSocket round trip's (NIO's byte-by-byte
# masking checked every byte; bench/README.md, "Session 16"). `make test` builds in debug, with the checks, so the
# suite still traps on an overlapping access.
SWIFT_BUILD_FLAGS := -c release -Xswiftc -enforce-exclusivity=unchecked -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections \
	-Xswiftc -use-ld=lld -Xlinker --symbol-ordering-file=linker/startup.order -Xlinker --no-warn-symbol-ordering \
	-Xlinker -z -Xlinker pack-relative-relocs
RULES ?= rules
ARGS ?=
# The Python packages the tests use: an independent HAR reader and a JSON Schema validator for the logs, an
# independent WebSocket client, and what the traffic viewer's tests use (Selenium drives the browser;
# schemathesis probes the API from its OpenAPI), and a real gRPC client and server (HTTP/2 tests).
PYVENV := .build/pyvenv
PY_TEST_PACKAGES := haralyzer==2.4.0 jsonschema==4.26.0 websockets==17.4 selenium==4.51.0 schemathesis==4.32.5 grpcio==1.85.1 h2==4.4.1
PY_TEST_MODULES := haralyzer, jsonschema, websockets, selenium, schemathesis, grpc, h2
# The browsers the viewer's tests run headless: Chromium with its WebDriver, and Firefox (driven over WebDriver
# BiDi, which it speaks itself). Test-only: not in SYSTEM_PACKAGES, which the Docker image (it builds and runs
# hookproxy, never its tests) mirrors.
BROWSER_TEST_PACKAGES := chromium chromium-driver firefox-esr
# Where the browser test saves its picture of the viewer: under .build, so `make test` leaves the checkout as it was.
# `make viewer-test VIEWER_SCREENSHOT=docs/viewer.png` renews the README's picture.
VIEWER_SCREENSHOT ?= .build/viewer.png

.PHONY: deps pydeps browserdeps viewer-test build run test check bench callgrind startup-order print-build-flags soak docker-lint clean fuzz

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
	@if ! $(PYVENV)/bin/python3 -c 'import $(PY_TEST_MODULES)' >/dev/null 2>&1; then \
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

# Installs BROWSER_TEST_PACKAGES when missing.
browserdeps:
	@missing=""; for p in $(BROWSER_TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# The traffic viewer in a real headless Chromium (and the README's screenshot) and Firefox, then schemathesis on
# its API.
viewer-test: browserdeps pydeps
	cd Tests/Browser && ../../$(PYVENV)/bin/python3 viewer_browser_test.py ../../.build/debug/hookproxy ../../$(VIEWER_SCREENSHOT)
	cd Tests/Browser && ../../$(PYVENV)/bin/python3 viewer_firefox_test.py ../../.build/debug/hookproxy /usr/bin/firefox-esr
	cd Tests/Browser && ../../$(PYVENV)/bin/python3 viewer_api_schemathesis.py ../../.build/debug/hookproxy ../../$(PYVENV)/bin/schemathesis

build: deps
	swift build $(SWIFT_BUILD_FLAGS)

# Runs the proxy on 127.0.0.1:8080 with the example rules.
run: build
	"$$(swift build $(SWIFT_BUILD_FLAGS) --show-bin-path)/hookproxy" run --rules $(RULES) $(ARGS)

# How many tests run at once. Swift Testing otherwise starts every test together: ~300 socket tests, each with its
# own proxy threads, on 2 cores, so every bounded wait inside a test competed with the whole suite's work.
TEST_WIDTH ?= $(shell echo $$(( $$(nproc) * 4 )))
# The Swift tests' output, kept whole; on a failure the test command ends by naming the failed tests (a CI log
# shows only its tail).
TEST_LOG := .build/swift-test.log

# Builds and runs every test (unit, integration through real sockets, rule examples).
test: deps pydeps browserdeps
	swift build --build-tests
	.build/debug/hookproxy check --rules rules
	.build/debug/hookproxy check --rules docker/demo-rules
	@{ swift test --skip-build --experimental-maximum-parallelization-width $(TEST_WIDTH); echo $$? > $(TEST_LOG).rc; } 2>&1 \
		| tee $(TEST_LOG); rc=$$(cat $(TEST_LOG).rc); \
	if [ "$$rc" != 0 ]; then \
		echo "== failed tests (the whole output is in $(TEST_LOG)):"; \
		grep -E '^[^ ]* Test .*(recorded an issue|failed after)' $(TEST_LOG) | cut -c1-800 | head -40; \
		exit $$rc; \
	fi
	$(MAKE) --no-print-directory viewer-test

docker-lint:
	bash docker/lint.sh

bench: deps
	bash bench/run.sh
	bash bench/ws.sh
	bash bench/h2.sh
callgrind: deps
	bash bench/callgrind.sh

# Renews linker/startup.order from a run of the release binary under callgrind (bench/startup-order.sh).
startup-order: deps
	bash bench/startup-order.sh

# The flags of `make build`, for scripts that build the same binary (bench/build-release.sh).
print-build-flags:
	@echo $(SWIFT_BUILD_FLAGS)

# 10 minutes of mixed load through one hookproxy (SOAK_SECONDS to change it); fails on RSS growth or an fd leak.
soak: deps
	bash bench/soak.sh

clean:
	rm -rf .build

# Coverage-guided fuzzing (libFuzzer + AddressSanitizer), see Fuzz/README.md. Builds the package in Fuzz/ into
# .build-fuzz (never .build), then runs each target for FUZZ_SECONDS from its seed corpus Fuzz/corpus/TARGET.
# New corpus entries go to .build-fuzz/corpus/TARGET, crash inputs to .build-fuzz/artifacts/. Fails if any target
# crashes (all targets still run).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= fuzz-rules fuzz-request fuzz-response-head fuzz-logs fuzz-url fuzz-websocket
FUZZ_FLAGS ?=
FUZZ_SCRATCH := .build-fuzz
fuzz: deps
	swift build --package-path Fuzz --scratch-path $(FUZZ_SCRATCH) -c debug -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
	@mkdir -p $(FUZZ_SCRATCH)/artifacts; failed=""; \
	for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_SCRATCH)/corpus/$$t; \
		echo "== $$t: $(FUZZ_SECONDS) s (log: $(FUZZ_SCRATCH)/$$t.log)"; \
		SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 $(FUZZ_SCRATCH)/debug/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=25 \
			-rss_limit_mb=4096 -detect_leaks=0 -print_final_stats=1 -dict=Fuzz/dict/$$t.dict \
			-artifact_prefix=$(FUZZ_SCRATCH)/artifacts/$$t- $(FUZZ_FLAGS) \
			$(FUZZ_SCRATCH)/corpus/$$t Fuzz/corpus/$$t > $(FUZZ_SCRATCH)/$$t.log 2>&1; \
		rc=$$?; grep -E '^#[0-9]+ +DONE|^stat::number_of_executed_units|^Done [0-9]+ runs' $(FUZZ_SCRATCH)/$$t.log; \
		if [ $$rc -ne 0 ]; then \
			failed="$$failed $$t"; echo "$$t FAILED (exit $$rc):"; \
			grep -E -A12 'ERROR: libFuzzer|ERROR: AddressSanitizer|Fatal error|fuzz invariant' $(FUZZ_SCRATCH)/$$t.log | head -40; \
			grep -E 'Test unit written to' $(FUZZ_SCRATCH)/$$t.log; \
		fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashes in:$$failed (inputs in $(FUZZ_SCRATCH)/artifacts/)"; exit 1; fi; \
	echo "fuzz: no crash in $(FUZZ_SECONDS) s per target"
