# zest front door. `make run` starts the main job, `make test` runs every suite.
# Both install the Debian packages that are missing first (apt-get only when needed).

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Build and run-time dependencies; docs/dependencies.md says why each is here.
DEBS := gcc pkg-config meson ninja-build python3 \
	libisal-dev libgrpc-dev protobuf-c-compiler libprotobuf-c-dev liburing-dev \
	libssl-dev libcmocka-dev libcurl4-openssl-dev liblmdb-dev libxml2-dev clang \
	curl openssl python3-boto3 valgrind prometheus \
	golang-go golang-github-minio-minio-go-v7-dev etcd-server etcd-client fio \
	nftables iproute2

.PHONY: all deps build build-asan run cluster scale test bench fuzz reliability soak partitions memcheck clean

all: build

deps:
	@missing=$$(for p in $(DEBS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' \
		|| echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "make: installing missing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# Both are test builds: -Dtest_faults=true compiles the fault points (common/zc_fault.h)
# the tests arm; an installed build (plain `meson setup`, or a release one) has none. A
# build folder set up before the option existed is switched on once (meson configure).
FAULTS_ON = grep -q '"name": "test_faults", "value": true' $(1)/meson-info/intro-buildoptions.json 2>/dev/null \
	|| meson configure $(1) -Dtest_faults=true

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dtest_faults=true

# -Dgo_cache: the minio-go test client is the same program in both trees (no cgo, no
# sanitizer); the ASan tree's Go build reuses the plain tree's cache instead of compiling
# minio-go again (~65 CPU-s).
$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dtest_faults=true \
		-Dgo_cache=$(abspath $(BUILD))/tests/integration/minio_client.go/cache

build: deps $(BUILD)/build.ninja
	@$(call FAULTS_ON,$(BUILD))
	meson compile -C $(BUILD)

build-asan: deps $(ASAN_BUILD)/build.ninja
	@$(call FAULTS_ON,$(ASAN_BUILD))
	meson compile -C $(ASAN_BUILD)

run: build
	tools/zest-run.sh $(BUILD)

# etcd + six datanodes registered in it, each on its own 127.0.0.x (tools/zest-cluster.sh)
cluster: build
	tools/zest-cluster.sh $(BUILD)

# 16 datanodes x 10 tmpfs drives, RS 4+2 and 8+4, zest-bench s3 put (tools/zest-scale.sh,
# docs/benchmarks.md "Cluster"); ZEST_SCALE_SECONDS=10 for a quick run
scale: build
	tools/zest-scale.sh $(BUILD)

# every suite on both builds, their tests side by side, ZEST_TEST_JOBS (2) at a time in each
# build (tests/run.sh; ZEST_TEST_SIDE_BY_SIDE=0: one build after the other)
test: build build-asan
	tests/run.sh $(BUILD) $(ASAN_BUILD)

# libFuzzer: clang build with coverage everywhere; each tests/fuzz target runs for
# FUZZ_SECONDS on a scratch copy of its seed corpus (tests/fuzz/corpus/<name>/).
$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link

fuzz: deps $(FUZZ_BUILD)/build.ninja
	meson compile -C $(FUZZ_BUILD)
	@set -e; for f in $(FUZZ_BUILD)/tests/fuzz/*_fuzzer; do \
		name=$$(basename $$f _fuzzer); corpus=tests/fuzz/corpus/$${name#fuzz_}; \
		mkdir -p $(FUZZ_BUILD)/corpus/$$name; \
		echo "== $$name for $(FUZZ_SECONDS) s (seeds: $$corpus)"; \
		$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			$(FUZZ_BUILD)/corpus/$$name $$corpus; \
	done

# Long suites, outside `make test`: 100 crash cycles; 10 minutes of mixed load.
CRASH_CYCLES ?= 100
SOAK_SECONDS ?= 600

reliability: build
	ZEST_BUILD=$(BUILD) ZEST_CRASH_CYCLES=$(CRASH_CYCLES) python3 tests/integration/test_crash.py

soak: build
	ZEST_BUILD=$(BUILD) ZEST_SOAK_SECONDS=$(SOAK_SECONDS) ZEST_SOAK_REPORT=soak.csv \
		python3 tests/integration/soak.py

# Random network fault schedules for DURATION seconds (root: namespaces, nftables); SEED
# replays a run (printed at its start), MAX_SIZE up to 40 MiB with multipart uploads.
DURATION ?= 1800
SEED ?=
MAX_SIZE ?= 40MiB

partitions: build
	ZEST_BUILD=$(BUILD) python3 tests/netfaults/schedules.py --random --scale 2 --clients 6 \
		--duration $(DURATION) --max-size $(MAX_SIZE) $(if $(SEED),--seed $(SEED)) \
		--out $(BUILD)

# Every integration test once more with both daemons under valgrind memcheck (slow: ~20x CPU).
memcheck: build
	ZEST_VALGRIND=memcheck meson test -C $(BUILD) --suite integration --suite netfaults \
		--suite memcheck \
		--timeout-multiplier 6 --print-errorlogs --num-processes 1

bench: build
	$(BUILD)/tools/zest-bench ec

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
