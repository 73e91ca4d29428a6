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
 * btl/ofi: a byte transfer layer over libfabric.  One module per NIC (fi_info
 * domain) of one provider; each module owns one or more communication
 * contexts (a TX/RX pair and a CQ), picked per thread by one thread-local
 * index.  One-sided operations map to fi_write/fi_read/fi_atomic; two-sided
 * traffic uses fi_send into pre-posted receive buffers.
 *
 * Which file owns what (docs/design.md, "Reading the code", walks a put and an
 * incoming message through them):
 *
 *   btl_ofi_component.c  parameters, provider discovery, component init,
 *                        MPI_T counters
 *   btl_ofi_module.c     memory registration, module open/finalize
 *   btl_ofi_endpoint.c   modex, address vector, add/del procs, peers
 *   btl_ofi_context.c    contexts, CQs and progress, what the progress
 *                        thread's look does to them, and the receive
 *                        buffers of the sockets provider's connections
 *   btl_ofi_rdma.c       put, get, flush and the one posting path
 *   btl_ofi_atomics.c    atomics: probing, posting, and those the target
 *                        applies for providers without fi_atomic
 *   btl_ofi_frag.c       two-sided fragments and the active-message path
 *   btl_ofi_progress.c   the progress subsystem: the thread, the channel on
 *                        which origins wake it, and when it looks; its
 *                        interface is btl_ofi_progress.h, which needs
 *                        nothing of this header
 *   btl_ofi_validate.c   decisions that need no Open MPI (unit-tested alone)
 *
 * Calls go one way: component -> module -> {endpoint, context, rdma,
 * atomics, frag}; atomics -> {rdma, frag}; {rdma, frag} -> context;
 * {frag, context} -> endpoint; {component, module, endpoint} -> progress.
 * The progress thread reaches the contexts only through the look callback
 * component init hands it (mca_btl_ofi_contexts_look).
 * Progress reaches the owners of a completion only through the callback
 * the completion carries (mca_btl_ofi_ctx_hdr_t), the context's work
 * hook, and the message-kind table.
 *
 * Locking: a context's lock serialises reading its CQ, its parked
 * completions and the two lists of frag.c; posting to libfabric takes no
 * lock of ours (the domain is FI_THREAD_SAFE whenever Open MPI runs
 * threads).  The module's lock guards its peer tables and its table of
 * registered regions.  Fields marked "fixed at open" are written by
 * module open only and read without a lock afterwards.
 */

#ifndef MCA_BTL_OFI_H
#define MCA_BTL_OFI_H

#include "opal_config.h"

#include <assert.h>
#include <netinet/in.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "opal/class/opal_free_list.h"
#include "opal/class/opal_hash_table.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/rcache/base/base.h"
#include "opal/sys/atomic.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi_compat.h"
#include "btl_ofi_validate.h"
#include "btl_ofi_progress.h"

BEGIN_C_DECLS

#define BTL_OFI_VERSION_MAJOR   1
#define BTL_OFI_VERSION_MINOR   0
#define BTL_OFI_VERSION_RELEASE 0

/** Size of the per-operation tables of confirmed atomic datatypes. */
#define MCA_BTL_OFI_ATOMIC_TABLE (FI_ATOMIC_OP_LAST)

/** Values of btl_ofi_mode. */
enum {
    MCA_BTL_OFI_MODE_ONE_SIDED = 0,
    MCA_BTL_OFI_MODE_TWO_SIDED = 1,
    MCA_BTL_OFI_MODE_FULL_SUPPORT = 2,
};

/** Counters exported as MPI_T performance variables. */
typedef enum {
    MCA_BTL_OFI_CNT_PUT,
    MCA_BTL_OFI_CNT_PUT_BYTES,
    MCA_BTL_OFI_CNT_GET,
    MCA_BTL_OFI_CNT_GET_BYTES,
    MCA_BTL_OFI_CNT_ATOMIC,
    MCA_BTL_OFI_CNT_SEND,
    MCA_BTL_OFI_CNT_SEND_BYTES,
    MCA_BTL_OFI_CNT_RECV,
    MCA_BTL_OFI_CNT_RECV_BYTES,
    MCA_BTL_OFI_CNT_FLUSH,
    MCA_BTL_OFI_CNT_RETRY,
    MCA_BTL_OFI_CNT_ERROR,
    MCA_BTL_OFI_CNT_MR_REG,
    MCA_BTL_OFI_CNT_MR_DEREG,
    MCA_BTL_OFI_CNT_WAKE_SENT,
    MCA_BTL_OFI_CNT_WAKE_RECV,
    MCA_BTL_OFI_CNT_LOOK,         /**< the progress thread's looks */
    MCA_BTL_OFI_CNT_LOOK_TIMER,   /**< looks its timer started */
    MCA_BTL_OFI_CNT_LOOK_WOKEN,   /**< looks a waiting origin's wake-up started */
    MCA_BTL_OFI_CNT_STEP_IN,      /**< contexts it progressed for an absent application */
    MCA_BTL_OFI_CNT_EXPOSE,       /**< times memory became exposed after none was */
    MCA_BTL_OFI_CNT_REPOST,       /**< operations posted again on another rail */
    MCA_BTL_OFI_CNT_RAIL_DOWN,    /**< rails taken out of service for a peer */
    MCA_BTL_OFI_CNT_LOCAL_COPY,   /**< puts and gets copied to a same-host peer */
    MCA_BTL_OFI_CNT_LOCAL_ATOMIC, /**< atomics to a same-host peer through the shm module */
    MCA_BTL_OFI_CNT_LOOK_LATE, /**< looks that began btl_ofi_progress_nudge_us past their timer */
    MCA_BTL_OFI_CNT_NUDGE,     /**< second timers that found the woken thread not yet run */
    MCA_BTL_OFI_CNT_AV_INSERT, /**< peers entered in the address vector */
    MCA_BTL_OFI_CNT_AV_REMOVE, /**< peers that left (said so, or their job ended) removed from it */
    MCA_BTL_OFI_CNT_IN_PLACE_ATOMIC, /**< atomics on our own memory applied in place */
    MCA_BTL_OFI_CNT_PEER_LEFT,       /**< peers of other jobs that said they leave */
    MCA_BTL_OFI_CNT_EMPTY_PAUSE,     /**< application passes that found nothing and paused */
    MCA_BTL_OFI_CNT_MAX,
} mca_btl_ofi_counter_t;

/** What a two-sided message carries: indexes mca_btl_ofi_msg_handlers. */
typedef enum {
    MCA_BTL_OFI_KIND_AM = 0,             /**< an active message for the layer above */
    MCA_BTL_OFI_KIND_ATOMIC_REQUEST = 1, /**< an atomic for the target to apply */
    MCA_BTL_OFI_KIND_ATOMIC_REPLY = 2,   /**< its answer */
    MCA_BTL_OFI_KIND_LEAVING = 3,        /**< the sender leaves (del_procs at its MPI_Finalize) */
    MCA_BTL_OFI_KIND_MAX,
} mca_btl_ofi_msg_kind_t;

struct mca_btl_ofi_module_t;
struct mca_btl_ofi_context_t;
struct mca_btl_ofi_ctx_hdr_t;

/* ------------------------------------------------------------------ */
/* Registrations and peers                                             */

/**
 * The handle that travels to peers: only what a peer needs to address the
 * memory.  The local-only descriptor lives in mca_btl_ofi_reg_t.
 */
