# Raw-libfabric baseline benchmark (bench/fi_bench.c), linked with the
# component's btl_ofi_validate.c for the fi_getinfo hints btl/ofi asks with.
#
# Included by standalone/Makefile, which must define BUILD and BTL_OFI_ROOT
# before the include (target names are expanded when read).  Also usable on
# its own:
#   make -f bench/build.mk BUILD=/tmp/x BTL_OFI_ROOT=$PWD /tmp/x/fi_bench

fi_bench_mk := $(lastword $(MAKEFILE_LIST))
# Rules below must not steal the including makefile's default goal.
fi_bench_saved_goal := $(.DEFAULT_GOAL)

BTL_OFI_ROOT ?= $(abspath $(dir $(fi_bench_mk))..)
BUILD ?= $(BTL_OFI_ROOT)/build
BENCH_CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra
BENCH_LDFLAGS ?=
fi_bench_pkgconfig = $(shell pkg-config $(1) libfabric 2>/dev/null)
FI_BENCH_FABRIC_CFLAGS ?= $(call fi_bench_pkgconfig,--cflags)
FI_BENCH_FABRIC_LDFLAGS ?= $(call fi_bench_pkgconfig,--libs-only-L)

# (standalone/Makefile defines these; the defaults serve the use on its own)
VALIDATE_SOURCES ?= $(BTL_OFI_ROOT)/btl_ofi_validate.c
VALIDATE_HEADERS ?= $(BTL_OFI_ROOT)/btl_ofi_validate.h

BENCH_PROGS += $(BUILD)/fi_bench

$(BUILD)/fi_bench: $(BTL_OFI_ROOT)/bench/fi_bench.c $(VALIDATE_SOURCES) $(VALIDATE_HEADERS) \
    $(fi_bench_mk)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $(FABRIC_CPPFLAGS) $(FI_BENCH_FABRIC_CFLAGS) -I$(BTL_OFI_ROOT) -o $@ $< \
	    $(VALIDATE_SOURCES) $(BENCH_LDFLAGS) $(FABRIC_LDFLAGS) $(FI_BENCH_FABRIC_LDFLAGS) -lfabric

# MPI benchmarks (bench/osc_bench.c, bench/p2p_bench.c), run by contrib/bench;
# btl/ofi's MPI_T counters through the test programs' reader
# (tests/common/btl_ofi_pvars.c).
MPICC ?= mpicc
MPI_BENCH_CFLAGS ?= -O2 -g -std=gnu11 -Wall -Wextra
BENCH_PVARS_DIR := $(BTL_OFI_ROOT)/tests/common
MPI_BENCH_UTIL := $(BTL_OFI_ROOT)/bench/mpi_bench_util.c $(BTL_OFI_ROOT)/bench/mpi_bench_util.h \
    $(BENCH_PVARS_DIR)/btl_ofi_pvars.c $(BENCH_PVARS_DIR)/btl_ofi_pvars.h

BENCH_PROGS += $(BUILD)/osc_bench $(BUILD)/p2p_bench $(BUILD)/compute_tax $(BUILD)/scale_put

$(BUILD)/osc_bench $(BUILD)/p2p_bench $(BUILD)/compute_tax $(BUILD)/scale_put: $(BUILD)/%: $(BTL_OFI_ROOT)/bench/%.c $(MPI_BENCH_UTIL) \
    $(BTL_OFI_ROOT)/bench/compute_work.h
	@mkdir -p $(@D)
	$(MPICC) $(MPI_BENCH_CFLAGS) -I$(BENCH_PVARS_DIR) -o $@ $< \
	    $(BTL_OFI_ROOT)/bench/mpi_bench_util.c $(BENCH_PVARS_DIR)/btl_ofi_pvars.c

# What one look of a thread costs a computation on its core (no MPI).
BENCH_PROGS += $(BUILD)/look_cost

$(BUILD)/look_cost: $(BTL_OFI_ROOT)/bench/look_cost.c $(BTL_OFI_ROOT)/bench/compute_work.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -D_GNU_SOURCE -o $@ $< -lpthread

# bench/startup.sh's program: launch and teardown only.
BENCH_PROGS += $(BUILD)/bench/startup_hello

$(BUILD)/bench/startup_hello: $(BTL_OFI_ROOT)/bench/startup_hello.c
	@mkdir -p $(@D)
	$(MPICC) -O2 -o $@ $<

# Last in the file, so that no rule above becomes the includer's default goal.
ifneq ($(firstword $(MAKEFILE_LIST)),$(fi_bench_mk))
.DEFAULT_GOAL := $(fi_bench_saved_goal)
endif
