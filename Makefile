# moetrain build. `make` builds ./moetrain; with nvcc present the CUDA sources under src/ (*.cu) are
# compiled and linked too (the binary still runs on CPU-only machines). CUDA=0 forces a CPU build.
SHELL := /bin/bash
MAKEFLAGS += -j$(shell nproc)
CXX ?= g++
BUILD := build

NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

PKGS := tomlplusplus hdf5 ompi
CXXFLAGS ?= -O3 -g
CXXFLAGS += -std=c++20 -Wall -Wextra -MMD -MP -Isrc -pthread
CXXFLAGS += $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lopenblas -pthread
CPU_LDLIBS := $(LDLIBS)

# The CUDA backend and NcclComm are the *.cu files with nvcc, the stubs below without; every other object is
# the same in both builds, so one build folder serves either.
SRCS := $(shell find src -name '*.cpp' | sort)
STUB_SRCS := src/ops/backend/cuda_stub.cpp src/ops/grouped_gemm/cuda_stub.cpp src/comm/nccl_stub.cpp
CU_SRCS := $(shell find src -name '*.cu' | sort)

ifeq ($(CUDA),1)
  SRCS := $(filter-out $(STUB_SRCS),$(SRCS))
  CU_OBJS := $(CU_SRCS:%.cu=$(BUILD)/%.o)
  NVCCFLAGS ?= -O3 -std=c++20 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
  NVCCFLAGS += -Isrc -Xcompiler -Wall -MMD -MP
  # NCCL is not linked: src/comm/nccl_library.cu opens it (dlopen) when a run asks for it.
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -ldl
  # The grouped GEMM's CUTLASS kernels (wgmma) need sm_90a. CUTLASS's headers come from the nvidia-cutlass wheel
  # that scripts/deps.sh installs into .venv; without them those files build the per-group fallback alone.
  CUTLASS_INCLUDE ?= $(firstword $(wildcard .venv/lib/python3*/site-packages/cutlass_library/source/include))
  CUTLASS_OBJS := $(patsubst %.cu,$(BUILD)/%.o,$(wildcard src/ops/grouped_gemm/cuda_cutlass_*.cu))
  $(CUTLASS_OBJS): NVCCFLAGS := $(filter-out -gencode arch=%,$(NVCCFLAGS)) -gencode arch=compute_90a,code=sm_90a -DNDEBUG \
    $(if $(CUTLASS_INCLUDE),-DMT_CUTLASS=1 -isystem $(CUTLASS_INCLUDE),-DMT_CUTLASS=0)
  # cuDNN's fused attention: cudnn-frontend's headers (the nvidia-cudnn-frontend wheel) and cudnn.h (nvidia-cudnn-cu13),
  # both in .venv from scripts/deps.sh. libcudnn is not linked: cudnn_loader.cpp opens it at run time. Without
  # the headers the file builds without cuDNN, and attention runs on the own kernels.
  CUDNN_FRONTEND_INCLUDE ?= $(patsubst %/cudnn_frontend.h,%,$(firstword \
    $(wildcard .venv/lib/python3*/site-packages/include/cudnn_frontend.h)))
  CUDNN_INCLUDE ?= $(patsubst %/cudnn.h,%,$(firstword \
    $(wildcard .venv/lib/python3*/site-packages/nvidia/cudnn/include/cudnn.h)))
  $(BUILD)/src/ops/attention/cudnn_sdpa.o: NVCCFLAGS += $(if $(and $(CUDNN_FRONTEND_INCLUDE),$(CUDNN_INCLUDE)),\
    -DMT_CUDNN=1 -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -isystem $(CUDNN_FRONTEND_INCLUDE) -isystem $(CUDNN_INCLUDE),\
    -DMT_CUDNN=0)
endif
OBJS := $(SRCS:%.cpp=$(BUILD)/%.o)

TEST_SRCS := $(sort $(wildcard tests/test_*.cpp))
TEST_OBJS := $(TEST_SRCS:%.cpp=$(BUILD)/%.o)
LIB_OBJS := $(OBJS) $(CU_OBJS)

.PHONY: all deps run gcide test bench clean gpu-bundle install
all: moetrain $(BUILD)/tests/unit_tests

moetrain: $(BUILD)/main.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/unit_tests: $(TEST_OBJS) $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)