struct mca_btl_base_registration_handle_t {
    uint64_t rkey;      /**< remote key of the region on the module's own NIC (rail 0) */
    uint64_t base_addr; /**< base used for offset addressing (0 with FI_MR_VIRT_ADDR) */
    /** keys of the same region on rails 1..num_rails-1, then on the
     * same-host module (slot num_rails-1, kept in every process whose
     * settings allow one: mca_btl_ofi_rails_setup); only those travel
     * (btl_registration_handle_size): a one-rail handle is 24 bytes */
    uint64_t rail_keys[MCA_BTL_OFI_MAX_RAILS - 1];
};

/** Bytes of a handle that names @p rails rails. */
#define MCA_BTL_OFI_HANDLE_SIZE(rails)                                                             \
    (offsetof(mca_btl_base_registration_handle_t, rail_keys) + ((rails) -1) * sizeof(uint64_t))

/** A registration known to the rcache (or made directly when it is bypassed). */
typedef struct mca_btl_ofi_reg_t {
    mca_rcache_base_registration_t base;       /**< rcache bookkeeping: range, access, refs */
    struct fid_mr *mr;                         /**< libfabric region; NULL once closed */
    void *desc;                                /**< local descriptor for FI_MR_LOCAL */
    mca_btl_base_registration_handle_t handle; /**< what peers get */
    struct mca_btl_ofi_module_t *module;       /**< owner */
    /** the same region on the owner's other rails ([0] unused) */
    struct fid_mr *rail_mr[MCA_BTL_OFI_MAX_RAILS];
    void *rail_desc[MCA_BTL_OFI_MAX_RAILS]; /**< their local descriptors ([0]: desc) */
    struct fid_mr *same_host_mr;            /**< the same region on the owner's same-host module */
} mca_btl_ofi_reg_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_reg_t);

/**
 * Where the provider reaches a peer, and what we learn of the connection
 * it makes to it.  The address is set by add_procs before the endpoint is
 * published and never changes, so posting paths read it without a lock.
 */
typedef struct mca_btl_ofi_peer_addr_t {
    fi_addr_t fi; /**< AV address of the peer's endpoint (RX context 0) */
    /** false when no address could be made, and once a message to the
     * peer was lost (btl_ofi_frag.c): nothing more goes to it */
    bool reachable;
    /** a send to it has completed: its connection exists, and injected
     * sends (reported done at once) no longer wait in the provider for one;
     * set by the first completion, never cleared */
    volatile bool send_confirmed;
    /** the peer, of another job, said it leaves: its entry goes at the
     * next idle progress pass (btl_ofi_endpoint.c) */
    bool departed;
    /** sockets: the TCP socket our provider connected to this peer still
     * needs its receive buffer widened (mca_btl_ofi_sockets_widen); set at
     * creation, cleared by the first post to the peer that succeeds (two
     * that race only look twice) */
    bool widen_socket;
    struct sockaddr_storage sock_name; /**< sockets: the peer endpoint's address */
    size_t sock_name_len;              /**< sockets: its length */
} mca_btl_ofi_peer_addr_t;

/**
 * A lead with rails: the watch on one rail for one peer.  A reset
 * connection can leave operations on a rail neither completed nor failed
 * until something is sent on it, so a rail that goes silent is probed;
 * rail 0, which carries the atomics, is then given up (btl_ofi_rdma.c).
 */
typedef struct mca_btl_ofi_rail_watch_t {
    /** operations in flight to the peer on this rail: its share of puts
     * and gets, and on rail 0 the atomics */
    opal_atomic_int64_t out;
    /** when one was last posted or completed, or a probe answered */
    int64_t seen_ns;
    int64_t probe_ns;        /**< when a probe was last posted or refused */
    uint64_t probe_raddr;    /**< where the last one went: the probe reads there */
    uint64_t probe_rkey;     /**< its key on this rail */
    size_t probe_size;       /**< what the probe reads: at most the last one's size */
    volatile bool probe_out; /**< a probe is in flight */
    bool lost;               /**< given up for the peer (reported once) */
} mca_btl_ofi_rail_watch_t;

/** The same peer on each rail of a lead module (docs/rails.md). */
typedef struct mca_btl_ofi_peer_rails_t {
    /** its endpoint in each rail's module ([0]: this endpoint; the others
     * retained); fixed once add_procs made it */
    struct mca_btl_base_endpoint_t *ep[MCA_BTL_OFI_MAX_RAILS];
    /** bit r set while rail r reaches the peer (atomic: a failed rail is
     * cleared by whichever thread completes its operation) */
    opal_atomic_int32_t up;
    uint32_t next; /**< round-robin cursor of small operations; races are harmless */
    /** when rail r began refusing every post to the peer, 0 while it takes
     * them (btl_ofi_rdma.c; races only shift the time) */
    int64_t refused_since[MCA_BTL_OFI_MAX_RAILS];
    /** whether each rail still answers, one per rail of the lead
     * (attach_rails); NULL elsewhere, and where that allocation failed */
    mca_btl_ofi_rail_watch_t *watch;
} mca_btl_ofi_peer_rails_t;

/** A peer on our own host: its puts and gets copied, its atomics on shm. */
typedef struct mca_btl_ofi_peer_same_host_t {
    /** the runtime places the peer on our node and it shares our kernel
     * and PID namespace (what it published says so) */
    bool shared;
    /** the peer's pid where its puts and gets are copied (btl_ofi_copy.c),
     * 0 where they go through the provider; cleared for good by a copy
     * the kernel refused */
    volatile uint32_t copy_pid;
    /** the same peer on the lead's same-host module, which carries its
     * atomics (retained); NULL where they go through this module */
    struct mca_btl_base_endpoint_t *ep;
} mca_btl_ofi_peer_same_host_t;

/**
 * A peer as seen by one module.  Created by add_procs under the module's
 * lock, one concern to a member: the provider's address, the peer's
 * progress thread, the same peer on other rails, the same-host path.
 */
struct mca_btl_base_endpoint_t {
    opal_list_item_t super;              /**< on module->endpoints */
    opal_proc_t *proc;                   /**< peer process */
    struct mca_btl_ofi_module_t *module; /**< owning module */
    /** RMA operations in flight to this peer (atomic): flush waits for
     * them, and the peer's progress thread is woken while there are some */
    opal_atomic_int64_t outstanding;
    mca_btl_ofi_peer_addr_t addr;           /**< where the provider reaches it */
    mca_btl_ofi_wake_to_t wake;             /**< where its progress thread takes wake-ups */
    mca_btl_ofi_peer_rails_t rails;         /**< the same peer on the lead's rails */
    mca_btl_ofi_peer_same_host_t same_host; /**< copies and shm atomics to a peer on our host */
};
typedef struct mca_btl_base_endpoint_t mca_btl_base_endpoint_t;
typedef mca_btl_base_endpoint_t mca_btl_ofi_endpoint_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_endpoint_t);

/* ------------------------------------------------------------------ */
/* Operations and their completions                                    */

/**
 * Completes one operation: called by progress, without the context lock,
 * for each completion the CQ reports (@p len: bytes received, receives
 * only) and for operations their owner failed for good.  The progress
 * thread passes @p may_call_up false: a completion that would call the
 * layer above (osc/rdma, ob1) then does nothing and returns false, and
 * progress parks it for the application's next progress call.  Returns
 * true when the operation is done with.
 */
