# Quick start: `make run` and `make test`. Each installs its dependencies first (packaging/deps.sh).
PRESET ?= release
JOBS ?= 2

.PHONY: deps configure build run demo test test-asan test-sanitize fuzz fuzz-smoke package bench \
        format clean

deps:
	bash packaging/deps.sh

configure: deps
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET) -j$(JOBS)

# The desktop app on the embedded text model, a sample text and four variants side by side.
RUN_VARIANTS ?= window(size=32);sinks_window(sinks=4,window=32);block_topk(block=16,k=4);top_p(block=16,p=0.9)
run: build
	./build/$(PRESET)/app/attnscope gui --model default-text \
	  --text-file assets/samples/lighthouse.txt -v '$(RUN_VARIANTS)'

demo: build
	./build/$(PRESET)/app/attnscope demo

test: build
	ctest --preset $(PRESET) -j$(JOBS)

test-asan:
	$(MAKE) test PRESET=asan

# What CI runs under AddressSanitizer + UndefinedBehaviorSanitizer: the compute, models (less
# ArchCli, which drives the app's CLI) and app-library (sessions, core, sweeps, figures) suites,
# in the fuzz build (clang), whose libraries fuzz-smoke has already built with both sanitizers.
# Leak suppressions by library in tests/sanitizers/lsan.supp. `make test-asan` runs every suite
# under GCC's sanitizers (asan preset).
SANITIZE_TARGETS ?= test_compute test_models test_app_lib
test-sanitize: deps
	cmake --preset fuzz
	cmake --build --preset fuzz -j$(JOBS) --target $(SANITIZE_TARGETS)
	ctest --preset sanitize -j$(JOBS)

# libFuzzer targets, one per loader (tests/fuzz, clang, `fuzz` preset in build/fuzz).
# `make fuzz FUZZ_SECONDS=N` runs each for N seconds (FUZZ_RUNS caps executions; -1: no cap),
# keeping the grown corpora in build/fuzz/fuzz-corpus; `make fuzz-smoke` is CI's short run.
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
fuzz: deps
	cmake --preset fuzz
	cmake --build --preset fuzz -j$(JOBS)
	bash tests/fuzz/run_fuzz.sh run build/fuzz $(FUZZ_SECONDS) $(FUZZ_RUNS) $(FUZZ_TARGETS)

fuzz-smoke: deps
	cmake --preset fuzz
	cmake --build --preset fuzz -j$(JOBS)
	ctest --preset fuzz -j$(JOBS)

# Debian package: build/$(PRESET)/attnscope_<version>_<arch>.deb (what goes where: packaging/).
package: build
	cd build/$(PRESET) && cpack -G DEB

# Benchmarks are measured side by side in one run; tuned for this CPU (`native` preset).
bench: deps
	cmake --preset native
	cmake --build --preset native -j$(JOBS) --target attn_bench attn_gui_bench attnscope
	@# Every step runs whatever an earlier one reported; make fails at the end if any target failed.
	status=0; \
	/usr/bin/python3 tests/bench/run_bench.py --build build/native --out build/bench || status=1; \
	/usr/bin/python3 tests/bench/precision_rows.py --build build/native --out build/bench || status=1; \
	/usr/bin/python3 tests/bench/forward_vs_torch.py --build build/native || status=1; \
	/usr/bin/python3 tests/bench/decode_vs_torch.py --build build/native || status=1; \
	/usr/bin/python3 tests/bench/analyze_overhead.py --build build/native || status=1; \
	/usr/bin/python3 tests/bench/vision_vs_torch.py --build build/native || status=1; \
	/usr/bin/python3 tests/bench/attribution_cost.py --build build/native || status=1; \
	/usr/bin/python3 tests/bench/big_model.py --build build/native || status=1; \
	bash tests/bench/gui_bench.sh build/native build/bench || status=1; \
	exit $$status

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf build
