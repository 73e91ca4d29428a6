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
 * contexts (a TX/RX pair and a CQ), picked per thread by a stable index.
 * One-sided operations map to fi_write/fi_read/fi_atomic; two-sided traffic
 * uses fi_send into pre-posted receive buffers.
 */

#ifndef MCA_BTL_OFI_H
#define MCA_BTL_OFI_H

#include "opal_config.h"

#include <stdint.h>
#include <string.h>

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
#include "opal/mca/threads/mutex.h"
#include "opal/sys/atomic.h"
#include "opal/util/output.h"

#include "btl_ofi_validate.h"

BEGIN_C_DECLS

#define BTL_OFI_VERSION_MAJOR   1
#define BTL_OFI_VERSION_MINOR   0
#define BTL_OFI_VERSION_RELEASE 0

#define MCA_BTL_OFI_ATOMIC_TABLE (FI_ATOMIC_OP_LAST)

enum {
    MCA_BTL_OFI_MODE_ONE_SIDED = 0,
    MCA_BTL_OFI_MODE_TWO_SIDED = 1,
    MCA_BTL_OFI_MODE_FULL_SUPPORT = 2,
    MCA_BTL_OFI_MODE_AUTO = 3,
};

/** What a completion entry stands for. */
typedef enum {
    MCA_BTL_OFI_OP_PUT,
    MCA_BTL_OFI_OP_GET,
    MCA_BTL_OFI_OP_AOP,
    MCA_BTL_OFI_OP_AFOP,
    MCA_BTL_OFI_OP_CSWAP,
    MCA_BTL_OFI_OP_SEND,
    MCA_BTL_OFI_OP_RECV,
} mca_btl_ofi_op_t;

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
    MCA_BTL_OFI_CNT_MAX,
} mca_btl_ofi_counter_t;

struct mca_btl_ofi_module_t;
struct mca_btl_ofi_context_t;

/**
 * The handle that travels to peers: only what a peer needs to address the
 * memory.  The local-only descriptor lives in mca_btl_ofi_reg_t.
 */
struct mca_btl_base_registration_handle_t {
    uint64_t rkey;      /**< remote key of the region */
    uint64_t base_addr; /**< base used for offset addressing (0 with FI_MR_VIRT_ADDR) */
};

/** A registration known to the rcache. */
typedef struct mca_btl_ofi_reg_t {
    mca_rcache_base_registration_t base;
    struct fid_mr *mr;                         /**< libfabric region */
    void *desc;                                /**< local descriptor for FI_MR_LOCAL */
    mca_btl_base_registration_handle_t handle; /**< what peers get */
    struct mca_btl_ofi_module_t *module;       /**< owner */
} mca_btl_ofi_reg_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_reg_t);

/** A peer as seen by one module. */
struct mca_btl_base_endpoint_t {
    opal_list_item_t super;
    opal_proc_t *proc;                   /**< peer process */
    fi_addr_t addr;                      /**< AV address of the peer's endpoint */
    struct mca_btl_ofi_module_t *module; /**< owning module */
    opal_atomic_int64_t outstanding;     /**< RMA operations in flight to this peer */
    bool reachable;                      /**< false once the peer is known to be gone */
};
typedef struct mca_btl_base_endpoint_t mca_btl_base_endpoint_t;
typedef mca_btl_base_endpoint_t mca_btl_ofi_endpoint_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_endpoint_t);

/** Leads every object whose address libfabric hands back as op_context. */
typedef struct mca_btl_ofi_ctx_hdr_t {
    struct fi_context2 fi_ctx; /**< libfabric's per-operation space; must come first */
    mca_btl_ofi_op_t type;     /**< tells a completion from a fragment */
} mca_btl_ofi_ctx_hdr_t;

/**
 * One posted operation.  Comes from the context's free list; its payload
 * buffer (item.ptr, registered when the provider wants FI_MR_LOCAL) holds
 * atomic operands and small-send data the provider may read after return.
 */