typedef bool (*mca_btl_ofi_complete_fn_t)(struct mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status,
                                          bool may_call_up);

/**
 * Leads every object whose address libfabric hands back as op_context.
 * fi_ctx is the space FI_CONTEXT and FI_CONTEXT2 providers (efa-direct)
 * own while the operation is in flight: it lives in the object, which
 * comes from a free list, so no operation allocates for it.
 */
typedef struct mca_btl_ofi_ctx_hdr_t {
    struct fi_context2 fi_ctx;          /**< libfabric's per-operation space; must come first */
    mca_btl_ofi_complete_fn_t complete; /**< set by the object's owner before posting */
} mca_btl_ofi_ctx_hdr_t;
_Static_assert(0 == offsetof(mca_btl_ofi_ctx_hdr_t, fi_ctx),
               "op_context must point at the provider's context space");
_Static_assert(sizeof(struct fi_context2) >= 2 * sizeof(struct fi_context),
               "FI_CONTEXT2 asks for twice the space of FI_CONTEXT");

/**
 * One posted one-sided operation.  Comes from its context's free list and
 * belongs to the thread that posted it until libfabric reports it done;
 * then to the thread that reads the completion.  The payload buffer
 * (super.ptr, registered when the provider wants FI_MR_LOCAL) holds atomic
 * operands and the fetched value, which the provider may touch after the
 * call returns.
 */
typedef struct mca_btl_ofi_comp_t {
    opal_free_list_item_t super;           /**< on its context's comps list when free */
    mca_btl_ofi_ctx_hdr_t ctx;             /**< completion callback: btl_ofi_rdma.c's */
    struct mca_btl_ofi_module_t *module;   /**< module it was posted on */
    struct mca_btl_ofi_context_t *context; /**< context it was posted on and returns to */
    mca_btl_ofi_endpoint_t *endpoint;      /**< target */
    void *local_address;                   /**< caller's buffer, handed back to cbfunc */
    mca_btl_base_registration_handle_t *local_handle; /**< its registration, or NULL */
    mca_btl_base_rdma_completion_fn_t cbfunc;         /**< the caller's callback, or NULL */
    void *cbcontext;                                  /**< cbfunc's context argument */
    void *cbdata;                                     /**< cbfunc's data argument */
    uint64_t *operands; /**< in the payload: [0] operand, [1] compare, [2] result */
    void *operand_desc; /**< descriptor of operands (FI_MR_LOCAL) */
    size_t result_size; /**< bytes of [2] copied to local_address on success */
    size_t bytes;       /**< payload of a put or get, counted in the context's outstanding_bytes */
    fi_addr_t addr;     /**< where it was posted: the peer on the context's rail */
    /** the peer as seen by the rail's module when that is not endpoint
     * (counted outstanding on both: each module's stall watch wakes it) */
    mca_btl_ofi_endpoint_t *rail_endpoint;
    int rail;                          /**< rail of the lead module it was posted on */
    struct mca_btl_ofi_comp_t *stripe; /**< a chunk's whole operation, or NULL */
    opal_atomic_int32_t chunks_left;   /**< a whole operation: chunks not completed */
    int stripe_status;                 /**< a whole operation: first error of a chunk */
    bool movable;                      /**< a put or get piece: may go again on another rail */
    bool watched;                      /**< counted in its lead endpoint's watch[rail] */
    bool is_put;                       /**< a piece: write (else read), to post it again */
    size_t size;                       /**< a chunk: bytes */
    uint64_t remote_address;           /**< a chunk: target address as osc/rdma gave it */
    mca_btl_base_registration_handle_t *remote_handle; /**< a chunk: target's handle */
} mca_btl_ofi_comp_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_comp_t);

/** Header in front of every two-sided message; goes on the wire whole. */
typedef struct mca_btl_ofi_am_hdr_t {
    /** sender's job and rank in it, to find the endpoint: after a spawn or
     * a connect/accept, peers of several jobs share the same ranks */
    uint32_t src_jobid;
    uint32_t src_vpid;
    uint8_t tag;    /**< active-message tag */
    uint8_t kind;   /**< mca_btl_ofi_msg_kind_t */
    uint8_t pad[6]; /**< unused; keeps the payload 8-byte aligned */
} mca_btl_ofi_am_hdr_t;

/**
 * A two-sided fragment: a descriptor plus a wire buffer (header and up to
 * the list's payload).  A send fragment belongs to the layer above between
 * alloc and send, then to us until its completion; a receive fragment is
 * always ours, posted or parked on its context's unposted list.
 */
typedef struct mca_btl_ofi_frag_t {
    mca_btl_base_descriptor_t base;           /**< what ob1 sees */
    mca_btl_base_segment_t segment;           /**< points after the header */
    mca_btl_ofi_ctx_hdr_t ctx;                /**< completion: btl_ofi_frag.c's send or receive */
    struct mca_btl_ofi_module_t *module;      /**< owning module */
    struct mca_btl_ofi_context_t *context;    /**< context whose free list it comes from */
    mca_btl_ofi_endpoint_t *endpoint;         /**< destination (sends only) */
    mca_btl_ofi_am_hdr_t *hdr;                /**< start of the wire buffer */
    void *desc;                               /**< local descriptor of the buffer */
    struct mca_btl_ofi_frag_list_t *list;     /**< list it returns to */
    struct mca_btl_ofi_context_t *tx_context; /**< context it was sent on */
    int post_errors; /**< hard post failures while it waited in pending_sends */
} mca_btl_ofi_frag_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_frag_t);

/** A free list of fragments and what a fragment it grows needs to know. */
typedef struct mca_btl_ofi_frag_list_t {
    opal_free_list_t list;                 /**< thread-safe by itself */
    struct mca_btl_ofi_module_t *module;   /**< owner of the fragments */
    struct mca_btl_ofi_context_t *context; /**< owner of the fragments */
    mca_btl_ofi_complete_fn_t complete;    /**< completion of its fragments */
    size_t payload;                        /**< bytes after the header */
} mca_btl_ofi_frag_list_t;

/** Payload of a small fragment: every ob1 control message fits. */
#define MCA_BTL_OFI_SMALL_FRAG_PAYLOAD 256

/** A completion read from the CQ but not yet handed to its owner. */
typedef struct mca_btl_ofi_event_t {
    mca_btl_ofi_ctx_hdr_t *hdr; /**< the operation (libfabric's op_context) */
    size_t len;                 /**< bytes received (receives only) */
    int status;                 /**< OPAL_SUCCESS or the error the provider reported */
} mca_btl_ofi_event_t;

#define MCA_BTL_OFI_DEFERRED_INITIAL 512 /**< first size of a context's parked ring */
#define MCA_BTL_OFI_FAILED_MAX       8   /**< operations one work-hook call may fail */
/** The progress thread's looks are at most this many idle periods apart. */
#define MCA_BTL_OFI_IDLE_BACKOFF 16
/** The same for a thread every peer can wake: a look it does not need
 * takes a core from a rank spinning in MPI. */
#define MCA_BTL_OFI_WAKEABLE_BACKOFF 64

/**
 * A context's lock: one word.  The application takes it on every progress
 * pass while the progress thread exists, where a pthread mutex cost two
 * locked instructions and about 50 others each time; a waiter spins a
 * little, then yields (the holder may be a thread the scheduler preempted).
 */
typedef opal_atomic_int32_t mca_btl_ofi_ctx_lock_t;

