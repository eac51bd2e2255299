# zest front door. `make run` starts the main job, `make test` runs every suite.
# Both install the Debian packages that are missing first (apt-get only when needed).

BUILD      ?= build
ASAN_BUILD ?= build-asan
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Build and run-time dependencies; docs/dependencies.md says why each is here.
DEBS := gcc pkg-config meson ninja-build python3 \
	libisal-dev libgrpc-dev protobuf-c-compiler libprotobuf-c-dev liburing-dev \
	libssl-dev libcmocka-dev libxml2-dev curl openssl python3-boto3

.PHONY: all deps build build-asan run test bench clean

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

$(BUILD)/build.ninja:
	meson setup $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false

build: deps $(BUILD)/build.ninja
	meson compile -C $(BUILD)

build-asan: deps $(ASAN_BUILD)/build.ninja
	meson compile -C $(ASAN_BUILD)

run: build
	tools/zest-run.sh $(BUILD)

test: build build-asan
	tests/run.sh $(BUILD) $(ASAN_BUILD)

bench: build
	$(BUILD)/tools/zest-bench ec

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
