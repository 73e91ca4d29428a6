#!/bin/sh
# Plays the part of a process that a SIGKILL ended before it could remove
# its shm region, and whose pid has come round again: leaves a file where
# libfabric's shm would put this pid's first region, records its name in
# $STALE_SHM_LIST for the test to remove, then becomes the MPI program
# (exec keeps the pid), whose shm endpoint must still open.
region=/dev/shm/$$:$(id -u):0
# a few bytes, not a region: shm then reads a pid it cannot tell from a
# live owner's and refuses the name (an empty file makes 1.17 crash with
# SIGBUS instead)
printf 'stale' >"$region"
echo "$region" >>"${STALE_SHM_LIST:?STALE_SHM_LIST names the list of planted files}"
exec "$@"