/**
 * Work a context's owner wants done under the context lock before its CQ
 * is read (frag.c: sends that wait for room, receive buffers to post
 * again).  Fills @p failed with operations that failed for good, which
 * progress completes once the lock is released; returns their number.
 */
typedef int (*mca_btl_ofi_context_work_fn_t)(struct mca_btl_ofi_context_t *context,
                                             mca_btl_ofi_event_t *failed, int max);

/**
 * A communication context: one TX/RX pair and its CQ.  Contexts of a
 * module are chosen per thread (mca_btl_ofi_thread_context); any thread
 * may progress any context.
 */
typedef struct mca_btl_ofi_context_t {
    /* fixed at open */
    struct fid_ep *tx;                   /**< TX context or the plain endpoint */
    struct fid_ep *rx;                   /**< RX context or the plain endpoint */
    struct fid_cq *cq;                   /**< completions of both */
    int index;                           /**< position in the module; peers send to index 0 */
    struct mca_btl_ofi_module_t *module; /**< owner */
    /** frag.c's hook, NULL without two-sided traffic */
    mca_btl_ofi_context_work_fn_t work;

    /** serialises CQ reads, the parked ring and frag.c's two lists */
    mca_btl_ofi_ctx_lock_t lock;
    /** 1 while one application thread reads this CQ and hands its
     * completions out (atomic; used when app_threads) */
    opal_atomic_int32_t delivering;
    /** completions read by posting paths or the progress thread, whose
     * callbacks wait for the application's next progress call: a ring
     * that grows when full (each entry is an operation of ours, so it is
     * bounded by what is posted); guarded by lock */
    mca_btl_ofi_event_t *deferred;
    int deferred_size;               /**< entries of deferred; guarded by lock */
    int deferred_head;               /**< oldest parked completion; guarded by lock */
    int deferred_count;              /**< parked completions; guarded by lock */
    opal_atomic_int64_t outstanding; /**< one-sided operations posted, not completed (atomic) */
    /** bytes those operations move (atomic like outstanding): a wait for
     * them is a stall only once it outlasts what moving them takes */
    opal_atomic_int64_t outstanding_bytes;
    /** the progress thread holds completions it read from the CQ and has
     * not parked yet (it runs our own ones first, without the lock); no
     * other thread reads the CQ meanwhile, or it would hand the layer
     * above completions that came after them; guarded by lock */
    bool thread_batch;
    /** entries of the application's threads (progress, polls, posts); they
     * only add to it, the progress thread only reads it (a change is all it
     * looks for) */
    volatile uint64_t app_progress;
    /** application threads inside a provider post call (mca_btl_ofi_post;
     * atomic when app_threads): one post can outlast a look (shm copies a
     * large put within fi_write), and the thread must not take it for
     * absence */
    opal_atomic_int64_t app_posting;

    /* btl_ofi_rdma.c */
    opal_free_list_t comps; /**< one-sided operations; thread-safe by itself */
    bool comps_ready;       /**< comps constructed */

    /* btl_ofi_frag.c */
    /** small sends; unbounded, because ob1 5.0.7 corrupts a control message
     * (ACK) whose allocation failed when it retries it */
    mca_btl_ofi_frag_list_t small_frags;
    mca_btl_ofi_frag_list_t send_frags; /**< sends up to max_send_size */
    mca_btl_ofi_frag_list_t recv_frags; /**< receive buffers (context 0 only) */
    bool frags_ready;                   /**< the three lists constructed */
    opal_list_t pending_sends; /**< fragments the provider refused for now; guarded by lock */
    int pending_count;         /**< length of pending_sends; guarded by lock, read unlocked */
    opal_atomic_int64_t sends_in_flight; /**< posted sends whose completion is due (atomic) */
    int64_t send_window;                 /**< sends_in_flight at which sends queue; fixed */
    /** receive buffers the provider refused to take back for now (sockets
     * counts buffered unexpected messages against its receive queue);
     * posted again by the work hook; guarded by lock */
    opal_list_t unposted_recvs;
    int unposted_count; /**< length of unposted_recvs; guarded by lock, read unlocked */

    /** app_progress at the progress thread's last look: the thread's own,
     * last, so that its writes stay off the lines the application uses */
    uint64_t thread_seen;
} mca_btl_ofi_context_t;

/** One module per NIC.  Everything not marked otherwise is fixed at open. */
typedef struct mca_btl_ofi_module_t {
    mca_btl_base_module_t super; /**< the BTL function table and limits (template's copy) */
    struct fi_info *info;        /**< our copy of the chosen fi_info */
    struct fid_fabric *fabric;   /**< the provider's fabric */
    struct fid_domain *domain;   /**< this NIC */
    struct fid_av *av;           /**< peers' addresses; inserts under lock */
    struct fid_ep *ep;           /**< scalable or plain endpoint */
    bool is_scalable_ep;         /**< contexts are TX/RX contexts of a scalable endpoint */
    int rx_ctx_bits;             /**< AV bits naming a peer's RX context */
    bool virt_addr;              /**< FI_MR_VIRT_ADDR: peers address by virtual address */
    bool prov_key;               /**< FI_MR_PROV_KEY: the provider picks keys */
    bool mr_endpoint;            /**< FI_MR_ENDPOINT: regions bind to the endpoint */
    bool mr_local;               /**< FI_MR_LOCAL: local buffers need a descriptor */
    bool bypass_cache;           /**< provider caches registrations itself */
    bool two_sided;              /**< FI_MSG in use, receives posted */
    bool use_inject;             /**< FI_INJECT for small puts */
    bool send_inject;            /**< fi_inject for small two-sided messages */
    bool emulate_atomics;        /**< atomics are applied by the target's progress */
    bool provider_atomics;       /**< the provider offers FI_ATOMIC (fi_query_atomic asked) */
    /** writes and reads complete at the origin with the bytes in place,
     * so they name no delivery-complete (shm's cross-memory copy) */
    bool origin_rma;
    /** same-host peers' puts and gets are copied (btl_ofi_local_copy) */
    bool local_copy;
    size_t inject_size;              /**< largest injected transfer */
    int num_contexts;                /**< entries of contexts */
    mca_btl_ofi_context_t *contexts; /**< the communication contexts */
    int module_index;                /**< position in the component's array */
    /** guards endpoints, peers, regions and AV inserts */
    opal_mutex_t lock;
    /** per fi_op: bit (1 << datatype) set when the fetching form works */
    uint32_t atomic_fetch_ok[MCA_BTL_OFI_ATOMIC_TABLE];
    /** per fi_op: bit (1 << datatype) set when the plain form works */
    uint32_t atomic_post_ok[MCA_BTL_OFI_ATOMIC_TABLE];
    opal_list_t endpoints; /**< every endpoint created, until the module closes; guarded by lock */
    opal_hash_table_t peers;          /**< process name -> endpoint; guarded by lock */
    opal_hash_table_t regions;        /**< rkey -> live mca_btl_ofi_reg_t, kept only when
                                           atomics are emulated; guarded by lock */
    mca_rcache_base_module_t *rcache; /**< grdma, thread-safe by itself */
    opal_atomic_uint64_t counters[MCA_BTL_OFI_CNT_MAX]; /**< MPI_T counters (atomic) */
    opal_atomic_uint64_t next_key; /**< next requested key without FI_MR_PROV_KEY (atomic) */
    /** the lead module (modules[0]) moves one-sided bytes on every rail:
     * rails[0] is itself, rails[1..] the component's other modules, whose
     * domains hold a copy of each of its registrations; 1 elsewhere */
    int num_rails;
    struct mca_btl_ofi_module_t *rails[MCA_BTL_OFI_MAX_RAILS];
    bool lent; /**< a rail of the lead: offers the layer above sends only */
    /** the lead's shm module for same-host peers' atomics in a job across
     * hosts (btl_ofi_local_atomics), NULL without; it offers the layer
     * above nothing */
    struct mca_btl_ofi_module_t *same_host;
    bool serves_same_host; /**< this module is a lead's same_host */
    /** passes in a row that left the network out while only same-host
     * operations were awaited (btl_ofi_context.c); racy by design */
    int network_skips;
    /** called by the stall watch (btl_ofi_context.c) each time a wake-up
     * is due: a lead with rails and its rails probe silent rails
     * (btl_ofi_rdma.c); NULL elsewhere */
    void (*on_stall)(struct mca_btl_ofi_module_t *module, int64_t now);
    size_t stripe_min; /**< puts and gets from this size are split across rails; 0: never */
    /** what the layer above (ob1, through the bml) wants told of a peer
     * lost for good; NULL until it registers */
    mca_btl_base_module_error_cb_fn_t error_cb;
    char *device_name;  /**< the domain's name, for messages */
    void *ep_name;      /**< our endpoint's address, published by the modex */
    size_t ep_name_len; /**< bytes of ep_name */
    /** since when progress has found nothing while operations were
     * outstanding (btl_ofi_progress.c); application threads only, and a lost
     * update merely moves a wake-up */
    mca_btl_ofi_stall_watch_t stall;
} mca_btl_ofi_module_t;

