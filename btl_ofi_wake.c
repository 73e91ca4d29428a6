/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Wake-ups of the progress thread, the socket they travel on.  The
 * providers here apply a peer's write or answer its read only when the
 * target calls them, and they leave the target nothing to wait on: a
 * write lands without a completion, and a CQ's wait object is either
 * missing or wakes for reasons of its own.  So a target that computes
 * outside MPI is served only at its thread's next timed look.  Here the
 * origin, the one side that knows it is waiting, says so: one datagram
 * to the target's thread, which then looks at once, or as soon as its
 * least gap between looks allows (btl_ofi_progress_gap_us).
 *
 * One UDP socket per process, bound to every address on an ephemeral
 * port: origins send from it, and the progress thread, where one runs,
 * reads from it (only then is its port published).  A peer
 * on this node is reached on the loopback address; one on another node at
 * the IPv4 address its provider gave its endpoint (sockets, tcp, net);
 * peers of a provider without such an address (shm is one node anyway,
 * efa) get no wake-ups and keep the timer.  A lost or refused datagram
 * costs only the wait it would have shortened.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "btl_ofi_validate.h"
#include "btl_ofi_wake.h"

static int wake_fd = -1;
static uint16_t wake_port; /**< host order; meaningful while wake_fd >= 0 */
static bool listening;     /**< a progress thread reads wake_fd */

int mca_btl_ofi_wake_open(void)
{
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
    socklen_t len = sizeof(me);
    int fd, err;

    if (wake_fd >= 0) {
        return 0;
    }
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno;
    }
    if (0 != bind(fd, (struct sockaddr *) &me, sizeof(me))
        || 0 != getsockname(fd, (struct sockaddr *) &me, &len)) {
        err = errno;
        close(fd);
        return err;
    }
    wake_fd = fd;
    wake_port = ntohs(me.sin_port);
    return 0;
}

void mca_btl_ofi_wake_close(void)
{
    if (wake_fd >= 0) {
        close(wake_fd);
        wake_fd = -1;
    }
}

int mca_btl_ofi_wake_fd(void)
{
    return wake_fd;
}

void mca_btl_ofi_wake_listen(bool on)
{
    listening = on;
}

uint16_t mca_btl_ofi_wake_port(void)
{
    return (wake_fd >= 0 && listening) ? wake_port : 0;
}

uint32_t mca_btl_ofi_wake_ip4(const void *ep_name, size_t len, uint32_t addr_format)
{
    struct sockaddr_in sin;

    if (NULL == ep_name || len < sizeof(sin)
        || (FI_SOCKADDR_IN != addr_format && FI_SOCKADDR != addr_format)) {
        return 0;
    }
    memcpy(&sin, ep_name, sizeof(sin));
    return AF_INET == sin.sin_family ? sin.sin_addr.s_addr : 0;
}

void mca_btl_ofi_wake_to_init(mca_btl_ofi_wake_to_t *wake, uint32_t ip4, uint16_t port,
                              bool same_node)
{
    mca_btl_ofi_wake_route_t route = mca_btl_ofi_wake_route(ip4, port, same_node);

    memset(wake, 0, sizeof(*wake));
    wake->reachable = MCA_BTL_OFI_WAKE_NONE != route;
    wake->to.sin_family = AF_INET;
    wake->to.sin_port = htons(port);
    wake->to.sin_addr.s_addr = MCA_BTL_OFI_WAKE_LOOPBACK == route ? htonl(INADDR_LOOPBACK) : ip4;
}

bool mca_btl_ofi_wake_send(const mca_btl_ofi_wake_to_t *wake)
{
    static const char ring = 1;

    if (wake_fd < 0 || !wake->reachable) {
        return false;
    }
    return sendto(wake_fd, &ring, sizeof(ring), MSG_DONTWAIT, (const struct sockaddr *) &wake->to,
                  sizeof(wake->to))
           == (ssize_t) sizeof(ring);
}

int mca_btl_ofi_wake_drain(void)
{
    char ring[16];
    int n = 0;

    while (wake_fd >= 0 && recv(wake_fd, ring, sizeof(ring), MSG_DONTWAIT) >= 0) {
        ++n;
    }
    return n;
}
