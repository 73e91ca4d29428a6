/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/**
 * @file
 *
 * Decisions about providers and parameters that need nothing but their
 * inputs: whether one fi_info is usable, how providers rank, whether a
 * provider is named by an include or exclude list, whether a parameter is
 * in range, what a peer's modex blob says.  Kept free of Open MPI so that
 * unit tests link it alone.
 */

#ifndef MCA_BTL_OFI_VALIDATE_H
#define MCA_BTL_OFI_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include <rdma/fabric.h>

#include "btl_ofi_copy.h"

#define MCA_BTL_OFI_MAX_MODULES_LIMIT  16  /**< hard bound of btl_ofi_max_nics */
#define MCA_BTL_OFI_MAX_CONTEXTS_LIMIT 64  /**< hard bound of num_contexts_per_module */
#define MCA_BTL_OFI_MAX_RAILS          8   /**< rails one module moves one-sided bytes on */
#define MCA_BTL_OFI_STRIPE_ALIGN       64  /**< chunks of a striped transfer start on this */
#define MCA_BTL_OFI_CQ_BATCH_LIMIT     256 /**< entries of the CQ read buffer: num_cq_read's bound */

/** Memory-registration mode bits we know how to serve. */
#define MCA_BTL_OFI_MR_MODE_SUPPORTED                                                              \
    (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT | FI_MR_LOCAL | FI_MR_HMEM)

/** Mode bits (info->mode) we can satisfy. */
#define MCA_BTL_OFI_MODE_SUPPORTED (FI_CONTEXT | FI_CONTEXT2)

/**
 * Address-vector type: FI_AV_MAP is deprecated from libfabric 2.0 on (efa
 * warns and makes a table of it), so against 2.x headers we ask for a
 * table.  Our fi_addr_t values are opaque either way.
 */
#if FI_MAJOR_VERSION >= 2
#    define MCA_BTL_OFI_AV_TYPE FI_AV_TABLE
#else
#    define MCA_BTL_OFI_AV_TYPE FI_AV_MAP
#endif