/** The component.  Parameters are set at registration and checked at init. */
typedef struct mca_btl_ofi_component_t {
    mca_btl_base_component_3_0_0_t super; /**< what the MCA framework calls */
    int mode;                             /**< btl_ofi_mode (MCA_BTL_OFI_MODE_*) */
    int num_cq_read;                      /**< completions per fi_cq_read */
    int num_contexts_per_module;          /**< btl_ofi_num_contexts_per_module */
    bool disable_sep;                     /**< never use a scalable endpoint */
    int progress_threshold;               /**< outstanding ops before posting drives progress */
    int rd_num;                           /**< receive buffers per context */
    bool disable_inject;                  /**< never inject */
    bool emulate_atomics;                 /**< btl_ofi_emulate_atomics */
    bool origin_rma;                      /**< btl_ofi_origin_rma */
    int local_copy;                       /**< btl_ofi_local_copy: -1 auto, 0 off, 1 on */
    int local_atomics;                    /**< btl_ofi_local_atomics: -1 auto, 0 off, 1 on */
    bool disable_hmem;                    /**< do not ask for FI_HMEM */
    int max_nics;                         /**< at most this many modules */
    int rails;                            /**< btl_ofi_rails: lead's rails, 0: every module */
    int stripe_min;                       /**< btl_ofi_stripe_min */
    int mr_cache_max;                     /**< registrations a module keeps, cached ones included */
    int output;                           /**< our verbose stream (common/ofi's) */
    int progress_thread;                  /**< MCA_BTL_OFI_PROGRESS_THREAD_* chosen by the user */
    int progress_mode;                    /**< FI_PROGRESS_* asked of the provider */
    int progress_idle_us;                 /**< app idle time after which the thread steps in */
    int progress_wake_us; /**< wait without completions before waking the target's thread */
    /** progress_wake_us times the ranks each CPU of this node carries; set at init */
    int wake_after_us;
    int wake_floor_us; /**< no wake-up comes sooner (MCA_BTL_OFI_CROWDED_WAKE_US) */
    /** CPU pauses after a progress pass of an application thread that
     * found nothing: about 100 ns' worth where a module runs on shm, else 0
     * (btl_ofi_context.c) */
    int empty_pass_pauses;
    int progress_gap_us;      /**< least time between two looks of the thread */
    int progress_slice_us;    /**< time slice the thread asks of the scheduler; 0: default */
    int progress_nudge_us;    /**< a woken thread not run after this gets a second wake-up */
    int progress_rt_priority; /**< SCHED_RR priority of the thread; 0: the normal scheduler */
    int progress_sleep_us;    /**< the thread's period while nothing is aimed at us */
    int progress_linger_us;   /**< how long the thread stays awake after the last sign of traffic */
    /** our locks and atomics are real: Open MPI runs threads or we run
     * our progress thread; set at init */
    bool threaded;
    /** several application threads may call us (what Open MPI asked at
     * init): what only the application touches (one-sided completion
     * objects and counts, delivery order) needs atomics only then */
    bool app_threads;
    /** the domains are FI_THREAD_COMPLETION: posts take the context lock
     * that CQ reads take (the provider's own locks are off) */
    bool posts_locked;
    /** no progress thread and a provider that moves data only when called:
     * between the application's calls nothing does, so a send is done for
     * ob1 only when it left by inject or the provider completed it */
    bool sends_need_caller;
    size_t max_send_size; /**< two-sided buffer size */
    int sockets_buf_sz;   /**< sockets: FI_SOCKETS_MAX_BUF_SZ in force (0: none) */
    /** modules open; written by init and module finalize, which Open MPI
     * runs on one thread */
    int module_count;
    mca_btl_ofi_module_t *modules[MCA_BTL_OFI_MAX_MODULES_LIMIT]; /**< the open modules */
    char *provider_name; /**< chosen provider; set at init */
    bool two_sided;      /**< FI_MSG was granted; set at init */
    /** hands each thread its context index (atomic) */
    opal_atomic_int32_t next_thread_index;
} mca_btl_ofi_component_t;

OPAL_DECLSPEC extern mca_btl_ofi_component_t mca_btl_ofi_component;

#define MCA_BTL_OFI_VERBOSE(level, ...)                                                            \
    opal_output_verbose(level, mca_btl_ofi_component.output, "btl:ofi: " __VA_ARGS__)

/* Locks, atomics and free lists of ours are real exactly when someone else
 * may be in the component at the same time (mca_btl_ofi_component.threaded):
 * Open MPI's own choice, opal_using_threads(), is not enough once our
 * progress thread runs under MPI_THREAD_SINGLE. */
static inline bool mca_btl_ofi_threaded(void)
{
    return mca_btl_ofi_component.threaded;
}

static inline void mca_btl_ofi_lock(opal_mutex_t *lock)
{
    if (mca_btl_ofi_threaded()) {
        opal_mutex_lock(lock);
    }
}

static inline void mca_btl_ofi_unlock(opal_mutex_t *lock)
{
    if (mca_btl_ofi_threaded()) {
        opal_mutex_unlock(lock);
    }
}

/* From progress paths: an application thread may hold the lock around a
 * call that progresses, so a busy lock means "skip this round", never a
 * wait that could deadlock. */
static inline bool mca_btl_ofi_trylock(opal_mutex_t *lock)
{
    return !mca_btl_ofi_threaded() || 0 == opal_mutex_trylock(lock);
}

static inline bool mca_btl_ofi_ctx_trylock(mca_btl_ofi_ctx_lock_t *lock)
{
    int32_t unlocked = 0;

    return !mca_btl_ofi_threaded()
           || (0 == *lock && opal_atomic_compare_exchange_strong_acq_32(lock, &unlocked, 1));
}

