# Quick start: `make run` and `make test`. Each installs its dependencies first (packaging/deps.sh).
PRESET ?= release
JOBS ?= 2

.PHONY: deps configure build run test test-asan bench format clean

deps:
	bash packaging/deps.sh

configure: deps
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET) -j$(JOBS)

run: build
	./build/$(PRESET)/app/attnscope demo

test: build
	ctest --preset $(PRESET) -j$(JOBS)

test-asan:
	$(MAKE) test PRESET=asan

# Benchmarks are measured side by side in one run; tuned for this CPU (`native` preset).
bench: deps
	cmake --preset native
	cmake --build --preset native -j$(JOBS) --target attn_bench
	/usr/bin/python3 tests/bench/run_bench.py --build build/native --out build/bench
	/usr/bin/python3 tests/bench/forward_vs_torch.py --build build/native

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf build
