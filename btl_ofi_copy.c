/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * A job that spans hosts runs on a network provider, and that provider
 * carries a same-host peer's puts and gets too: over the loopback
 * connection, applied by the target's progress.  With four ranks on two
 * cores an 8-byte put to the rank beside us then waits 0.2 ms for that
 * rank to be scheduled.  The kernel can copy straight into the peer's
 * memory instead (cross-memory attach, as libfabric's shm and Open MPI's
 * btl/sm do): the bytes are in place when the call returns, which is all
 * MPI's completion of a put or a get needs, and the target does nothing.
 *
 * Whether a peer can be reached this way is decided from what it
 * published (mca_btl_ofi_host_id_t in the modex): the same kernel and
 * PID namespace, so that its pid names it here.  Atomics stay with the
 * provider: a copy is not atomic against the target's other updates.
 */

/* process_vm_writev() when built alone (the unit tests link this file
 * without Open MPI, whose opal_config.h asks for the same) */
#ifndef _GNU_SOURCE
#    define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "btl_ofi_copy.h"

static mca_btl_ofi_host_id_t self_id;
static bool self_id_read;

static void read_boot_id(char *out, size_t len)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    out[0] = '\0';
    if (NULL == f) {
        return;
    }
    if (NULL == fgets(out, (int) len, f)) {
        out[0] = '\0';
    }
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

const mca_btl_ofi_host_id_t *mca_btl_ofi_host_id_self(void)
{
    struct stat ns;

    if (!self_id_read) {
        memset(&self_id, 0, sizeof(self_id));
        read_boot_id(self_id.boot_id, sizeof(self_id.boot_id));
        if (0 == stat("/proc/self/ns/pid", &ns)) {
            self_id.pid_ns = (uint64_t) ns.st_ino;
        }
        self_id.pid = (uint32_t) getpid();
        self_id_read = true;
    }
    return &self_id;
}

bool mca_btl_ofi_host_id_shared(const mca_btl_ofi_host_id_t *self,
                                const mca_btl_ofi_host_id_t *peer)
{
    if ('\0' == self->boot_id[0] || 0 == self->pid_ns || 0 == peer->pid) {
        return false;
    }
    /* the peer's string may lack its NUL: compare the whole field */
    return 0 == memcmp(self->boot_id, peer->boot_id, sizeof(self->boot_id))
           && self->pid_ns == peer->pid_ns;
}

int mca_btl_ofi_copy_with(pid_t pid, bool to_peer, void *local, uint64_t remote, size_t size)
{
    size_t done = 0;

    while (done < size) {
        struct iovec here = { .iov_base = (char *) local + done, .iov_len = size - done };
        struct iovec there = { .iov_base = (void *) (uintptr_t) (remote + done),
                               .iov_len = size - done };
        ssize_t n = to_peer ? process_vm_writev(pid, &here, 1, &there, 1, 0)
                            : process_vm_readv(pid, &here, 1, &there, 1, 0);

        if (n < 0) {
            if (EINTR == errno) {
                continue;
            }
            return errno;
        }
        if (0 == n) {
            return EFAULT; /* the kernel moved nothing and said nothing */
        }
        done += (size_t) n;
    }
    return 0;
}