/** Capabilities asked for one-sided traffic. */
#define MCA_BTL_OFI_RMA_CAPS                                                                       \
    (FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

/** Capabilities asked for two-sided traffic. */
#define MCA_BTL_OFI_MSG_CAPS (FI_MSG | FI_SEND | FI_RECV)

/** Whether @p prov_name ("tcp;ofi_rxm") has @p layer ("tcp", "ofi_rxm") as one of
 * its ';'-separated layers (case-insensitive). */
bool mca_btl_ofi_name_has_layer(const char *prov_name, const char *layer);

/**
 * Fill fi_getinfo hints the way the component asks for a provider: RDM,
 * the mode and MR-mode bits we serve, delivery-complete by default,
 * MCA_BTL_OFI_AV_TYPE, resource management on.  The raw-libfabric benchmark asks
 * through the same function so that both see the same providers.
 *
 * @param[in,out] hints    from fi_allocinfo()
 * @param[in]     caps     capabilities (MCA_BTL_OFI_RMA_CAPS, ...; FI_HMEM
 *                         keeps FI_MR_HMEM in the MR modes)
 * @param[in]     progress FI_PROGRESS_* for control and data progress
 * @param[in]     threading FI_THREAD_SAFE, FI_THREAD_COMPLETION or FI_THREAD_DOMAIN
 */
void mca_btl_ofi_fill_hints(struct fi_info *hints, uint64_t caps, int progress,
                            enum fi_threading threading);

/**
 * What provider discovery still asks for.  Each round in which no listed
 * provider qualifies gives one wish up (mca_btl_ofi_give_up_wish).
 */
typedef struct mca_btl_ofi_wishes_t {
    bool rma;          /**< one-sided traffic (never given up) */
    bool msg;          /**< two-sided traffic */
    bool msg_optional; /**< two-sided may go (the user did not set btl_ofi_mode) */
    bool hmem;         /**< device memory */
    bool atomics;      /**< the provider's own atomics */
} mca_btl_ofi_wishes_t;

/** The fi_getinfo capabilities of @p w (FI_READ, FI_SEND, ... included). */
uint64_t mca_btl_ofi_wished_caps(const mca_btl_ofi_wishes_t *w);

/** The capabilities an fi_info must list for @p caps: the primary ones. */
uint64_t mca_btl_ofi_primary_caps(uint64_t caps);

/**
 * Give up the next wish: device memory first, then the provider's atomics
 * (a provider with RMA and messages but no FI_ATOMIC, such as efa-direct,
 * gets atomics the target applies), then two-sided traffic unless the
 * user asked for it (one-sided only, with the provider's atomics again).
 *
 * @return false when nothing is left to give up
 */
bool mca_btl_ofi_give_up_wish(mca_btl_ofi_wishes_t *w);

/**
 * Check one fi_info against what the component needs.
 *
 * @param[in]  info          candidate from fi_getinfo
 * @param[in]  required_caps capabilities that must all be present
 * @param[out] why           reason for a rejection (may be NULL)
 * @param[in]  why_len       size of why
 * @return true when usable
 */
bool mca_btl_ofi_info_usable(const struct fi_info *info, uint64_t required_caps, char *why,
                             size_t why_len);

/** libfabric's version of a provider built into release MAJOR.MINOR
 * (fabric_attr->prov_version of the providers that ship with it). */
#define MCA_BTL_OFI_RELEASE(major, minor) FI_VERSION((major) *100 + (minor), 0)

/**
 * How the component drives one provider, decided once from its fi_info
 * (memory registration, context space, atomics, registration cache).
 */
typedef struct mca_btl_ofi_plan_t {
    bool virt_addr;        /**< FI_MR_VIRT_ADDR: peers address by virtual address */
    bool prov_key;         /**< FI_MR_PROV_KEY: the provider picks keys */
    bool mr_endpoint;      /**< FI_MR_ENDPOINT: regions bind to the endpoint */
    bool mr_local;         /**< FI_MR_LOCAL: every local buffer is registered */
    bool context2;         /**< FI_CONTEXT2 mode: two context words per operation */
    bool provider_atomics; /**< FI_ATOMIC offered: probe it; else atomics are target-applied */
    bool bypass_mr_cache;  /**< the provider caches registrations and ours must stay out */
    bool efa_direct;       /**< efa's fabric "efa-direct": the device alone, no emulation */
} mca_btl_ofi_plan_t;

/**
 * Decide how to drive the provider of @p info.  The registration cache
 * is bypassed for efa before libfabric 2.2, whose own cache a second one
 * on top only delays; from 2.2 on efa registers what it is asked to and
 * ours applies as for everyone else.
 */
void mca_btl_ofi_plan_info(const struct fi_info *info, mca_btl_ofi_plan_t *plan);

/** Whether @p info is efa's "efa-direct" fabric (libfabric 2.x). */
bool mca_btl_ofi_is_efa_direct(const struct fi_info *info);

/**
 * Rank a provider by name.  Hardware providers first, then the
 * shared-memory provider (only when the whole job is on one node), then
 * tcp;ofi_rxm, then sockets, then the rest.
 *
 * @return a score, higher is better; negative when the provider must not
 *         be chosen in this situation
 */
int mca_btl_ofi_provider_rank(const char *prov_name, bool job_on_one_node);

/**
 * Does a comma-separated list name this provider?  An entry names a
 * provider when it equals the full name ("tcp;ofi_rxm") or one of its
 * ';'-separated layers ("ofi_rxm" or "tcp"), case-insensitively.
 */
bool mca_btl_ofi_list_names(const char *list, const char *prov_name);

/**
 * Does an entry of the list equal the provider's full name?  An include
 * list that names a provider exactly ("tcp", libfabric 2.x's RDM tcp)
 * takes it over the layerings it also names ("tcp;ofi_rxm").
 */
bool mca_btl_ofi_list_names_exactly(const char *list, const char *prov_name);

/** Outcome of checking an integer parameter. */
typedef enum {
    MCA_BTL_OFI_PARAM_OK = 0,
    MCA_BTL_OFI_PARAM_CLAMPED = 1,
} mca_btl_ofi_param_check_t;

/**
 * Clamp *value into [min, max].
 * @return MCA_BTL_OFI_PARAM_CLAMPED when *value was changed
 */
mca_btl_ofi_param_check_t mca_btl_ofi_clamp_int(int *value, int min, int max);

/** Map a progress-mode name to FI_PROGRESS_*; -1 when unknown. */
int mca_btl_ofi_parse_progress_mode(const char *name);

/** Values of btl_ofi_progress_thread. */
enum {
    MCA_BTL_OFI_PROGRESS_THREAD_OFF = 0,
    MCA_BTL_OFI_PROGRESS_THREAD_ON = 1,
    MCA_BTL_OFI_PROGRESS_THREAD_AUTO = 2,
};

/** Map "auto", "on" or "off" (or 1/0, yes/no) to MCA_BTL_OFI_PROGRESS_THREAD_*; -1 when unknown. */
int mca_btl_ofi_parse_progress_thread(const char *name);

/**
 * Whether a progress thread runs for a provider whose domain reports
 * @p data_progress (FI_PROGRESS_*), given the user's @p setting.
 *
 * @param[out] why  static reason, for the verbose output
 */
bool mca_btl_ofi_progress_thread_wanted(int setting, int data_progress, const char **why);

/**
 * The largest message ob1 sends eagerly (btl_eager_limit) when the user
 * set none, for @p provider: our whole receive buffer (@p max_send_size)
 * where that measured faster than ob1's rendezvous (sockets), 16 KiB
 * elsewhere (shm's rendezvous read is one copy; ofi_rxm switches to a
 * rendezvous of its own above 16 KiB; others are not known to gain).
 */
size_t mca_btl_ofi_default_eager_limit(const char *provider, size_t max_send_size);

/** What the component asks of FI_SOCKETS_MAX_BUF_SZ when the user set none. */
#define MCA_BTL_OFI_SOCKETS_BUF_SZ (4 * 1024 * 1024)

/**
 * The socket buffer size (FI_SOCKETS_MAX_BUF_SZ, bytes) in force for
 * @p provider when the user's environment holds @p user (NULL: unset):
 * theirs when set, 0 when theirs is not a positive number,
 * MCA_BTL_OFI_SOCKETS_BUF_SZ when unset; 0 for every provider but sockets.
 */
int mca_btl_ofi_sockets_buf_size(const char *provider, const char *user);

/**
 * Give each TCP socket of this process connected to @p peer (an IPv4 or
 * IPv6 address of @p peer_len bytes) a receive buffer of @p size bytes
 * (SO_RCVBUF; the kernel caps it at net.core.rmem_max).  Listening
 * sockets and sockets connected elsewhere are left alone.  Returns how
 * many sockets took the size, -1 when the process's descriptors cannot be
 * listed (/proc/self/fd).  libc only, so that a unit test drives it over
 * loopback.
 */
int mca_btl_ofi_widen_sockets_to(const struct sockaddr *peer, size_t peer_len, int size);

/*
 * What each process publishes about itself: the provider it chose and the
 * endpoint name of each of its modules, in one blob (a header, then per
 * module a 32-bit length and the name).  Parsing checks every length, so a
 * short or foreign blob makes that peer unreachable instead of reading
 * past the end.
 */
#define MCA_BTL_OFI_MODEX_PROV_LEN 64
#define MCA_BTL_OFI_MODEX_MAGIC    0x4f464934u /**< "OFI4": first word of the blob */

typedef struct mca_btl_ofi_modex_hdr_t {
    uint32_t magic;                            /**< MCA_BTL_OFI_MODEX_MAGIC */
    uint32_t module_count;                     /**< names that follow */
    char provider[MCA_BTL_OFI_MODEX_PROV_LEN]; /**< the sender's provider, NUL-terminated */
    uint32_t wake_ip4;          /**< IPv4 (network order) other nodes wake our thread at, or 0 */
    uint16_t wake_port;         /**< UDP port (host order) on 127.0.0.1, 0 without a thread */
    uint16_t wake_net_port;     /**< UDP port (host order) on wake_ip4, 0: none */
    uint64_t wake_key;          /**< what our thread's wake-ups must carry */
    mca_btl_ofi_host_id_t host; /**< who may copy into our memory (btl_ofi_copy.h) */
} mca_btl_ofi_modex_hdr_t;

/**
 * The provider a peer's blob names, or NULL when the blob is malformed.
 * Points into @p blob.
 */
const char *mca_btl_ofi_modex_provider(const void *blob, size_t size);

/**
 * Find module @p index's endpoint name in a peer's blob.
 *
 * @param[in]  blob, size  the peer's modex data
 * @param[in]  provider    the provider we use
 * @param[in]  index       module index
 * @param[out] name, len   points into blob on success
 * @param[out] why         static reason on failure
 * @return 0 on success, -1 on a malformed or incompatible blob
 */
int mca_btl_ofi_modex_parse(const void *blob, size_t size, const char *provider, int index,
                            const void **name, size_t *len, const char **why);

/*
 * Wake-ups of a peer's progress thread (btl_ofi_progress.c).  An origin whose
 * one-sided operations have seen no completion for a while sends the
 * target's thread a datagram, so that a target computing outside MPI is
 * served now rather than at its thread's next timed look.
 */

/** Where a peer's wake-ups go, from what it published. */
typedef enum {
    MCA_BTL_OFI_WAKE_NONE = 0, /**< no thread there, or no address we can reach */
    MCA_BTL_OFI_WAKE_LOOPBACK, /**< same node: 127.0.0.1 and its port */
    MCA_BTL_OFI_WAKE_REMOTE,   /**< another node: its provider's IPv4 address and its port */
} mca_btl_ofi_wake_route_t;

mca_btl_ofi_wake_route_t mca_btl_ofi_wake_route(uint32_t ip4, uint16_t port, bool same_node);

/** Wake-ups repeat at most this many times btl_ofi_progress_wake_us apart. */
#define MCA_BTL_OFI_WAKE_BACKOFF 32

/** The origin's watch over a wait without completions (all in ns). */
typedef struct mca_btl_ofi_stall_watch_t {
    int64_t since;       /**< start of the wait, or of the gap after the last wake-up; 0: none */
    int64_t gap;         /**< how long until the next wake-up is due */
    int64_t read_ns;     /**< when the clock was last read for it; 0: never */
    uint32_t passes;     /**< empty progress passes since then */
    uint32_t per_read;   /**< empty passes between two reads of the clock; 0: every one */
    int64_t woke_ns;     /**< when this wait last woke its targets after its delay; 0: never */
    uint32_t eager;      /**< waits left that wake their targets at once */
    uint32_t woke_peers; /**< to how many targets it went */
} mca_btl_ofi_stall_watch_t;

/**
 * Waits that wake their targets at once after one whose wake-up was
 * answered within MCA_BTL_OFI_EAGER_ANSWER_NS, or went to a single target,
 * in a process that gives its core away when progress finds nothing (Open
 * MPI does so on an oversubscribed node).  Such an origin that waits the
 * wake-up delay yields first, and a computing target beside it on the core
 * runs a whole slice before the origin can send: 4 ms or more per
 * operation (rma_busy_target np 4 on 2 CPUs, shm: 100 rounds took 2.2-3.0 s,
 * 0.1-0.2 s without the yields).  A prompt answer says that the target's
 * thread served it; a late one to a lone target is that slice, which the
 * prompt rule alone never saw (up to 3.0 s in 1 launch of 10).  Where
 * targets are merely slow in MPI (32 ranks on 2 CPUs), answers come at
 * random, and waking at once after any wake-up took 3 times as long: an
 * eager wait wakes only a lone target (mca_btl_ofi_endpoints_wake_waited),
 * and one that is back in MPI gets at most MCA_BTL_OFI_EAGER_WAITS needless
 * wake-ups.
 */
#define MCA_BTL_OFI_EAGER_WAITS     8
#define MCA_BTL_OFI_EAGER_ANSWER_NS 100000

/** A wait ended with a completion at @p now: where @p yields (the process
 * yields its core when idle), one whose last wake-up was answered
 * promptly or went to one target makes the next MCA_BTL_OFI_EAGER_WAITS
 * ones wake at once. */
void mca_btl_ofi_stall_wait_ended(mca_btl_ofi_stall_watch_t *watch, int64_t now, bool yields);
/** At the first empty pass of a wait: whether it wakes its targets at once
 * (it uses up one of the eager waits). */
bool mca_btl_ofi_wake_at_once(mca_btl_ofi_stall_watch_t *watch);

/** About how often a waiting origin reads the clock, in ns: a wake-up is
 * due after 100 us or more, and a pass that waits on shm takes well under
 * a microsecond, so reading it on every pass cost 11 % of the time an
 * origin spent waiting for its 8-byte fetch-and-op. */
#define MCA_BTL_OFI_STALL_READ_NS 2000
/** At most this many passes between two reads, whatever a pass took. */
#define MCA_BTL_OFI_STALL_READ_PASSES 32

/**
 * Counts one progress pass that completed nothing; returns whether the
 * stall watch should read the clock on this one (about every
 * MCA_BTL_OFI_STALL_READ_NS).
 */
bool mca_btl_ofi_stall_read_due(mca_btl_ofi_stall_watch_t *watch);
/** The clock read that mca_btl_ofi_stall_read_due asked for, at @p now:
 * the passes since the last one say how many make the next interval. */
void mca_btl_ofi_stall_clock_read(mca_btl_ofi_stall_watch_t *watch, int64_t now);

/**
 * The origin's side: called when a progress call completed nothing
 * (and with @p outstanding false, or a zeroed watch, once something
 * completed).  Returns true when the peers should be woken now:
 * operations are outstanding and nothing completed for @p after_ns.
 * While the same wait goes on, each further wake-up comes twice as long
 * after the one before (up to MCA_BTL_OFI_WAKE_BACKOFF times @p after_ns):
 * a target that is in MPI and merely slow, or a long transfer, should
 * not be woken over and over.
 */
bool mca_btl_ofi_wake_due(mca_btl_ofi_stall_watch_t *watch, int64_t now, int64_t after_ns,
                          bool outstanding);

/** Bytes per microsecond below which a transfer counts as stalled: 1 GB/s,
 * slower than any provider here moves a large put (shm about 11 GB/s,
 * tcp;ofi_rxm on one node about 5) and than a 10 GbE link. */
#define MCA_BTL_OFI_WAKE_BYTES_PER_US 1000

/** Outstanding bytes charged at most, unless one operation is larger: 1 ms
 * at MCA_BTL_OFI_WAKE_BYTES_PER_US, the bound a computing target is served
 * in.  Completions come one operation at a time, so a deep window of large
 * puts says nothing about when the next one is due; charged in full, 64
 * puts of 1 MiB waited 64 ms, and a target that other work had preempted
 * was never woken. */
#define MCA_BTL_OFI_WAKE_BYTES_CAP 1000000

/**
 * How long a wait on @p ops one-sided operations that move @p bytes in all
 * goes without a completion before their targets' threads are woken, in
 * ns: btl_ofi_progress_wake_us (@p wake_us; 0: never, returned as 0) plus
 * what moving the bytes takes at MCA_BTL_OFI_WAKE_BYTES_PER_US, the bytes
 * counted up to MCA_BTL_OFI_WAKE_BYTES_CAP or one operation's mean size,
 * whichever is larger, and at least @p floor_us (MCA_BTL_OFI_CROWDED_WAKE_US
 * where ranks outnumber CPUs, else 0).  A target in MPI completes a 1 MiB put on shm in
 * about 90 us: a flat 100 us woke its thread for most of them, and each
 * wake-up took the target's core from the very progress that served the
 * put.
 */
int64_t mca_btl_ofi_wake_after_ns(int wake_us, int floor_us, int64_t bytes, int64_t ops);

/*
 * The progress thread's period.  A look costs the rank whose core the thread
 * shares about 10 us, so the thread looks only as often as a peer may need it.
 */

/** What the thread knows when it plans its next look. */
typedef struct mca_btl_ofi_look_plan_t {
    bool exposed;      /**< some registration of ours takes remote access */
    bool sending;      /**< a send of ours may still wait in the provider */
    bool can_sleep;    /**< every peer can wake the thread (wake-ups reach it) */
    bool app_present;  /**< the last look found the application in every context */
    bool own_sends;    /**< sends of ours were in flight or queued at the last look (once
                        * the watch is over: sends that outlived it) */
    int64_t quiet_ns;  /**< since the last sign of traffic aimed at us */
    int64_t linger_ns; /**< btl_ofi_progress_linger_us */
    int interval_us;   /**< the awake period (btl_ofi_progress_idle_us, backed off) */
    int sleep_us;      /**< btl_ofi_progress_sleep_us */
    bool contended;    /**< the rank waits for its CPU behind other processes' work */
    bool cpu_calm;     /**< no sample read contended for MCA_BTL_OFI_CALM_NS */
    bool crowded;      /**< this node's ranks outnumber its CPUs */
} mca_btl_ofi_look_plan_t;

/**
 * A rank that spins in MPI on a core it shares with another process's
 * work never sleeps, so it gets the core back only when the other's slice
 * ends (3 ms here); a thread of its own that wakes makes the scheduler
 * choose again.  So while traffic is recent on such a core, a thread that
 * found the rank in MPI looks every MCA_BTL_OFI_CONTENDED_LOOK_US, not
 * after the sleep period, though it steps in for nothing (beside one
 * CPU-bound process per core, put_rate 1 MiB, np 2, 15 rounds: sockets
 * 1.84 times thread-off's rate, 1.04 with the sleep; tcp;ofi_rxm 2.53
 * against 1.40).  Idle, such looks cost tcp;ofi_rxm get_bw 64 KiB a
 * quarter of its rate (they tip it to its slow mode), so they are kept for a
 * rank that waited for its CPU more than 1/MCA_BTL_OFI_CONTENDED_SHARE of
 * the last MCA_BTL_OFI_CONTENDED_SAMPLE_NS (measured: 1 % idle, 70 % beside
 * the load), and never where the job's own ranks outnumber the CPUs (their
 * periods grow instead).
 */
#define MCA_BTL_OFI_CONTENDED_LOOK_US   1600
#define MCA_BTL_OFI_CONTENDED_SHARE     8
#define MCA_BTL_OFI_CONTENDED_SAMPLE_NS 100000000

/**
 * On a core no other work contends, a rank found in MPI progresses what it
 * waits on, and a peer that waits on it wakes the thread: a look within the sleep
 * period serves nobody, and over tcp;ofi_rxm such looks tip get_bw 64 KiB
 * to its slow mode more often than thread-off's launches fall into it
 * (even timer wake-ups that only read the core's contention do).  Such a
 * thread looks again after MCA_BTL_OFI_PRESENT_LOOK_US, but only once no
 * sample has read the core contended for MCA_BTL_OFI_CALM_NS: beside a
 * load a few samples a second read it free, and a second's sleep after
 * each cost shm get_bw 1 MiB its lead over thread-off (1.0 against 1.5-1.8).
 */
#define MCA_BTL_OFI_PRESENT_LOOK_US 1000000
#define MCA_BTL_OFI_CALM_NS         10000000000LL

/**
 * Where this node's ranks outnumber its CPUs a rank in MPI waits a
 * scheduler slice (3 ms here) at a time for its CPU: a wait that long is
 * no sign of a computing target there, and a look or wake-up within it
 * mostly finds the rank in MPI (0-18 step-ins in 150-500 wake-ups per
 * test) while it takes a turn of a crowded core.  So there the period is
 * at least MCA_BTL_OFI_CROWDED_PERIOD_US, a wake-up waits at least
 * MCA_BTL_OFI_CROWDED_WAKE_US, and looks get no nudge.  Measured (np 4 on
 * 2 CPUs, tcp;ofi_rxm, 80 random-order rounds, against the 200 us period
 * and wake-ups): 8-byte put_lat 0.91, put_bibw 1 MiB 1.13, put_bw 64 KiB
 * 1.12, no row worse beyond its interval.  The price: on shm (40 rounds)
 * fop_lat 1.12, as its atomics wait for a target woken 2 ms into the wait.
 */
#define MCA_BTL_OFI_CROWDED_PERIOD_US 4000
#define MCA_BTL_OFI_CROWDED_WAKE_US   2000

/** @p us times @p ranks_per_cpu, at most 1 s; where @p ranks_per_cpu is
 * above 1, at least @p crowded_floor_us. */
int mca_btl_ofi_crowded_us(long us, long ranks_per_cpu, long crowded_floor_us);

/** Whether @p waited_ns of run-queue wait in @p wall_ns says the rank's
 * core is contended. */
bool mca_btl_ofi_cpu_contended(int64_t waited_ns, int64_t wall_ns);

/**
 * Microseconds until the thread's next look: -1 (no timer) while nothing
 * is exposed, no send of ours may wait in the provider and traffic has
 * been quiet for the linger time, since then no peer needs us; the awake
 * interval while only sends are watched; the sleep period while sends
 * that outlived the watch are still in flight (one to a peer that is still
 * starting, or that computes, may need our provider to move again, but not
 * soon).  Within the linger time of traffic, with nothing exposed, the
 * sleep period: exposures come and go with every rendezvous message, and
 * a thread with no timer must be kicked by the next one.  With memory
 * exposed, where peers
 * can wake the thread: the sleep period after a look that found the
 * application in every context with no send of ours outstanding (a peer
 * that then waits on us wakes the thread, and what the rank waits on
 * itself it progresses itself; MCA_BTL_OFI_CONTENDED_LOOK_US instead
 * while its core is contended), or once traffic has been quiet for the
 * linger time; the awake interval otherwise.
 */
int mca_btl_ofi_look_after_us(const mca_btl_ofi_look_plan_t *plan);

/**
 * Whether the next timed look gets a nudge (btl_ofi_progress_nudge_us), as
 * a look that may serve a waiting peer must not be late.  Not after a look
 * that found the application in every context on an uncontended core,
 * where peers can wake the thread: nobody waits for that look, and its timers
 * were the only wake-ups on the core of a rank streaming 64 KiB puts or
 * gets over tcp;ofi_rxm (one node), which then ran in the slower of its
 * two speeds more often than with no thread (docs/decisions.md, Progress).
 * A contended core keeps it: there the wake-up is the point.  A crowded
 * node gets none (MCA_BTL_OFI_CROWDED_PERIOD_US).
 */
bool mca_btl_ofi_look_is_nudged(const mca_btl_ofi_look_plan_t *plan);

/**
 * How a put or get of @p size bytes is cut across @p rails rails that
 * reach the peer (rails are NICs of one provider, equal shares): chunk i
 * covers [@p offsets[i], + @p lengths[i]).  Every cut falls on a multiple
 * of @p align, so no chunk is shorter than @p align except a last short
 * one; fewer chunks than rails when the size does not give each rail a
 * whole @p align.  Returns the number of chunks, 1 when @p size is below
 * @p stripe_min or @p stripe_min is 0 (striping off).
 */
int mca_btl_ofi_stripe_cut(size_t size, int rails, size_t stripe_min, size_t align, size_t *offsets,
                           size_t *lengths);

#endif /* MCA_BTL_OFI_VALIDATE_H */
