# Every C test program, one directory per lane of contrib/check:
#
#   unit        tests/unit/test_*.c         -> $(BUILD)/unit/test_*   (cmocka, no MPI)
#               tests/unit/opal/test_*.c    -> $(BUILD)/unit/test_*   (cmocka, libopen-pal)
#   mpitests    tests/mpi/*.c               -> $(BUILD)/mpi/<name>, and the
#               MPI_T reader for Python     -> $(BUILD)/mpi/libbtl_ofi_pvars.so
#   robustness  tests/robustness/*.c        -> $(BUILD)/robustness/<name>, and the
#               fault shim fi_fault.c       -> $(BUILD)/robustness/libfi_fault.so
#   hosts       tests/hosts/*.c             -> $(BUILD)/hosts/<name>
#   slurm       the PMIx fence shim tests/slurm/fence_delay.c
#                                           -> $(BUILD)/slurm/libfence_delay.so
#   tests       all of the above
#
# The MPI programs are built with the cached Open MPI's mpicc and linked with
# the one reader of btl/ofi's MPI_T counters, tests/common/btl_ofi_pvars.c.
# The scripts of the lanes build through here (make -C standalone TARGET);
# only contrib/intree builds its program with another Open MPI's mpicc.
#
# Included by standalone/Makefile, which defines BTL_OFI_ROOT, BUILD, CC,
# MPICC, WARN, SAN_LDFLAGS and VALIDATE_SOURCES.  The wildcards pick up test
# files added later without an edit here.

tests_mk := $(lastword $(MAKEFILE_LIST))
# Rules below must not steal the including makefile's default goal.
tests_saved_goal := $(.DEFAULT_GOAL)

TESTS_DIR := $(BTL_OFI_ROOT)/tests

# ---------------------------------------------------------------- MPI_T reader

PVARS_DIR := $(TESTS_DIR)/common
PVARS_HEADERS := $(PVARS_DIR)/btl_ofi_pvars.h
PVARS_OBJ := $(BUILD)/common/btl_ofi_pvars.o

# What every MPI test program is compiled with; tests/hosts includes
# "mpi/common.h".
MPI_TEST_CFLAGS ?= -O2 -g -Wall -Wextra -pthread
MPI_TEST_CPPFLAGS := -I$(TESTS_DIR) -I$(PVARS_DIR)

$(PVARS_OBJ): $(PVARS_DIR)/btl_ofi_pvars.c $(PVARS_HEADERS) $(tests_mk)
	@mkdir -p $(@D)
	$(MPICC) $(MPI_TEST_CFLAGS) -std=gnu11 $(MPI_TEST_CPPFLAGS) -c -o $@ $<

