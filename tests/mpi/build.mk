# MPI test programs: every tests/mpi/*.c becomes $(BUILD)/mpi/<name>.
#
# Included by standalone/Makefile, which defines BTL_OFI_ROOT, BUILD and
# MPICC.  The wildcard picks up test files added later without an edit here.

mpi_tests_mk := $(lastword $(MAKEFILE_LIST))
# Rules below must not steal the including makefile's default goal.
mpi_tests_saved_goal := $(.DEFAULT_GOAL)

MPI_TEST_DIR := $(BTL_OFI_ROOT)/tests/mpi
MPI_TEST_CFLAGS ?= -O2 -g -Wall -Wextra -pthread
MPI_TEST_SOURCES := $(wildcard $(MPI_TEST_DIR)/*.c)
MPI_TEST_HEADERS := $(wildcard $(MPI_TEST_DIR)/*.h)

MPI_TEST_PROGS += $(patsubst $(MPI_TEST_DIR)/%.c,$(BUILD)/mpi/%,$(MPI_TEST_SOURCES))

$(BUILD)/mpi/%: $(MPI_TEST_DIR)/%.c $(MPI_TEST_HEADERS) $(mpi_tests_mk)
	@mkdir -p $(@D)
	$(MPICC) $(MPI_TEST_CFLAGS) -o $@ $< -lm

.DEFAULT_GOAL := $(mpi_tests_saved_goal)
