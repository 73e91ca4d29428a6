/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Wake-ups of a peer's progress thread (btl_ofi_wake.c): one UDP socket per
 * process, and where each peer's thread takes them.  Plain data in and
 * out, so that btl_ofi_wake.c needs nothing of the component: callers log
 * and count.
 */
#ifndef MCA_BTL_OFI_WAKE_H
#define MCA_BTL_OFI_WAKE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Where one peer's progress thread takes wake-ups. */
typedef struct mca_btl_ofi_wake_to_t {
    bool reachable;        /**< the peer takes wake-ups and we know where */
    struct sockaddr_in to; /**< its thread's address and port */
} mca_btl_ofi_wake_to_t;

/** Open the process's wake-up socket; 0, or the errno that stopped it. */
int mca_btl_ofi_wake_open(void);
void mca_btl_ofi_wake_close(void);
/** The socket (for the progress thread's ppoll), -1 when closed. */
int mca_btl_ofi_wake_fd(void);
/** Whether a progress thread of ours reads the socket (published or not). */
void mca_btl_ofi_wake_listen(bool on);
/** The port peers wake us at, 0 when we take none. */
uint16_t mca_btl_ofi_wake_port(void);
/** The IPv4 address (network order) in an endpoint name of @p len bytes
 * and libfabric address format @p addr_format, 0 when it has none. */
uint32_t mca_btl_ofi_wake_ip4(const void *ep_name, size_t len, uint32_t addr_format);
/** Where a peer's wake-ups go, from what it published. */
void mca_btl_ofi_wake_to_init(mca_btl_ofi_wake_to_t *wake, uint32_t ip4, uint16_t port,
                              bool same_node);
/** One wake-up to that thread; returns whether it was sent. */
bool mca_btl_ofi_wake_send(const mca_btl_ofi_wake_to_t *wake);
/** Read every wake-up queued for our thread; returns how many. */
int mca_btl_ofi_wake_drain(void);

#endif /* MCA_BTL_OFI_WAKE_H */
