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
 * What each process publishes about itself: the provider it chose and the
 * endpoint name of each of its modules, in one blob.  Parsing checks every
 * length, so a short or foreign blob makes that peer unreachable instead
 * of reading past the end.
 */

#ifndef MCA_BTL_OFI_MODEX_H
#define MCA_BTL_OFI_MODEX_H

#include <stddef.h>
#include <stdint.h>

#define MCA_BTL_OFI_MODEX_PROV_LEN 64
#define MCA_BTL_OFI_MODEX_MAGIC    0x4f464931u /**< "OFI1": first word of the blob */

typedef struct mca_btl_ofi_modex_hdr_t {
    uint32_t magic;
    uint32_t module_count;
    char provider[MCA_BTL_OFI_MODEX_PROV_LEN];
} mca_btl_ofi_modex_hdr_t;

/** Publish our provider and endpoint names. */
int mca_btl_ofi_modex_send(void);

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

#endif /* MCA_BTL_OFI_MODEX_H */
