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
 * Everything that differs between the Open MPI series this component is
 * built against, 5.0.x and 4.1.x (Debian 12 ships 4.1.4), decided once here
 * by the OPAL_MAJOR_VERSION of the opal_config.h in use.  No other file of
 * the component tests the version: they call what this header defines.
 *
 * What differs:
 * - where the mutex and PMIx (modex) headers live, and the name of the
 *   modex scope constant;
 * - the BTL framework version the component structure declares, and the
 *   remote-completion flag (5.0 only);
 * - the receive callback of the layer above: 5.0 hands it one receive
 *   descriptor (endpoint, segments, tag, cbdata), 4.1 the tag, a full
 *   descriptor and cbdata as separate arguments;
 * - common/ofi's choice of the NIC nearest to the process: 5.0 reads
 *   opal_process_info itself, 4.1 takes its fields one by one;
 * - the size of the job: a field of opal_process_info in 5.0, a PMIx key
 *   in 4.1;
 * - 4.1 has no opal_atomic_int32_t/_int64_t/_uint64_t types;
 * - where libfabric lives: in libopen-pal in 5.0; in 4.1 only in the DSOs
 *   that use it, so that closing ours could unmap it (see
 *   mca_btl_ofi_compat_keep_loaded).
 */

#ifndef MCA_BTL_OFI_COMPAT_H
#define MCA_BTL_OFI_COMPAT_H

#include "opal_config.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <rdma/fabric.h>

#include "opal/mca/btl/btl.h"
#include "opal/mca/common/ofi/common_ofi.h"
#include "opal/util/proc.h"

#if OPAL_MAJOR_VERSION >= 5

#    include "opal/mca/pmix/pmix-internal.h"
#    include "opal/mca/threads/mutex.h"

/** BTL framework version of the component structure. */
#    define MCA_BTL_OFI_BTL_VERSION MCA_BTL_BASE_VERSION_3_3_0

/** The module's field behind btl_<name>_accelerator_max_send_size. */
#    define MCA_BTL_OFI_ACCELERATOR_MAX_SEND_SIZE(btl) (&(btl)->btl_accelerator_max_send_size)

/** Modex scope our endpoint names are published with. */
#    define MCA_BTL_OFI_MODEX_GLOBAL PMIX_GLOBAL

/** The runtime (PRRTE) announces each job's end through PMIx. */
#    define MCA_BTL_OFI_HAVE_JOB_END_EVENTS 1

/** The BTL flag that says a put's completion means the data is at the
 * target (ours are delivery-complete). */
#    define MCA_BTL_OFI_FLAGS_REMOTE_COMPLETION MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION

/**
 * Hand one received message to the callback the layer above registered
 * for its tag.  SEGMENT holds the payload; ENDPOINT is the sender's (may be
 * NULL when unknown).
 */
static inline void mca_btl_ofi_compat_deliver(mca_btl_base_module_t *btl,
                                              const mca_btl_active_message_callback_t *reg,
                                              mca_btl_base_tag_t tag,
                                              struct mca_btl_base_endpoint_t *endpoint,
                                              mca_btl_base_segment_t *segment)
{
    mca_btl_base_receive_descriptor_t desc = {
        .endpoint = endpoint,
        .des_segments = segment,
        .des_segment_count = 1,
        .tag = tag,
        .cbdata = reg->cbdata,
    };

    reg->cbfunc(btl, &desc);
}

/** common/ofi's pick of the fi_info nearest to this process in LIST. */
static inline struct fi_info *mca_btl_ofi_compat_nearest(struct fi_info *list)
{
    return opal_common_ofi_select_provider(list, &opal_process_info);
}

/** Processes in the job, 0 when not known. */
static inline uint32_t mca_btl_ofi_compat_job_size(void)
{
    return opal_process_info.num_procs > 0 ? (uint32_t) opal_process_info.num_procs : 0;
}

/** The process that spawned this one (PRRTE's PMIX_PARENT_ID), if any. */
static inline bool mca_btl_ofi_compat_parent(opal_process_name_t *parent)
{
    pmix_value_t *val = NULL;
    pmix_info_t optional;
    bool found = false;
    int rc;

    PMIX_INFO_LOAD(&optional, PMIX_OPTIONAL, NULL, PMIX_BOOL);
    if (PMIX_SUCCESS == PMIx_Get(&opal_process_info.myprocid, PMIX_PARENT_ID, &optional, 1, &val)
        && NULL != val && PMIX_PROC == val->type && NULL != val->data.proc) {
        OPAL_PMIX_CONVERT_PROCT(rc, parent, val->data.proc);
        found = OPAL_SUCCESS == rc;
    }
    if (NULL != val) {
        PMIX_VALUE_RELEASE(val);
    }
    PMIX_INFO_DESTRUCT(&optional);
    return found;
}

