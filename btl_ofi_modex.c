/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

#include "opal_config.h"

#include <string.h>

#include "opal/mca/pmix/pmix-internal.h"

#include "btl_ofi.h"
#include "btl_ofi_modex.h"

int mca_btl_ofi_modex_send(void)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_ofi_modex_hdr_t *hdr;
    size_t size = sizeof(*hdr);
    unsigned char *p;
    int rc;

    for (int i = 0; i < c->module_count; ++i) {
        size += sizeof(uint32_t) + c->modules[i]->ep_name_len;
    }
    hdr = calloc(1, size);
    if (NULL == hdr) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    hdr->magic = MCA_BTL_OFI_MODEX_MAGIC;
    hdr->module_count = (uint32_t) c->module_count;
    strncpy(hdr->provider, c->provider_name, sizeof(hdr->provider) - 1);
    p = (unsigned char *) (hdr + 1);
    for (int i = 0; i < c->module_count; ++i) {
        uint32_t n = (uint32_t) c->modules[i]->ep_name_len;
        memcpy(p, &n, sizeof(n));
        memcpy(p + sizeof(n), c->modules[i]->ep_name, n);
        p += sizeof(n) + n;
    }
    OPAL_MODEX_SEND(rc, PMIX_GLOBAL, &c->super.btl_version, hdr, size);
    free(hdr);
    return rc;
}