# mpi_test_rule LANE DIR EXTRA_CFLAGS HEADERS: every DIR/*.c but the shim is
# a program $(BUILD)/LANE/<name>.
define mpi_test_rule
$(1)_SOURCES := $$(filter-out $$(TESTS_DIR)/robustness/fi_fault.c,$$(wildcard $(2)/*.c))
$(1)_PROGS := $$(patsubst $(2)/%.c,$$(BUILD)/$(1)/%,$$($(1)_SOURCES))
$$($(1)_PROGS): $$(BUILD)/$(1)/%: $(2)/%.c $(4) $$(PVARS_HEADERS) $$(PVARS_OBJ) $$(tests_mk)
	@mkdir -p $$(@D)
	$$(MPICC) $$(MPI_TEST_CFLAGS) $(3) $$(MPI_TEST_CPPFLAGS) -o $$@ $$< $$(PVARS_OBJ) -lm
endef

# ---------------------------------------------------------------- unit

UNIT_TESTS := $(patsubst $(TESTS_DIR)/unit/%.c,$(BUILD)/unit/%,$(wildcard $(TESTS_DIR)/unit/test_*.c))

# Pure logic, linked with the component's Open-MPI-free part only.
$(UNIT_TESTS): $(BUILD)/unit/%: $(TESTS_DIR)/unit/%.c $(VALIDATE_SOURCES) $(VALIDATE_HEADERS) $(tests_mk)
	@mkdir -p $(@D)
	$(CC) -O1 -g $(WARN) -std=gnu11 $(SAN_LDFLAGS) $(FABRIC_CPPFLAGS) -I$(BTL_OFI_ROOT) -o $@ $< \
	    $(VALIDATE_SOURCES) $(FABRIC_LDFLAGS) -lcmocka -lfabric

# Component files that need Open MPI but no MPI job, each against fakes of
# what it calls (tests/unit/opal/test_*.c): linked with the component's
# objects (context, the progress subsystem and the pure decisions they
# use) and libopen-pal.  btl_ofi_context.c for the order of completions.
UNIT_OPAL_TESTS := $(patsubst $(TESTS_DIR)/unit/opal/%.c,$(BUILD)/unit/%,\
    $(wildcard $(TESTS_DIR)/unit/opal/test_*.c))

UNIT_OPAL_OBJECTS := $(BUILD)/obj/btl_ofi_context.o $(BUILD)/obj/btl_ofi_progress.o \
    $(BUILD)/obj/btl_ofi_validate.o $(BUILD)/obj/btl_ofi_copy.o

# test_params: the parameter table (btl_ofi_params.c), which needs the
# module template the others have no fake of, and the decisions it uses.
UNIT_PARAMS_TEST := $(BUILD)/unit/test_params
UNIT_PARAMS_OBJECTS := $(BUILD)/obj/btl_ofi_params.o $(BUILD)/obj/btl_ofi_validate.o \
    $(BUILD)/obj/btl_ofi_copy.o

# unit_opal_link OBJECTS: the test program $@ from $< and OBJECTS
unit_opal_link = $(CC) $(COMPONENT_CFLAGS) -o $@ $< $(1) $(SAN_LDFLAGS) $(FABRIC_LDFLAGS) \
    -L$(OMPI_LIBDIR) -Wl,-rpath,$(OMPI_LIBDIR) $(OMPI_LIBS) -lfabric -lcmocka -lpthread

$(filter-out $(UNIT_PARAMS_TEST),$(UNIT_OPAL_TESTS)): $(BUILD)/unit/%: \
    $(TESTS_DIR)/unit/opal/%.c $(UNIT_OPAL_OBJECTS) $(COMPONENT_HEADERS) $(tests_mk)
	@mkdir -p $(@D)
	$(call unit_opal_link,$(UNIT_OPAL_OBJECTS))

$(filter $(UNIT_PARAMS_TEST),$(UNIT_OPAL_TESTS)): $(BUILD)/unit/%: \
    $(TESTS_DIR)/unit/opal/%.c $(UNIT_PARAMS_OBJECTS) $(COMPONENT_HEADERS) $(tests_mk)
	@mkdir -p $(@D)
	$(call unit_opal_link,$(UNIT_PARAMS_OBJECTS))

# ---------------------------------------------------------------- mpi

$(eval $(call mpi_test_rule,mpi,$(TESTS_DIR)/mpi,,$(wildcard $(TESTS_DIR)/mpi/*.h)))
MPI_TEST_PROGS += $(mpi_PROGS)

# The same reader as a shared library, for tests/mpi/pool.py (ctypes).
PVARS_LIB := $(BUILD)/mpi/libbtl_ofi_pvars.so
$(PVARS_LIB): $(PVARS_DIR)/btl_ofi_pvars.c $(PVARS_HEADERS) $(tests_mk)
	@mkdir -p $(@D)
	$(MPICC) $(MPI_TEST_CFLAGS) -std=gnu11 $(MPI_TEST_CPPFLAGS) -shared -fPIC -o $@ $<
MPI_TEST_PROGS += $(PVARS_LIB)

# ---------------------------------------------------------------- robustness

# the programs share faults_common.h (their PVARS and RESULT lines)
$(eval $(call mpi_test_rule,robustness,$(TESTS_DIR)/robustness,-std=gnu11 -Wno-unused-parameter,$(TESTS_DIR)/robustness/faults_common.h))

# The LD_PRELOAD shim that wraps libfabric's ops tables: no MPI.
FAULT_SHIM := $(BUILD)/robustness/libfi_fault.so
$(FAULT_SHIM): $(TESTS_DIR)/robustness/fi_fault.c $(tests_mk)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -shared -fPIC $(FABRIC_CPPFLAGS) \
	    -o $@ $< $(FABRIC_LDFLAGS) -ldl -lpthread -lfabric

ROBUSTNESS_PROGS := $(robustness_PROGS) $(FAULT_SHIM)

# ---------------------------------------------------------------- hosts

$(eval $(call mpi_test_rule,hosts,$(TESTS_DIR)/hosts,,$(wildcard $(TESTS_DIR)/mpi/*.h)))
HOSTS_PROGS := $(hosts_PROGS)

# ---------------------------------------------------------------- slurm

# The LD_PRELOAD shim that holds one rank's PMIx fence releases: no MPI,
# no PMIx header (it finds the next PMIx_Fence_nb at run time).
FENCE_SHIM := $(BUILD)/slurm/libfence_delay.so
$(FENCE_SHIM): $(TESTS_DIR)/slurm/fence_delay.c $(tests_mk)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -shared -fPIC -o $@ $< -ldl

.PHONY: unit mpitests robustness hosts slurm tests
unit: $(UNIT_TESTS) $(UNIT_OPAL_TESTS)
mpitests: $(MPI_TEST_PROGS)
robustness: $(ROBUSTNESS_PROGS)
hosts: $(HOSTS_PROGS)
slurm: $(FENCE_SHIM)
tests: unit mpitests robustness hosts slurm

.DEFAULT_GOAL := $(tests_saved_goal)