/**
 * Keep the object holding SYMBOL mapped until the process ends.  Nothing to
 * do in 5.0: libopen-pal links libfabric, so it stays whatever happens to
 * this DSO.
 */
static inline void mca_btl_ofi_compat_keep_loaded(const void *symbol)
{
    (void) symbol;
}

#elif OPAL_MAJOR_VERSION == 4 && OPAL_MINOR_VERSION >= 1

#    include "opal/mca/pmix/pmix.h"
#    include "opal/threads/mutex.h"

#    define MCA_BTL_OFI_BTL_VERSION                    MCA_BTL_BASE_VERSION_3_1_0

/** 4.1 has no such parameter: the row only documents 5.0's. */
#    define MCA_BTL_OFI_ACCELERATOR_MAX_SEND_SIZE(btl) NULL

#    define MCA_BTL_OFI_MODEX_GLOBAL            OPAL_PMIX_GLOBAL
#    define MCA_BTL_OFI_HAVE_JOB_END_EVENTS     0

/* 4.1's BTL interface has no such flag: osc/rdma takes every completion
 * as remote, which our delivery-complete posts make true. */
#    define MCA_BTL_OFI_FLAGS_REMOTE_COMPLETION 0

/* 4.1 has no opal_atomic_* integer types: its atomics take volatile
 * integers, which is what 5.0's types are without C11 atomics. */
typedef volatile int32_t opal_atomic_int32_t;
typedef volatile int64_t opal_atomic_int64_t;
typedef volatile uint64_t opal_atomic_uint64_t;

static inline void mca_btl_ofi_compat_deliver(mca_btl_base_module_t *btl,
                                              const mca_btl_active_message_callback_t *reg,
                                              mca_btl_base_tag_t tag,
                                              struct mca_btl_base_endpoint_t *endpoint,
                                              mca_btl_base_segment_t *segment)
{
    mca_btl_base_descriptor_t desc;

    (void) endpoint; /* 4.1's callbacks find the sender in the message */
    memset(&desc, 0, sizeof(desc));
    desc.des_segments = segment;
    desc.des_segment_count = 1;
    reg->cbfunc(btl, tag, &desc, reg->cbdata);
}

/* 4.1 spreads processes over equally near NICs by a number it calls the
 * pid: the local rank spreads a node's ranks evenly. */
static inline struct fi_info *mca_btl_ofi_compat_nearest(struct fi_info *list)
{
    return opal_mca_common_ofi_select_provider(
        list, opal_process_info.num_local_peers, (uint16_t) opal_process_info.my_local_rank,
        opal_process_info.cpuset, (uint32_t) opal_process_info.my_local_rank);
}

/* 4.1's spawned jobs are not told apart here: they choose as any job. */
static inline bool mca_btl_ofi_compat_parent(opal_process_name_t *parent)
{
    (void) parent;
    return false;
}

static inline uint32_t mca_btl_ofi_compat_job_size(void)
{
    opal_process_name_t wildcard = { .jobid = OPAL_PROC_MY_NAME.jobid, .vpid = OPAL_VPID_WILDCARD };
    uint32_t size = 0, *where = &size;
    int rc;

    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, OPAL_PMIX_JOB_SIZE, &wildcard, &where, OPAL_UINT32);
    return OPAL_SUCCESS == rc ? size : 0;
}

/* In 4.1 libfabric is loaded only with the DSOs that link it (ours and
 * libmca_common_ofi): when Open MPI closes our component and unloads it,
 * libfabric is unmapped too, while a provider's own threads (sockets') may
 * still be finishing their work; upstream's 4.1 btl/ofi sleeps 1 s in its
 * close for this.  A reference that is never dropped keeps this DSO, and
 * the libraries it needs, mapped until the process ends. */
static inline void mca_btl_ofi_compat_keep_loaded(const void *symbol)
{
    Dl_info where;

    if (0 != dladdr(symbol, &where) && NULL != where.dli_fname) {
        (void) dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    }
}

#else
#    error "btl/ofi builds against Open MPI 4.1.x or 5.0.x"
#endif

#endif /* MCA_BTL_OFI_COMPAT_H */