/* A holder keeps the lock for one CQ batch, one post or one list
 * operation; one that takes longer was most likely preempted, and spinning
 * on would keep it off its core. */
#define MCA_BTL_OFI_CTX_LOCK_SPINS 256

static inline void mca_btl_ofi_ctx_lock_wait(mca_btl_ofi_ctx_lock_t *lock)
{
    for (int spins = 0; !mca_btl_ofi_ctx_trylock(lock); ++spins) {
        if (spins >= MCA_BTL_OFI_CTX_LOCK_SPINS) {
            (void) sched_yield();
            spins = 0;
        }
    }
}

static inline void mca_btl_ofi_ctx_lock(mca_btl_ofi_ctx_lock_t *lock)
{
    if (OPAL_UNLIKELY(!mca_btl_ofi_ctx_trylock(lock))) {
        mca_btl_ofi_ctx_lock_wait(lock);
    }
}

static inline void mca_btl_ofi_ctx_unlock(mca_btl_ofi_ctx_lock_t *lock)
{
    if (mca_btl_ofi_threaded()) {
        /* a release: the holder's reads and writes stay inside */
        __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
    }
}

/* A post enters the endpoint whose CQ another thread may be reading. */
static inline void mca_btl_ofi_post_begin(mca_btl_ofi_context_t *context)
{
    if (mca_btl_ofi_component.posts_locked) {
        mca_btl_ofi_ctx_lock(&context->lock);
    }
}

static inline void mca_btl_ofi_post_end(mca_btl_ofi_context_t *context)
{
    if (mca_btl_ofi_component.posts_locked) {
        mca_btl_ofi_ctx_unlock(&context->lock);
    }
}

/* The progress thread never runs a completion that calls the layer above,
 * so one-sided completion objects, outstanding counts and the order of
 * delivery are the application threads' alone. */
static inline bool mca_btl_ofi_app_threaded(void)
{
    return mca_btl_ofi_component.app_threads;
}

static inline opal_free_list_item_t *mca_btl_ofi_list_get(opal_free_list_t *list)
{
    return mca_btl_ofi_threaded() ? opal_free_list_get_mt(list) : opal_free_list_get_st(list);
}

static inline void mca_btl_ofi_list_return(opal_free_list_t *list, opal_free_list_item_t *item)
{
    if (mca_btl_ofi_threaded()) {
        opal_free_list_return_mt(list, item);
    } else {
        opal_free_list_return_st(list, item);
    }
}

/*
 * Lock assertions.  A debug build of Open MPI, or a build with
 * MCA_BTL_OFI_CHECK_LOCKS (the sanitizer lane's), checks that a lock is
 * held where a function needs it: a trylock that succeeds means nobody
 * held it.  Without threads our locks are never taken.
 */
#if OPAL_ENABLE_DEBUG || defined(MCA_BTL_OFI_CHECK_LOCKS)
static inline bool mca_btl_ofi_lock_held(opal_mutex_t *lock)
{
    if (!mca_btl_ofi_threaded()) {
        return true;
    }
    if (0 == opal_mutex_trylock(lock)) {
        opal_mutex_unlock(lock);
        return false;
    }
    return true;
}
#    define MCA_BTL_OFI_ASSERT_LOCKED(lock)     assert(mca_btl_ofi_lock_held(lock))
#    define MCA_BTL_OFI_ASSERT_CTX_LOCKED(lock) assert(!mca_btl_ofi_threaded() || 0 != *(lock))
#else
#    define MCA_BTL_OFI_ASSERT_LOCKED(lock)     ((void) 0)
#    define MCA_BTL_OFI_ASSERT_CTX_LOCKED(lock) ((void) 0)
#endif

/** A libfabric call failed while setting something up: tell the user. */
static inline void mca_btl_ofi_show_fi_error(const char *call, const char *device, int rc)
{
    opal_show_help("help-mpi-btl-ofi.txt", "libfabric call failed", true,
                   opal_process_info.nodename,
                   mca_btl_ofi_component.provider_name ? mca_btl_ofi_component.provider_name : "?",
                   device ? device : "?", call, rc, fi_strerror(rc < 0 ? -rc : rc));
}

/* ------------------------------------------------------------------ */
/* btl_ofi_module.c: registration, module open/finalize                */

/** Defaults of every module; its BTL parameters are registered on it. */
extern mca_btl_ofi_module_t mca_btl_ofi_module_template;

int mca_btl_ofi_module_open(mca_btl_ofi_module_t **module_out, struct fi_info *info, int index);
int mca_btl_ofi_module_finalize(mca_btl_base_module_t *btl);
/** Let @p lead (modules[0]) move one-sided bytes on the other modules' NICs. */
void mca_btl_ofi_rails_setup(mca_btl_ofi_module_t *lead);
/** Make @p shm (a module of the shm provider) carry @p lead's atomics to
 * same-host peers; false, and nothing changed, where it cannot. */
bool mca_btl_ofi_same_host_setup(mca_btl_ofi_module_t *lead, mca_btl_ofi_module_t *shm);

/* ------------------------------------------------------------------ */
/* btl_ofi_endpoint.c: modex, address vector, peers                    */

int mca_btl_ofi_av_open(mca_btl_ofi_module_t *module);
void mca_btl_ofi_av_close(mca_btl_ofi_module_t *module);
int mca_btl_ofi_name_init(mca_btl_ofi_module_t *module);
void mca_btl_ofi_name_fini(mca_btl_ofi_module_t *module);
/** Publish the provider and every module's endpoint name. */
int mca_btl_ofi_modex_send(void);
int mca_btl_ofi_peers_init(mca_btl_ofi_module_t *module);
void mca_btl_ofi_peers_fini(mca_btl_ofi_module_t *module);
int mca_btl_ofi_add_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                          mca_btl_base_endpoint_t **peers, opal_bitmap_t *reachable);
int mca_btl_ofi_del_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                          mca_btl_base_endpoint_t **peers);
/** The endpoint of a peer of our job by rank, or NULL. */
mca_btl_ofi_endpoint_t *mca_btl_ofi_endpoint_of_sender(mca_btl_ofi_module_t *module,
                                                       const mca_btl_ofi_am_hdr_t *hdr);
/** Wake the progress thread of every peer this module's operations wait
 * on; with @p lone_only, only where they wait on one peer.  Returns how
 * many were woken. */
int mca_btl_ofi_endpoints_wake_waited(mca_btl_ofi_module_t *module, bool lone_only);
/** Hear from the runtime when a job connected to ours ends (component
 * init), and stop (component close). */
void mca_btl_ofi_peer_jobs_watch(void);
void mca_btl_ofi_peer_jobs_unwatch(void);
/** Jobs that ended: how many the runtime announced (the PMIx thread
 * counts them) and how many progress has dealt with. */
extern volatile int32_t mca_btl_ofi_jobs_ended;
extern int32_t mca_btl_ofi_jobs_ended_seen;
/** Peers of other jobs that said they leave (whichever thread read it
 * counts them) and how many progress has dealt with. */
extern volatile int32_t mca_btl_ofi_peers_left;
extern int32_t mca_btl_ofi_peers_left_seen;
/** The receiver of a LEAVING message: its sender's endpoints are departed. */
void mca_btl_ofi_peer_leaving(mca_btl_ofi_module_t *module, const mca_btl_ofi_am_hdr_t *hdr,
                              size_t len);