# A CUDA build also links the binary a CPU-only build (`make CUDA=0`) makes, from the same objects and the two
# stubs, so the examples of the README and docs/ are checked against both (tests/run_tests.sh).
ifeq ($(CUDA),1)
CPU_ONLY_OBJS := $(BUILD)/main.o $(OBJS) $(STUB_SRCS:%.cpp=$(BUILD)/%.o)
$(BUILD)/cpu-only/moetrain: $(CPU_ONLY_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $^ $(CPU_LDLIBS)
all: $(BUILD)/cpu-only/moetrain
endif

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# Debian 12 packages for everything the build, the demo and the tests need.
deps:
	sh scripts/deps.sh

# The demo: byte-level shards of the fortunes corpus, then train configs/tiny.toml.
data/fortunes/train_000000.bin: | moetrain
	./moetrain prepare --input /usr/share/games/fortunes --out data/fortunes

# What the demos' closing samples continue.
DEMO_PROMPT := The meaning of life

run: moetrain data/fortunes/train_000000.bin
	./moetrain train configs/tiny.toml
	./moetrain sample runs/tiny --prompt "$(DEMO_PROMPT)" --tokens 80

# The second corpus (GCIDE, 40 MB of English) as BPE shards, and a longer run on it.
data/gcide/train_000000.bin: | moetrain
	sh scripts/corpus_gcide.sh data/gcide 8192

gcide: moetrain data/gcide/train_000000.bin
	./moetrain train configs/gcide.toml
	./moetrain sample runs/gcide --prompt "$(DEMO_PROMPT)" --tokens 80

test: all asan $(if $(filter 1,$(CUDA)),gpu-bundle)
	bash tests/run_tests.sh

bench: moetrain data/fortunes/train_000000.bin
	bash bench/cpu_tokens_per_sec.sh

clean:
	rm -rf $(BUILD) moetrain gpu-bundle gpu-bundle.tgz

# `moetrain` on PATH: the binary alone (it finds no files beside it; CUDA libraries by rpath).
PREFIX ?= /usr/local
install: moetrain
	install -D -m 755 moetrain $(DESTDIR)$(PREFIX)/bin/moetrain
	@echo "installed $(DESTDIR)$(PREFIX)/bin/moetrain"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# GPU parity test and GPU benchmarks: separate binaries that say "skipped: no GPU" without one.
PARITY_OBJS := $(BUILD)/tests/gpu/gpu_parity.o $(BUILD)/tests/gpu/parity_moe.o $(BUILD)/tests/gpu/parity_fp8.o \
  $(BUILD)/tests/gpu/parity_strided.o $(BUILD)/tests/gpu/parity_grouped.o $(BUILD)/tests/gpu/parity_cudnn.o \
  $(BUILD)/tests/gpu/parity_fp8_fused.o $(BUILD)/tests/gpu/parity_muon.o \
  $(BUILD)/tests/gpu/parity_bf16_outputs.o
$(BUILD)/tests/gpu_parity: $(PARITY_OBJS) $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
# NcclComm's every call on one rank (scripts/gpu_check.sh section (e)).
$(BUILD)/tests/nccl_test: $(BUILD)/tests/gpu/nccl_test.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
$(BUILD)/bench/gemm_bench: $(BUILD)/bench/gemm_bench.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
$(BUILD)/bench/attention_bench: $(BUILD)/bench/attention_bench.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
$(BUILD)/bench/param_init_bench: $(BUILD)/bench/param_init_bench.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
# Multi-rank tests: run under mpirun by tests/mpi/run_mpi_tests.sh.
$(BUILD)/tests/comm_test: $(BUILD)/tests/mpi/comm_test.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/staged_comm_test: $(BUILD)/tests/mpi/staged_comm_test.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/transport_test: $(BUILD)/tests/mpi/transport_test.o $(LIB_OBJS)
	$(CXX) -o $@ $^ $(LDLIBS)
# FP8 codes for the PyTorch comparison (tests/oracle/check_fp8.py).
$(BUILD)/tests/fp8_codes: $(BUILD)/tests/oracle/fp8_codes.o
	$(CXX) -o $@ $^
all: $(BUILD)/tests/gpu_parity $(BUILD)/tests/nccl_test $(BUILD)/bench/gemm_bench $(BUILD)/bench/attention_bench $(BUILD)/bench/param_init_bench $(BUILD)/tests/comm_test $(BUILD)/tests/staged_comm_test $(BUILD)/tests/transport_test $(BUILD)/tests/fp8_codes
$(BUILD)/tests/%.o: CXXFLAGS += -Itests

# AddressSanitizer and UBSan over the readers of user files (experiment TOML, config.json, safetensors,
# JSON, token shards, checkpoints, the Hugging Face import): the unit tests of those readers, CPU only, in
# build/asan/. The objects go through an archive, so the test binary takes only what those tests call; the
# folders none of them reach (plot, sweep, and inspect but its flat configs) are not
# compiled. -O1 -g1 keeps the build within a few minutes on two cores.
ASAN := $(BUILD)/asan
ASAN_CXXFLAGS := -O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
  $(filter-out -O% -g,$(CXXFLAGS))
ASAN_SRCS := $(filter-out src/cli/% src/inspect/% src/plot/% src/sweep/%,$(shell find src -name '*.cpp' | sort)) \
  src/inspect/flat_config.cpp
ASAN_TESTS := tests/test_main.cpp tests/test_hf_files.cpp tests/test_config.cpp tests/test_data.cpp \
  tests/test_checkpoint_faults.cpp tests/test_fuzz_inputs.cpp tests/test_fuzz_readers.cpp tests/test_hf_inputs.cpp \
  tests/test_config_inputs.cpp tests/test_damaged_shards.cpp
$(ASAN)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(ASAN_CXXFLAGS) $(if $(filter tests/%,$<),-Itests) -c $< -o $@
$(ASAN)/libmoetrain.a: $(ASAN_SRCS:%.cpp=$(ASAN)/%.o)
	rm -f $@ && ar rcs $@ $^
$(ASAN)/unit_tests: $(ASAN_TESTS:%.cpp=$(ASAN)/%.o) $(ASAN)/libmoetrain.a
	$(CXX) -fsanitize=address,undefined -o $@ $^ $(CPU_LDLIBS)
.PHONY: asan asan-test
asan: $(ASAN)/unit_tests
asan-test: asan
	bash tests/asan_tests.sh

# gpu-bundle/: moetrain, gpu_parity, nccl_test, gemm_bench and attention_bench for a GPU machine that has glibc, libstdc++/libgcc,
# the CUDA toolkit's cuBLASLt, and for runs over NCCL an NCCL 2 (PyTorch's pip package carries one), but none of the
# Debian packages (scripts/gpu_check.sh runs them there). libnccl stays on the host: it is 200 MB, and moetrain and
# nccl_test open it (dlopen) only when they communicate over it, so they start without it. HDF5 and
# cudart are linked statically; the objects go through an archive, so gpu_parity and the benchmarks take only
# what they call (no HDF5, no MPI). OpenBLAS's static archive becomes one shared lib/libmoetrain_blas.so with
# only what the objects call, gold folding the identical kernels of its many CPU targets (half the size), so
# the binaries share one copy. scripts/bundle_libs.sh copies the remaining libraries (TOML++, and
# OpenMPI's, which a one-rank run loads but never initializes) into lib/, found through the $ORIGIN rpath;
# scripts/bundle_mpi.sh puts OpenMPI's launcher into mpi/ (mpi/mpirun) for the multi-rank checks.
BUNDLE := gpu-bundle
BUNDLE_BINS := $(BUNDLE)/moetrain $(BUNDLE)/gpu_parity $(BUNDLE)/nccl_test $(BUNDLE)/gemm_bench $(BUNDLE)/attention_bench
BUNDLE_MAINS := $(BUILD)/main.o $(PARITY_OBJS) $(BUILD)/tests/gpu/nccl_test.o $(BUILD)/bench/gemm_bench.o \
  $(BUILD)/bench/attention_bench.o
BUNDLE_LDLIBS = -s -Wl,--as-needed -Wl,-rpath,'$$ORIGIN/lib:$(CUDA_HOME)/lib64' -Wl,--disable-new-dtags \
  -L$(BUNDLE)/lib -lmoetrain_blas $(shell pkg-config --libs tomlplusplus ompi 2>/dev/null) \
  $(shell pkg-config --libs-only-L hdf5 2>/dev/null) -Wl,-Bstatic -lhdf5 -lsz -laec -lz -Wl,-Bdynamic \
  -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart_static -ldl -lrt -pthread

ifeq ($(CUDA),1)
gpu-bundle: $(BUNDLE_BINS)
	CXX="$(CXX)" bash scripts/bundle_libs.sh $(BUNDLE) "$(NVCC)" "$(NVCCFLAGS)" "$(CUTLASS_INCLUDE)" \
	  "$(if $(CUDNN_INCLUDE),$(CUDNN_FRONTEND_INCLUDE))"
	bash scripts/bundle_mpi.sh $(BUNDLE)
	tar -czf $(BUNDLE).tgz $(BUNDLE)

$(BUILD)/bundle/libmoetrain.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUNDLE)/lib/libmoetrain_blas.so: $(BUNDLE_MAINS) $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) -shared -s -fuse-ld=gold -Wl,--icf=all -Wl,-soname,$(notdir $@) -o $@ \
	  $$(nm -u --quiet $^ | awk '/ (cblas|openblas)_/ { print "-Wl,-u," $$2 }' | sort -u) \
	  $(shell $(CXX) -print-file-name=libopenblas.a) -pthread

$(BUNDLE)/moetrain: $(BUILD)/main.o
$(BUNDLE)/gpu_parity: $(PARITY_OBJS)
$(BUNDLE)/nccl_test: $(BUILD)/tests/gpu/nccl_test.o
$(BUNDLE)/gemm_bench: $(BUILD)/bench/gemm_bench.o
$(BUNDLE)/attention_bench: $(BUILD)/bench/attention_bench.o
$(BUNDLE_BINS): $(BUILD)/bundle/libmoetrain.a $(BUNDLE)/lib/libmoetrain_blas.so
	$(CXX) -o $@ $(filter %.o,$^) $(BUILD)/bundle/libmoetrain.a $(BUNDLE_LDLIBS)
else
gpu-bundle:
	@echo "make gpu-bundle: needs nvcc (CUDA=1): install the CUDA toolkit, or point NVCC=/path/to/nvcc" >&2; exit 1
endif