typedef struct mca_btl_ofi_comp_t {
    opal_free_list_item_t super;
    mca_btl_ofi_ctx_hdr_t ctx;
    struct mca_btl_ofi_module_t *module;
    struct mca_btl_ofi_context_t *context; /**< where it was posted */
    mca_btl_ofi_endpoint_t *endpoint;
    void *local_address;
    mca_btl_base_registration_handle_t *local_handle;
    mca_btl_base_rdma_completion_fn_t cbfunc;
    void *cbcontext;
    void *cbdata;
    uint64_t *operands; /**< [0] operand, [1] compare, [2] result */
    void *operand_desc; /**< descriptor of operands (FI_MR_LOCAL) */
    size_t result_size; /**< bytes of [2] copied to local_address */
} mca_btl_ofi_comp_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_comp_t);

/** Header in front of every two-sided message. */
typedef struct mca_btl_ofi_am_hdr_t {
    uint32_t src_vpid; /**< sender's rank in its job, to find the endpoint */
    uint8_t tag;       /**< active-message tag */
    uint8_t kind;      /**< mca_btl_ofi_msg_kind_t */
    uint8_t pad[2];
} mca_btl_ofi_am_hdr_t;

/** What a two-sided message carries. */
typedef enum {
    MCA_BTL_OFI_KIND_AM = 0,             /**< an active message for the layer above */
    MCA_BTL_OFI_KIND_ATOMIC_REQUEST = 1, /**< an emulated atomic to apply */
    MCA_BTL_OFI_KIND_ATOMIC_REPLY = 2,   /**< its answer */
} mca_btl_ofi_msg_kind_t;

/** A two-sided fragment: a descriptor plus a buffer of max_send_size. */
typedef struct mca_btl_ofi_frag_t {
    mca_btl_base_descriptor_t base;
    mca_btl_base_segment_t segment; /**< points after the header */
    mca_btl_ofi_ctx_hdr_t ctx;      /**< type is SEND or RECV */
    struct mca_btl_ofi_module_t *module;
    struct mca_btl_ofi_context_t *context;
    mca_btl_ofi_endpoint_t *endpoint;
    mca_btl_ofi_am_hdr_t *hdr;                /**< start of the wire buffer */
    void *desc;                               /**< local descriptor of the buffer */
    struct mca_btl_ofi_frag_list_t *list;     /**< list it returns to */
    struct mca_btl_ofi_context_t *tx_context; /**< context it was sent on */
    int post_errors; /**< hard post failures while it waited in pending_sends */
} mca_btl_ofi_frag_t;
OBJ_CLASS_DECLARATION(mca_btl_ofi_frag_t);

/** A completion read from the CQ but not yet handed to its owner. */
typedef struct mca_btl_ofi_event_t {
    void *op_context; /**< the operation's mca_btl_ofi_ctx_hdr_t */
    size_t len;       /**< bytes received (receives only) */
    int status;       /**< OPAL_SUCCESS or the error the provider reported */
} mca_btl_ofi_event_t;

#define MCA_BTL_OFI_DEFERRED_MAX 512 /**< completions parked by posting paths */

/** A free list of fragments and what a fragment it grows needs to know. */
typedef struct mca_btl_ofi_frag_list_t {
    opal_free_list_t list;
    struct mca_btl_ofi_module_t *module;
    struct mca_btl_ofi_context_t *context;
    mca_btl_ofi_op_t type; /**< SEND or RECV */
    size_t payload;        /**< bytes after the header */
} mca_btl_ofi_frag_list_t;

/** Payload of a small fragment: every ob1 control message fits. */
#define MCA_BTL_OFI_SMALL_FRAG_PAYLOAD 256