/** Something for mca_btl_ofi_peers_gone() to do. */
static inline bool mca_btl_ofi_peers_news(void)
{
    return mca_btl_ofi_jobs_ended != mca_btl_ofi_jobs_ended_seen
           || mca_btl_ofi_peers_left != mca_btl_ofi_peers_left_seen;
}
/** Deal with the jobs that ended and the peers that left since the last
 * call: the processes of a job that ended abnormally are reported lost (an
 * application thread's progress, where the layer above may abort); those
 * of one that ended cleanly, and peers that said they leave, leave the
 * address vectors. */
void mca_btl_ofi_peers_gone(void);

/* ------------------------------------------------------------------ */
/* btl_ofi_context.c: contexts, CQs, progress                          */

/** Decide how many contexts the module gets and how its sends complete. */
void mca_btl_ofi_contexts_plan(mca_btl_ofi_module_t *module);
/** Make the planned contexts with their locks and CQs. */
int mca_btl_ofi_contexts_init(mca_btl_ofi_module_t *module);
void mca_btl_ofi_contexts_fini(mca_btl_ofi_module_t *module);
/** Open the endpoint and its TX/RX contexts on the CQs, and enable it. */
int mca_btl_ofi_contexts_open(mca_btl_ofi_module_t *module);
void mca_btl_ofi_contexts_close(mca_btl_ofi_module_t *module);
/** Hand every completion read to its owner; returns how many. */
int mca_btl_ofi_context_progress(mca_btl_ofi_context_t *context);
/** Drive the provider from a posting path, parking what is read. */
void mca_btl_ofi_context_poll(mca_btl_ofi_context_t *context);
/** Progress every context of every module: the component's progress. */
int mca_btl_ofi_progress(void);
/**
 * The progress thread's look (mca_btl_ofi_look_fn_t): drive every context
 * the application did not enter since the previous look.
 */
bool mca_btl_ofi_contexts_look(bool *busy, bool *sending);
/** Progress every context of one module; returns the completions handed out. */
int mca_btl_ofi_progress_module(mca_btl_ofi_module_t *module);
/** Progress every context of one module as the progress thread does:
 * nothing calls the layer above (what would is parked). */
void mca_btl_ofi_module_serve(mca_btl_ofi_module_t *module);
/**
 * Whether this pass may leave the lead's network CQ out: the lead awaits
 * nothing of its own and its same-host module does.
 */
bool mca_btl_ofi_network_pass_skipped(mca_btl_ofi_module_t *module);
/**
 * sockets: give the TCP sockets our provider connected to @p endpoint's
 * peer the receive buffer its listener gives the sockets it accepts; once
 * per peer, best effort.
 */
void mca_btl_ofi_sockets_widen(mca_btl_ofi_endpoint_t *endpoint);

/** After a post to @p endpoint succeeded: the provider has connected to it. */
static inline void mca_btl_ofi_sockets_posted(mca_btl_ofi_endpoint_t *endpoint)
{
    if (OPAL_UNLIKELY(endpoint->addr.widen_socket)) {
        mca_btl_ofi_sockets_widen(endpoint);
    }
}

/** The calling thread's index, assigned at its first use of a context. */
extern opal_thread_local int mca_btl_ofi_thread_index;

/** The context of the calling thread. */
static inline mca_btl_ofi_context_t *mca_btl_ofi_thread_context(mca_btl_ofi_module_t *module)
{
    if (1 == module->num_contexts) {
        return module->contexts;
    }
    if (OPAL_UNLIKELY(mca_btl_ofi_thread_index < 0)) {
        mca_btl_ofi_thread_index =
            opal_atomic_fetch_add_32(&mca_btl_ofi_component.next_thread_index, 1);
    }
    return module->contexts + (mca_btl_ofi_thread_index % module->num_contexts);
}

/* ------------------------------------------------------------------ */
/* btl_ofi_rdma.c: put, get, flush, the posting path                   */

int mca_btl_ofi_rdma_context_init(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context);
void mca_btl_ofi_rdma_context_fini(mca_btl_ofi_context_t *context);

int mca_btl_ofi_put(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                    void *local_address, uint64_t remote_address,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags,
                    int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata);
int mca_btl_ofi_get(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                    void *local_address, uint64_t remote_address,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags,
                    int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata);
int mca_btl_ofi_flush(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint);

/** What a post function does; one of them per libfabric call. */
typedef ssize_t (*mca_btl_ofi_post_fn_t)(mca_btl_ofi_comp_t *comp, void *arg);

/** A completion object of the calling thread's context, or NULL. */
mca_btl_ofi_comp_t *mca_btl_ofi_comp_get(mca_btl_ofi_module_t *module,
                                         mca_btl_ofi_endpoint_t *endpoint, void *local_address,
                                         mca_btl_base_registration_handle_t *local_handle,
                                         mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                         void *cbdata);
/** The same, for an operation of @p module (a lead) to a same-host peer
 * posted on its same-host module: the completion reports @p module and
 * @p endpoint to @p cbfunc. */
mca_btl_ofi_comp_t *mca_btl_ofi_comp_get_same_host(mca_btl_ofi_module_t *module,
                                                   mca_btl_ofi_endpoint_t *endpoint,
                                                   void *local_address,
                                                   mca_btl_base_rdma_completion_fn_t cbfunc,
                                                   void *cbcontext, void *cbdata);
/** Post through @p post with bounded EAGAIN retries; on failure @p comp is returned. */
int mca_btl_ofi_post(mca_btl_ofi_comp_t *comp, mca_btl_ofi_post_fn_t post, void *arg);
/** The same for a @p post that sends a message (frag.c's send path locks
 * the context itself). */
int mca_btl_ofi_post_as_message(mca_btl_ofi_comp_t *comp, mca_btl_ofi_post_fn_t post, void *arg);
/** Before posting an operation on rail @p r of a lead module with rails:
 * counts it in flight to the peer, with where it goes (@p raddr, @p rkey,
 * @p size) for a probe. */
void mca_btl_ofi_rail_watch(mca_btl_ofi_comp_t *comp, int r, uint64_t raddr, uint64_t rkey,
                            size_t size);
/** Such an operation completed, or its post failed. */
void mca_btl_ofi_rail_unwatch(mca_btl_ofi_endpoint_t *endpoint, int r);
/** From the stall watch of a lead with rails or of one of its rails: a
 * peer whose operations on a rail have waited long without news gets a
 * probe read there. */
void mca_btl_ofi_probe_silent_rails(mca_btl_ofi_module_t *module, int64_t now);
/** An atomic's post on a lead module with rails gave @p rc
 * (OPAL_ERR_UNREACH before posting where rail 0 is out of service for
 * the peer): what osc/rdma gets (btl_ofi_rdma.c). */
int mca_btl_ofi_atomic_rail_check(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                                  int rc);

/* ------------------------------------------------------------------ */
/* btl_ofi_atomics.c: probing, posting, target-applied atomics         */

/** Find out which atomics the provider does, or apply them at the target. */
int mca_btl_ofi_atomics_setup(mca_btl_ofi_module_t *module);
void mca_btl_ofi_atomics_teardown(mca_btl_ofi_module_t *module);
void mca_btl_ofi_regions_add(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg);
void mca_btl_ofi_regions_remove(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg);

