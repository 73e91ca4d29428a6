/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * The progress subsystem (btl_ofi_progress.c): the thread that serves a
 * rank which is away from MPI, the channel on which waiting origins wake
 * it, and when it looks.  Its whole interface is below; it knows nothing
 * of contexts and endpoints: what a look does is the callback the
 * component hands it, and a peer is the plain address it published.
 *
 * The rule it keeps: while the application calls into the component, the
 * thread stays out of its way (no lock, no CQ); it steps in for a context
 * only once the application has left it alone for a whole
 * btl_ofi_progress_idle_us.
 */
#ifndef MCA_BTL_OFI_PROGRESS_H
#define MCA_BTL_OFI_PROGRESS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* The wake channel                                                    */

/** Where one peer's progress thread takes wake-ups, and the proof it asks. */
typedef struct mca_btl_ofi_wake_to_t {
    bool reachable;        /**< the peer takes wake-ups and we know where */
    bool remote;           /**< on another node: sent from our socket on the network */
    struct sockaddr_in to; /**< its thread's address and port */
    uint64_t key;          /**< the peer's secret, the whole payload of a wake-up */
} mca_btl_ofi_wake_to_t;

/** What a process publishes so that the job's peers, and no one else, wake it. */
typedef struct mca_btl_ofi_wake_addr_t {
    uint32_t ip4;      /**< IPv4 (network order) of the network socket, or 0 */
    uint16_t port;     /**< UDP port (host order) on 127.0.0.1, 0: none */
    uint16_t net_port; /**< UDP port (host order) on ip4, 0: none */
    uint64_t key;      /**< random per process; a datagram without it is dropped */
} mca_btl_ofi_wake_addr_t;

/**
 * Open the wake channel: a socket on 127.0.0.1 for peers on this node and,
 * when @p net_ip4 (network order) is an address of this host other than
 * loopback, one on that address for peers on other nodes.  Each takes only
 * datagrams that carry this process's key.  Returns 0, or the errno that
 * stopped the loopback socket.
 */
int mca_btl_ofi_wake_open(uint32_t net_ip4);
void mca_btl_ofi_wake_close(void);
/** Whether a progress thread of ours reads the channel (published or not). */
void mca_btl_ofi_wake_listen(bool on);
/** What to publish; all zero when we take no wake-ups. */
void mca_btl_ofi_wake_self(mca_btl_ofi_wake_addr_t *addr);
/** The IPv4 address (network order) in an endpoint name of @p len bytes
 * and libfabric address format @p addr_format, 0 when it has none. */
uint32_t mca_btl_ofi_wake_ip4(const void *ep_name, size_t len, uint32_t addr_format);
/** Where a peer's wake-ups go, from what it published. */
void mca_btl_ofi_wake_to_init(mca_btl_ofi_wake_to_t *wake, const mca_btl_ofi_wake_addr_t *peer,
                              bool same_node);
/** One wake-up to that thread; returns whether it was sent. */
bool mca_btl_ofi_wake_send(const mca_btl_ofi_wake_to_t *wake);

/* ------------------------------------------------------------------ */
/* The thread                                                          */

/**
 * One look: step in for every context the application left alone since
 * the last look.  Returns whether it stepped in for any; sets @p busy when
 * traffic shows (completions read, operations of ours outstanding, sends
 * queued), @p sending when sends of ours are in flight or queued.
 */
typedef bool (*mca_btl_ofi_look_fn_t)(bool *busy, bool *sending);

/** What the thread is given at component init. */
typedef struct mca_btl_ofi_progress_setup_t {
    mca_btl_ofi_look_fn_t look; /**< what a look does */
    bool can_sleep;             /**< every peer can wake it: it may sleep while quiet */
    int period_us;              /**< the bound it serves: its period while traffic shows */
    bool crowded;               /**< this node's ranks outnumber its CPUs */
} mca_btl_ofi_progress_setup_t;

/**
 * Let a progress thread run (component init).  It is created when memory
 * is first exposed; with can_sleep it sleeps while nothing is aimed at
 * this process.
 */
void mca_btl_ofi_progress_thread_enable(const mca_btl_ofi_progress_setup_t *setup);
/** Stop and join it, and enable it no more; does nothing when it is not running. */
void mca_btl_ofi_progress_thread_stop(void);
/**
 * A registration that peers may write, read or apply atomics to was taken
 * (@p delta 1) or released (-1); @p window: it takes atomics (a one-sided
 * window's memory, not a message buffer).  While none is held no peer can
 * aim a one-sided operation at us, and the thread waits with no timer.
 */
void mca_btl_ofi_progress_expose(int delta, bool window);
/** Whether a registration that peers may aim at is held now. */
bool mca_btl_ofi_progress_exposed(void);

/**
 * Zero while a send of ours would find the thread not watching sends: a
 * provider that moves data only when called may hold an injected or
 * queued send until someone progresses, and the rank that sent it may
 * next block outside MPI (MPI_Comm_connect's PMIx exchange, a
 * computation) while its peer waits for the message.
 */
extern volatile int32_t mca_btl_ofi_progress_watching_sends;
void mca_btl_ofi_progress_watch_sends(void);

/** A send was posted or queued: the thread looks for the linger time. */
static inline void mca_btl_ofi_progress_sent(void)
{
    if (__builtin_expect(0 == mca_btl_ofi_progress_watching_sends, 0)) {
        mca_btl_ofi_progress_watch_sends();
    }
}

#endif /* MCA_BTL_OFI_PROGRESS_H */