/** A communication context: one TX/RX pair and its CQ. */
typedef struct mca_btl_ofi_context_t {
    struct fid_ep *tx;      /**< TX context or the plain endpoint */
    struct fid_ep *rx;      /**< RX context or the plain endpoint */
    struct fid_cq *cq;      /**< completions of both */
    opal_mutex_t lock;      /**< guards tx, rx and cq */
    opal_free_list_t comps; /**< RMA and atomic completions */
    /** small sends; unbounded, because ob1 5.0.7 corrupts a control message
     * (ACK) whose allocation failed when it retries it */
    mca_btl_ofi_frag_list_t small_frags;
    mca_btl_ofi_frag_list_t send_frags; /**< sends up to max_send_size */
    mca_btl_ofi_frag_list_t recv_frags; /**< pre-posted receive buffers */
    opal_atomic_int64_t outstanding;    /**< operations posted, not completed */
    /** 1 while one thread reads this CQ and hands its completions out */
    opal_atomic_int32_t delivering;
    /** completions read by posting paths, whose callbacks wait for the next
     * progress call; guarded by lock */
    mca_btl_ofi_event_t deferred[MCA_BTL_OFI_DEFERRED_MAX];
    int deferred_head;         /**< oldest parked completion */
    int deferred_count;        /**< parked completions */
    opal_list_t pending_sends; /**< fragments the provider refused for now; guarded by lock */
    int pending_count;         /**< length of pending_sends */
    opal_atomic_int64_t sends_in_flight; /**< posted sends whose completion is due */
    int64_t send_window;                 /**< sends_in_flight at which sends queue */
    /** receive buffers the provider refused to take back for now (sockets
     * counts buffered unexpected messages against its receive queue);
     * posted again by progress, guarded by lock */
    opal_list_t unposted_recvs;
    int unposted_count;
    int index;        /**< position in the module */
    bool lists_ready; /**< free lists constructed */
} mca_btl_ofi_context_t;

/** One module per NIC. */
typedef struct mca_btl_ofi_module_t {
    mca_btl_base_module_t super;
    struct fi_info *info; /**< our copy of the chosen fi_info */
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_ep *ep; /**< scalable or plain endpoint */
    bool is_scalable_ep;
    int rx_ctx_bits;      /**< AV bits naming a peer's RX context */
    bool virt_addr;       /**< FI_MR_VIRT_ADDR */
    bool prov_key;        /**< FI_MR_PROV_KEY */
    bool mr_endpoint;     /**< FI_MR_ENDPOINT */
    bool mr_local;        /**< FI_MR_LOCAL */
    bool bypass_cache;    /**< provider caches registrations itself */
    bool two_sided;       /**< FI_MSG in use, receives posted */
    bool use_inject;      /**< FI_INJECT for small puts */
    bool send_inject;     /**< fi_inject for small two-sided messages */
    bool emulate_atomics; /**< atomics are applied by the target's progress */
    size_t inject_size;
    int num_contexts;
    mca_btl_ofi_context_t *contexts;
    opal_atomic_int32_t next_context; /**< round-robin seed for new threads */
    int module_index;                 /**< position in the component's array */
    opal_mutex_t lock;                /**< guards endpoints and peers */
    uint32_t
        atomic_fetch_ok[MCA_BTL_OFI_ATOMIC_TABLE];     /**< per op: datatypes confirmed, fetching */
    uint32_t atomic_post_ok[MCA_BTL_OFI_ATOMIC_TABLE]; /**< per op: datatypes confirmed, no fetch */
    opal_list_t endpoints;                             /**< every endpoint created */
    opal_hash_table_t peers;                           /**< vpid -> endpoint */
    opal_hash_table_t regions; /**< rkey -> mca_btl_ofi_reg_t, our live registrations */
    mca_rcache_base_module_t *rcache;
    opal_atomic_uint64_t counters[MCA_BTL_OFI_CNT_MAX];
    opal_atomic_uint64_t next_key; /**< requested keys without FI_MR_PROV_KEY */
    char *device_name;
    void *ep_name;
    size_t ep_name_len;
} mca_btl_ofi_module_t;

/** The component. */
typedef struct mca_btl_ofi_component_t {
    mca_btl_base_component_3_0_0_t super;
    int mode;            /**< btl_ofi_mode */
    int num_cq_read;     /**< completions per fi_cq_read */
    char *progress_mode; /**< unspec, auto or manual */
    int num_contexts_per_module;
    bool disable_sep;
    int progress_threshold; /**< outstanding ops before we progress */
    int rd_num;             /**< receive buffers per context */
    bool disable_inject;
    bool emulate_atomics; /**< btl_ofi_emulate_atomics */
    bool disable_hmem;
    int max_nics;     /**< at most this many modules */
    int mr_cache_max; /**< registrations a module keeps, cached ones included */
    int output;       /**< our verbose stream */
    int verbose;
    size_t max_send_size; /**< two-sided buffer size */
    int module_count;
    mca_btl_ofi_module_t *modules[MCA_BTL_OFI_MAX_MODULES_LIMIT];
    char *provider_name; /**< chosen provider */
    bool two_sided;
    opal_atomic_int32_t next_thread_index;
} mca_btl_ofi_component_t;