int mca_btl_ofi_aop(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                    uint64_t remote_address, mca_btl_base_registration_handle_t *remote_handle,
                    mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_ofi_afop(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                     void *local_address, uint64_t remote_address,
                     mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, mca_btl_base_atomic_op_t op,
                     uint64_t operand, int flags, int order,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_ofi_acswap(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                       void *local_address, uint64_t remote_address,
                       mca_btl_base_registration_handle_t *local_handle,
                       mca_btl_base_registration_handle_t *remote_handle, uint64_t compare,
                       uint64_t value, int flags, int order,
                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);

/* ------------------------------------------------------------------ */
/* btl_ofi_frag.c: two-sided fragments, the active-message path        */

/**
 * Receives one kind of message: @p hdr is the wire header, @p len the
 * bytes after it.  Runs from progress without the context lock.
 */
typedef void (*mca_btl_ofi_msg_handler_fn_t)(mca_btl_ofi_module_t *module,
                                             const mca_btl_ofi_am_hdr_t *hdr, size_t len);

/** The receiver of one message kind. */
typedef struct mca_btl_ofi_msg_handler_t {
    mca_btl_ofi_msg_handler_fn_t fn; /**< NULL: the kind is dropped */
    bool calls_up;                   /**< calls the layer above: never from the progress thread */
} mca_btl_ofi_msg_handler_t;

/**
 * Receivers of each message kind.  frag.c fills MCA_BTL_OFI_KIND_AM (the
 * layer above's active messages); btl_ofi_atomics.c fills its own kinds.
 */
extern mca_btl_ofi_msg_handler_t mca_btl_ofi_msg_handlers[MCA_BTL_OFI_KIND_MAX];

/** Fragment lists and receive buffers of one context (two-sided modules). */
int mca_btl_ofi_frag_context_init(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context);
void mca_btl_ofi_frag_context_fini(mca_btl_ofi_context_t *context);
/** Post context 0's receive buffers, once the endpoint is enabled. */
int mca_btl_ofi_frag_post_receives(mca_btl_ofi_module_t *module);
/** Forget fragments waiting in the context lists (the endpoint is closed). */
void mca_btl_ofi_frag_drop_waiting(mca_btl_ofi_module_t *module);
/** Fill the module's send functions. */
void mca_btl_ofi_frag_setup_module(mca_btl_ofi_module_t *module);
/** A fragment for a message of our own of @p size payload bytes, or NULL. */
mca_btl_ofi_frag_t *mca_btl_ofi_frag_alloc_internal(mca_btl_ofi_module_t *module,
                                                    mca_btl_ofi_endpoint_t *endpoint, size_t size);
/** Send a message of our own (injected unless its flags ask for the
 * callback); the fragment is ours again whatever happens. */
int mca_btl_ofi_frag_send_internal(mca_btl_ofi_module_t *module, mca_btl_ofi_frag_t *frag,
                                   mca_btl_ofi_msg_kind_t kind);

/* ------------------------------------------------------------------ */
/* Inline helpers for the hot paths.                                   */

/** Add @p value to @p where, atomically when @p shared. */
static inline int64_t mca_btl_ofi_add_to(opal_atomic_int64_t *where, int64_t value, bool shared)
{
    if (shared) {
        return opal_atomic_add_fetch_64(where, value);
    }
    *where += value;
    return *where;
}

static inline int64_t mca_btl_ofi_add64(opal_atomic_int64_t *where, int64_t value)
{
    return mca_btl_ofi_add_to(where, value, mca_btl_ofi_threaded());
}

/** mca_btl_ofi_add64 for what only application threads touch. */
static inline void mca_btl_ofi_app_add64(opal_atomic_int64_t *where, int64_t value)
{
    (void) mca_btl_ofi_add_to(where, value, mca_btl_ofi_app_threaded());
}

/** An application thread is in @p context: its progress thread stays out
 * until the application has left it alone for a whole look period.  Only
 * a change matters, so an increment lost to a race is harmless. */
static inline void mca_btl_ofi_context_entered(mca_btl_ofi_context_t *context)
{
    context->app_progress = context->app_progress + 1;
}

/* Operations of ours that still need progress: one-sided ones in flight
 * and sends the provider refused for now (a connection that tcp;ofi_rxm
 * is still setting up refuses them for tens of milliseconds). */
static inline bool mca_btl_ofi_context_owes(const mca_btl_ofi_context_t *context)
{
    return context->outstanding > 0 || context->pending_count > 0;
}

/* Sends of ours not yet complete: in flight, or queued because the
 * provider refused them for now. */
static inline bool mca_btl_ofi_context_sending(const mca_btl_ofi_context_t *context)
{
    return context->sends_in_flight > 0 || context->pending_count > 0;
}

static inline void mca_btl_ofi_count(mca_btl_ofi_module_t *module, mca_btl_ofi_counter_t which,
                                     uint64_t value)
{
    (void) mca_btl_ofi_add_to((opal_atomic_int64_t *) &module->counters[which], (int64_t) value,
                              mca_btl_ofi_threaded());
}

/** mca_btl_ofi_count for counters only application threads touch. */
static inline void mca_btl_ofi_app_count(mca_btl_ofi_module_t *module, mca_btl_ofi_counter_t which,
                                         uint64_t value)
{
    (void) mca_btl_ofi_add_to((opal_atomic_int64_t *) &module->counters[which], (int64_t) value,
                              mca_btl_ofi_app_threaded());
}

/** The monotonic clock in ns, for the wake-up paths (never per operation
 * unless a peer needed a wake-up). */
static inline int64_t mca_btl_ofi_now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000000000 + t.tv_nsec;
}

/** Whether @p module's provider is shm (same-node peers only). */
static inline bool mca_btl_ofi_on_shm(const mca_btl_ofi_module_t *module)
{
    return 0 == strcmp(module->info->fabric_attr->prov_name, "shm");
}

/** One spin-wait hint to the CPU: x86's pause, aarch64's yield. */
static inline void mca_btl_ofi_cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/** Spaces an application thread's progress passes that found nothing
 * (btl_ofi_context.c says why); counted on @p module. */
static inline void mca_btl_ofi_empty_pass_pause(mca_btl_ofi_module_t *module)
{
    if (0 == mca_btl_ofi_component.empty_pass_pauses) {
        return;
    }
    mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_EMPTY_PAUSE, 1);
    for (int i = 0; i < mca_btl_ofi_component.empty_pass_pauses; ++i) {
        mca_btl_ofi_cpu_pause();
    }
}

static inline int mca_btl_ofi_check_endpoint(const mca_btl_ofi_endpoint_t *endpoint)
{
    return (NULL != endpoint && endpoint->addr.reachable) ? OPAL_SUCCESS : OPAL_ERR_UNREACH;
}

/** Bytes of one element of a datatype our atomics take. */
static inline size_t mca_btl_ofi_datatype_size(enum fi_datatype dt)
{
    return (FI_INT32 == dt || FI_FLOAT == dt) ? 4 : 8;
}

/** Address a peer uses for an rkey's region. */
static inline uint64_t mca_btl_ofi_remote_addr(const mca_btl_base_registration_handle_t *handle,
                                               uint64_t address)
{
    return address - handle->base_addr;
}

static inline void *mca_btl_ofi_local_desc(mca_btl_base_registration_handle_t *handle)
{
    if (NULL == handle) {
        return NULL;
    }
    return ((mca_btl_ofi_reg_t *) ((char *) handle - offsetof(mca_btl_ofi_reg_t, handle)))->desc;
}

END_C_DECLS

#endif /* MCA_BTL_OFI_H */
