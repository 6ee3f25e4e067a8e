# xv: the README's two commands are `make demo` and `make test`; both install what they need.
# Targets: deps, build, test, demo, data, bench, install, format, clean.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
DATA_DIR ?= data/demo
STATE_DIR ?= .xv/demo

PREFIX ?= /usr/local

.PHONY: all deps build test demo data bench install format clean

all: build

deps:
	@bash deploy/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

data: build
	@DATA_DIR=$(DATA_DIR) bash deploy/demo.sh data

demo: build
	@DATA_DIR=$(DATA_DIR) STATE_DIR=$(STATE_DIR) bash deploy/demo.sh all

# The benchmarks (bench/README.md), built and run one after another; BENCHES picks some of them.
BENCHES ?= trainer daemon tokenizer
bench: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) --target $(addprefix xv-bench-,$(BENCHES))
	@for b in $(BENCHES); do echo "==> xv-bench-$$b"; $(BUILD_DIR)/bin/xv-bench-$$b || exit 1; done

# The programs, systemd units, xv-enable-workers, example configs and docs under PREFIX
# (deploy/CMakeLists.txt; docs/operations.md § Installing). DESTDIR is honoured. Builds only what it
# installs.
INSTALL_TARGETS ?= xvd xv-worker xvctl xv-train
install: $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) --target $(INSTALL_TARGETS)
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