OPAL_DECLSPEC extern mca_btl_ofi_component_t mca_btl_ofi_component;
extern mca_btl_ofi_module_t mca_btl_ofi_module_template;

#define MCA_BTL_OFI_VERBOSE(level, ...)                                                            \
    opal_output_verbose(level, mca_btl_ofi_component.output, "btl:ofi: " __VA_ARGS__)

/* ------------------------------------------------------------------ */
/* Functions shared between the files.                                 */

int mca_btl_ofi_module_open(mca_btl_ofi_module_t **module_out, struct fi_info *info, int index);
int mca_btl_ofi_module_finalize(mca_btl_base_module_t *btl);
int mca_btl_ofi_context_progress(mca_btl_ofi_context_t *context);
void mca_btl_ofi_context_poll(mca_btl_ofi_context_t *context);
void mca_btl_ofi_show_fi_error(const char *call, const char *device, int rc);
void mca_btl_ofi_register_pvars(void);

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
int mca_btl_ofi_flush(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint);

/* two-sided */
int mca_btl_ofi_am_context_init(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context);
void mca_btl_ofi_am_context_fini(mca_btl_ofi_context_t *context);
void mca_btl_ofi_am_complete(mca_btl_ofi_frag_t *frag, size_t len, int status);
void mca_btl_ofi_rdma_complete(mca_btl_ofi_comp_t *comp, int status);
void mca_btl_ofi_probe_module_atomics(mca_btl_ofi_module_t *module);
void mca_btl_ofi_am_setup_module(mca_btl_ofi_module_t *module);
int mca_btl_ofi_am_drain_pending(mca_btl_ofi_context_t *context, mca_btl_ofi_frag_t **failed,
                                 int max_failed);
void mca_btl_ofi_am_fail(mca_btl_ofi_frag_t *frag);
void mca_btl_ofi_am_repost_receives(mca_btl_ofi_context_t *context);
mca_btl_ofi_frag_t *mca_btl_ofi_am_frag_alloc(mca_btl_ofi_module_t *module,
                                              mca_btl_ofi_endpoint_t *endpoint, size_t size);
int mca_btl_ofi_am_send_internal(mca_btl_ofi_module_t *module, mca_btl_ofi_frag_t *frag,
                                 mca_btl_ofi_msg_kind_t kind);

/* atomics applied by the target (providers without fi_atomic) */
void mca_btl_ofi_regions_add(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg);
void mca_btl_ofi_regions_remove(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg);
void mca_btl_ofi_emu_enable(mca_btl_ofi_module_t *module);
int mca_btl_ofi_emu_post(mca_btl_ofi_comp_t *comp, enum fi_op op, enum fi_datatype dt,
                         uint64_t remote_address, uint64_t rkey);
void mca_btl_ofi_emu_serve(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                           const void *payload, size_t len);
void mca_btl_ofi_emu_answered(const void *payload, size_t len);

/* ------------------------------------------------------------------ */
/* Inline helpers for the hot paths.                                   */

static inline void mca_btl_ofi_count(mca_btl_ofi_module_t *module, mca_btl_ofi_counter_t which,
                                     uint64_t value)
{
    if (opal_using_threads()) {
        (void) opal_atomic_fetch_add_64((opal_atomic_int64_t *) &module->counters[which],
                                        (int64_t) value);
    } else {
        module->counters[which] += value;
    }
}

static inline int64_t mca_btl_ofi_add64(opal_atomic_int64_t *where, int64_t value)
{
    if (opal_using_threads()) {
        return opal_atomic_add_fetch_64(where, value);
    }
    *where += value;
    return *where;
}

/** The context of the calling thread: an index assigned once per thread. */
static inline mca_btl_ofi_context_t *mca_btl_ofi_thread_context(mca_btl_ofi_module_t *module)
{
    static opal_thread_local int thread_index = -1;

    if (1 == module->num_contexts) {
        return module->contexts;
    }
    if (OPAL_UNLIKELY(thread_index < 0)) {
        thread_index = opal_atomic_fetch_add_32(&mca_btl_ofi_component.next_thread_index, 1);
    }
    return module->contexts + (thread_index % module->num_contexts);
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
