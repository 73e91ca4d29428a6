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
 * The component's MCA parameters as one table (btl_ofi_params.c): a row
 * holds a parameter's name, type, default, range, ompi_info level and
 * one-line help.  Registration and the range checks walk the table, and
 * contrib/params writes docs/parameters.md and README's short list from
 * it (the unit lane fails when they disagree).
 */

#ifndef MCA_BTL_OFI_PARAMS_H
#define MCA_BTL_OFI_PARAMS_H

#include "opal_config.h"

#include <stdbool.h>

#include "opal/mca/base/mca_base_var.h"

BEGIN_C_DECLS

/** Who registers a parameter with the MCA variable system. */
typedef enum {
    /** this table, with the row's type, level and help */
    MCA_BTL_OFI_PARAM_OURS = 0,
    /** mca_btl_base_param_register: a row with storage is registered by
     * this table first (its default, level and help stand) and checked
     * after; one without documents Open MPI's level and help */
    MCA_BTL_OFI_PARAM_BTL_BASE,
    /** common/ofi (opal_common_ofi_mca_register): the row documents it */
    MCA_BTL_OFI_PARAM_COMMON_OFI,
} mca_btl_ofi_param_registrar_t;

/** What a value outside [min, max] becomes (always with a message). */
typedef enum {
    MCA_BTL_OFI_PARAM_CLAMP = 0, /**< the nearer bound */
    MCA_BTL_OFI_PARAM_RESET,     /**< the default */
} mca_btl_ofi_param_on_bad_t;

struct mca_btl_ofi_param_t;

/**
 * A check of its own for a row whose value is not a plain number in a
 * fixed range (a name, a bound another parameter sets).
 * @return OPAL_SUCCESS, or an error that disqualifies the component
 */
typedef int (*mca_btl_ofi_param_check_fn_t)(const struct mca_btl_ofi_param_t *row);

/** One MCA parameter: everything said about it is said here. */
typedef struct mca_btl_ofi_param_t {
    const char *name;                        /**< without the btl_ofi_ prefix */
    mca_btl_ofi_param_registrar_t registrar; /**< who registers it */
    mca_base_var_type_t type;                /**< INT, UNSIGNED_INT, SIZE_T, BOOL or STRING */
    mca_base_var_info_lvl_t level; /**< ompi_info level: 1-4 user, 5-6 tuning, 9 internal */
    /** where the value lives (its type's C type); NULL: another registrar
     * defaults and keeps it, the row only documents it */
    void *storage;
    long long def;       /**< default of a number or bool */
    const char *def_str; /**< default of a string */
    /** valid values of a number when min < max (checked in table order) */
    long long min;
    long long max;                      /**< see min */
    mca_btl_ofi_param_on_bad_t on_bad;  /**< what an out-of-range value becomes */
    const char *values;                 /**< valid values in words, where min/max cannot say */
    mca_btl_ofi_param_check_fn_t check; /**< replaces the range check; NULL: none of its own */
    const char *help;                   /**< one line: what it does, its unit */
} mca_btl_ofi_param_t;

/**
 * Register every parameter of ours and set the defaults of the BTL
 * framework's that the table gives; called before common/ofi's and the
 * framework's registration.
 */
int mca_btl_ofi_params_register(const mca_base_component_t *version);

/**
 * Check every parameter once, in table order, before anything is opened:
 * a value out of range is replaced with a message.
 * @return OPAL_SUCCESS, or OPAL_ERR_BAD_PARAM when a value disqualifies
 *         the component (an unknown btl_ofi_mode)
 */
int mca_btl_ofi_params_check(void);

END_C_DECLS

#endif /* MCA_BTL_OFI_PARAMS_H */
