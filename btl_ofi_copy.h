/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Puts and gets to a peer on this host as one copy into or out of its
 * memory (btl_ofi_copy.c).  Plain data in and out, like btl_ofi_progress.h,
 * so that a unit test drives it without the component.
 */
#ifndef MCA_BTL_OFI_COPY_H
#define MCA_BTL_OFI_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MCA_BTL_OFI_BOOT_ID_LEN 40

/** What says two processes can copy into each other's memory: the same
 * running kernel and the same PID namespace; and who the process is. */
typedef struct mca_btl_ofi_host_id_t {
    char boot_id[MCA_BTL_OFI_BOOT_ID_LEN]; /**< the kernel's boot id, NUL-terminated; "" unknown */
    uint64_t pid_ns;                       /**< inode of the PID namespace, 0 unknown */
    uint32_t pid;                          /**< the process, in that namespace */
    uint32_t reserved;                     /**< zero */
} mca_btl_ofi_host_id_t;

/** This process's identity (read once, then cached). */
const mca_btl_ofi_host_id_t *mca_btl_ofi_host_id_self(void);

/** Whether a process that published @p peer can be copied to from this
 * process: both identities known and equal but for the pid. */
bool mca_btl_ofi_host_id_shared(const mca_btl_ofi_host_id_t *self,
                                const mca_btl_ofi_host_id_t *peer);

/** Copy @p size bytes from @p local to @p remote in process @p pid
 * (@p to_peer), or from there to @p local; 0 once every byte moved, else
 * the errno that stopped it (nothing or part of it moved). */
int mca_btl_ofi_copy_with(pid_t pid, bool to_peer, void *local, uint64_t remote, size_t size);

#endif /* MCA_BTL_OFI_COPY_H */
