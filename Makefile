# psbed: the two commands are `make demo` and `make test`; each does its own set-up
# (Debian packages, default data, configure, build).
JOBS ?= $(shell nproc)
# Unity builds (several sources compiled as one) halve a clean build's CPU time; an incremental
# edit rebuilds a whole batch, so for day-to-day work run `make UNITY=OFF` or the presets alone.
UNITY ?= ON
PSBED := build/release/cluster/psbed
export PSBED_DATA_DIR ?= $(CURDIR)/data/mnist

.PHONY: all deps data web build build-asan demo test test-unit test-asan test-containers lint fuzz fuzz-build fuzz-smoke bench clean

all: build

deps:
	@cluster/install-deps.sh

data: deps
	@workloads/fetch-mnist.sh data/mnist

# The dashboard's charting library (npm), built into psbed.
web: deps
	@cluster/fetch-web.sh

build: deps web
	@cmake --preset release -DCMAKE_UNITY_BUILD=$(UNITY) >/dev/null
	@cmake --build --preset release -j $(JOBS)

build-asan: deps
	@cmake --preset asan -DCMAKE_UNITY_BUILD=$(UNITY) >/dev/null
	@cmake --build --preset asan -j $(JOBS) --target psbed_unit_tests

# The main job on a local default cluster: single-process training as the reference, then a
# coordinator + 2 server shards + 4 workers training the same model through the parameter server
# (async: a smaller step than one process takes, over more epochs; docs/concepts.md, "Consistency").
# Before it: a single-worker run to profile, and a short crowded one (twice as many workers +
# shards as the host's cores, as launch counts them) that measures what time-sharing the cores
# adds to each step's CPU. On one CPU the single-worker run is crowded itself: no crowded run.
CPUS = $(shell getconf _NPROCESSORS_ONLN)
CROWD_WORKERS = $(shell echo $$((2 * $(CPUS) - 2)))
demo: build data
	@cluster/install-deps.sh plot
	@if [ -d runs/demo ]; then rm -rf runs/demo.previous && mv runs/demo runs/demo.previous && \
	  echo "the previous demo is kept in runs/demo.previous"; fi
	@mkdir -p runs/demo
	$(PSBED) train --model lenet5 --data mnist --epochs 3 --batch 32 --lr 0.03 --threads 2 --json runs/demo/train.json
	$(PSBED) launch --servers 1 --workers 1 --model lenet5 --data mnist --steps 300 --batch 32 --lr 0.01 \
	  --mode async --out runs/demo/single
	@if [ $(CPUS) -ge 2 ]; then set -x; \
	  $(PSBED) launch --servers 2 --workers $(CROWD_WORKERS) --model lenet5 --data mnist --steps 600 --batch 32 \
	    --lr 0.005 --mode async --out runs/demo/crowded && \
	  $(PSBED) profile runs/demo/single --contention-run runs/demo/crowded -o runs/demo/profile.json; \
	else echo "one CPU: the single-worker run shares it with its shard already, so no crowded run"; set -x; \
	  $(PSBED) profile runs/demo/single -o runs/demo/profile.json; fi
	$(PSBED) predict --profile runs/demo/profile.json --workers 4 --servers 2 --policy wfbp --mode async \
	  --json runs/demo/predicted.json
	$(PSBED) launch --servers 2 --workers 4 --model lenet5 --data mnist --epochs 5 --batch 32 --lr 0.005 \
	  --mode async --out runs/demo/cluster
	$(PSBED) validate --profile runs/demo/profile.json runs/demo/cluster --out runs/demo/validation

# Every test: unit + integration on the release build, then the unit tests under ASan+UBSan. The
# unit tests and the integration scripts labelled "paired" (tests/CMakeLists.txt) run two at a
# time first, the other scripts one at a time; in both builds the tests named "paced:" (link
# rates) run alone, last.
CTEST := ctest --output-on-failure --timeout 900
test: build data build-asan
	@cluster/install-deps.sh test plot
	@cluster/fetch-web.sh test
	@cd build/release && { $(CTEST) -L 'paired|unit' -E '^paced:' -j 2; two=$$?; \
	  $(CTEST) -LE 'paired|unit'; one=$$?; \
	  $(CTEST) -R '^paced:'; alone=$$?; \
	  [ $$two = 0 ] && [ $$one = 0 ] && [ $$alone = 0 ]; }
	@cd build/asan && { export ASAN_OPTIONS=detect_leaks=1; \
	  $(CTEST) -L unit -E '^paced:' -j 2; two=$$?; \
	  $(CTEST) -L unit -R '^paced:'; alone=$$?; [ $$two = 0 ] && [ $$alone = 0 ]; }

# The house rules: every source clang-format clean, no file over 800 lines, no function over 150.
lint:
	@cluster/install-deps.sh test
	@tests/format_check.sh
	@tests/house_check.sh

# The decoders' libFuzzer harnesses (tests/fuzz/, clang), in their own build folder: `make fuzz`
# runs each for FUZZ_SECONDS (or FUZZ_RUNS executions; then no time limit unless FUZZ_SECONDS is
# given too) from the seed corpus in tests/fuzz/corpus; `make fuzz-smoke` a few seconds each (CI).
FUZZ_SECONDS ?= $(if $(FUZZ_RUNS),0,60)
FUZZ_RUNS ?=
fuzz-build:
	@cluster/install-deps.sh test
	@cmake -S tests/fuzz -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	@cmake --build build/fuzz -j $(JOBS)

fuzz: fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) tests/fuzz/run.sh build/fuzz

fuzz-smoke: fuzz-build
	@FUZZ_SECONDS=4 FUZZ_RUNS= tests/fuzz/run.sh build/fuzz

test-unit: build
	@cd build/release && ctest -L unit --output-on-failure

bench: build data
	@cluster/install-deps.sh bench
	@mkdir -p runs/bench
	$(PSBED) bench compute --json runs/bench/compute.json
	$(PSBED) bench ps --json runs/bench/ps.json

# The image and compose for real (docs/deploy-docker.md, "Checking the container path"): as root,
# before a release; too slow for `make test`.
test-containers:
	@tests/containers/run.sh

clean:
	rm -rf build
