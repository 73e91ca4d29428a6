/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 *
 * The parameter table (btl_ofi_params.c) and what is driven by it: its
 * registration registers each row with its default and level (which the
 * framework's own registration keeps), and the checks clamp or reset what
 * is out of range with the "[bad parameter]" message, disqualify an
 * unknown mode and map the names of the string parameters.  Linked with btl_ofi_params.c, the pure
 * decisions it uses and libopen-pal (initialised for the MCA variable
 * system), against a fake component and module template and a show_help
 * that records instead of printing.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/btl/base/base.h"
#include "opal/runtime/opal.h"

#include "btl_ofi.h"
#include "btl_ofi_params.h"

/* What the component's other files define for a real process. */
mca_btl_ofi_component_t mca_btl_ofi_component = {
    .super = {
        .btl_version = {
            MCA_BTL_DEFAULT_VERSION("ofi"),
        },
    },
};
mca_btl_ofi_module_t mca_btl_ofi_module_template;

static struct {
    int calls;
    char topic[64];
    char param[64]; /* a "[bad parameter]" message's parameter */
    long value, min, max, used;
} shown;

static int record_show_help(const char *file, const char *topic, int want_error_header, ...)
{
    va_list ap;

    (void) file;
    (void) want_error_header;
    shown.calls++;
    (void) snprintf(shown.topic, sizeof(shown.topic), "%s", topic);
    if (0 == strcmp(topic, "bad parameter")) {
        va_start(ap, want_error_header);
        (void) va_arg(ap, const char *); /* the host */
        (void) snprintf(shown.param, sizeof(shown.param), "%s", va_arg(ap, const char *));
        shown.value = va_arg(ap, long);
        shown.min = va_arg(ap, long);
        shown.max = va_arg(ap, long);
        shown.used = va_arg(ap, long);
        va_end(ap);
    }
    return OPAL_SUCCESS;
}

static int setup(void **state)
{
    (void) state;
    memset(&shown, 0, sizeof(shown));
    opal_show_help = record_show_help;
    /* every row's default, ours registered */
    return mca_btl_ofi_params_register(&mca_btl_ofi_component.super.btl_version);
}

static void test_defaults_pass(void **state)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_base_module_t *m = &mca_btl_ofi_module_template.super;

    (void) state;
    assert_int_equal(OPAL_SUCCESS, mca_btl_ofi_params_check());
    assert_int_equal(0, shown.calls);
    assert_int_equal(MCA_BTL_OFI_MODE_FULL_SUPPORT, c->mode);
    assert_int_equal(64, c->num_cq_read);
    assert_int_equal(-1, c->local_copy);
    assert_int_equal(MCA_BTL_OFI_PROGRESS_THREAD_AUTO, c->progress_thread);
    assert_int_equal(FI_PROGRESS_MANUAL, c->progress_mode);
    assert_int_equal(16 * 1024, m->btl_eager_limit);
    assert_int_equal(64 * 1024, m->btl_max_send_size);
    assert_int_equal(1ul << 30, m->btl_put_limit);
    assert_int_equal(MCA_BTL_EXCLUSIVITY_HIGH - 50, m->btl_exclusivity);
}

static int level_of(const char *name)
{
    const mca_base_var_t *var;
    int index = mca_base_var_find("opal", "btl", "ofi", name);

    assert_true(index >= 0);
    assert_int_equal(OPAL_SUCCESS, mca_base_var_get(index, &var));
    return var->mbv_info_lvl;
}

/* registered with the row's level; a framework parameter keeps it when
 * the framework registers it again after us, and keeps our default */
static void test_registered_with_level(void **state)
{
    mca_btl_base_module_t *m = &mca_btl_ofi_module_template.super;

    (void) state;
    assert_int_equal(OPAL_INFO_LVL_4, level_of("progress_thread"));
    assert_int_equal(OPAL_INFO_LVL_9, level_of("progress_gap_us"));
    assert_int_equal(OPAL_SUCCESS,
                     mca_btl_base_param_register(&mca_btl_ofi_component.super.btl_version, m));
    assert_int_equal(OPAL_INFO_LVL_5, level_of("eager_limit"));
    assert_int_equal(OPAL_INFO_LVL_6, level_of("max_send_size"));
    assert_int_equal(OPAL_INFO_LVL_9, level_of("rdma_pipeline_frag_size"));
    assert_int_equal(16 * 1024, m->btl_eager_limit);
    assert_int_equal(64 * 1024, m->btl_max_send_size);
}

static void test_clamped(void **state)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;

    (void) state;
    c->num_cq_read = 0;
    assert_int_equal(OPAL_SUCCESS, mca_btl_ofi_params_check());
    assert_int_equal(1, c->num_cq_read);
    assert_int_equal(1, shown.calls);
    assert_string_equal("btl_ofi_num_cq_read", shown.param);
    assert_int_equal(0, shown.value);
    assert_int_equal(1, shown.min);
    assert_int_equal(MCA_BTL_OFI_CQ_BATCH_LIMIT, shown.max);
    assert_int_equal(1, shown.used);

    c->local_atomics = 5;
    assert_int_equal(OPAL_SUCCESS, mca_btl_ofi_params_check());
    assert_int_equal(1, c->local_atomics);
    assert_string_equal("btl_ofi_local_atomics", shown.param);
}

static void test_reset_to_default(void **state)
{
    mca_btl_base_module_t *m = &mca_btl_ofi_module_template.super;

    (void) state;
    m->btl_get_limit = 0;
    assert_int_equal(OPAL_SUCCESS, mca_btl_ofi_params_check());
    assert_int_equal(1ul << 30, m->btl_get_limit);
    assert_string_equal("btl_ofi_get_limit", shown.param);
    assert_int_equal(1l << 30, shown.used);
}

/* eager_limit is bounded by max_send_size as clamped in the same pass */
static void test_eager_limit_follows_max_send_size(void **state)
{
    mca_btl_base_module_t *m = &mca_btl_ofi_module_template.super;

    (void) state;
    m->btl_max_send_size = 1 << 30;
    m->btl_eager_limit = 1 << 21;
    m->btl_rndv_eager_limit = 0;
    assert_int_equal(OPAL_SUCCESS, mca_btl_ofi_params_check());
    assert_int_equal(1 << 20, m->btl_max_send_size);
    assert_int_equal(1 << 20, m->btl_eager_limit);
    assert_string_equal("btl_ofi_eager_limit", shown.param);
    assert_int_equal(2, shown.calls);
    assert_int_equal(1 << 20, m->btl_rndv_eager_limit); /* quietly */
}

static void test_unknown_mode_disqualifies(void **state)
{
    (void) state;
    mca_btl_ofi_component.mode = 7;
    assert_int_equal(OPAL_ERR_BAD_PARAM, mca_btl_ofi_params_check());
    assert_string_equal("bad mode", shown.topic);
}

static void test_string_values(void **state)
{
    static char on[] = "on", bogus[] = "sometimes", automatic[] = "auto";
    int index = mca_base_var_find("opal", "btl", "ofi", "progress_thread");
    const mca_base_var_t *thread, *mode;

    (void) state;
    assert_int_equal(OPAL_SUCCESS, mca_base_var_get(index, &thread));
    index = mca_base_var_find("opal", "btl", "ofi", "progress_mode");
    assert_int_equal(OPAL_SUCCESS, mca_base_var_get(index, &mode));

    *(char **) thread->mbv_storage = on;
    *(char **) mode->mbv_storage = automatic;
    assert_int_equal(OPAL_SUCCESS, mca_btl_ofi_params_check());
    assert_int_equal(MCA_BTL_OFI_PROGRESS_THREAD_ON, mca_btl_ofi_component.progress_thread);
    assert_int_equal(FI_PROGRESS_AUTO, mca_btl_ofi_component.progress_mode);
    assert_int_equal(0, shown.calls);

    *(char **) thread->mbv_storage = bogus;
    *(char **) mode->mbv_storage = bogus;
    assert_int_equal(OPAL_SUCCESS, mca_btl_ofi_params_check());
    assert_int_equal(MCA_BTL_OFI_PROGRESS_THREAD_AUTO, mca_btl_ofi_component.progress_thread);
    assert_int_equal(FI_PROGRESS_MANUAL, mca_btl_ofi_component.progress_mode);
    assert_int_equal(2, shown.calls);
    assert_string_equal("bad progress mode", shown.topic);
    /* the variable system frees what its strings point to */
    *(char **) thread->mbv_storage = NULL;
    *(char **) mode->mbv_storage = NULL;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults_pass, setup),
        cmocka_unit_test_setup(test_registered_with_level, setup),
        cmocka_unit_test_setup(test_clamped, setup),
        cmocka_unit_test_setup(test_reset_to_default, setup),
        cmocka_unit_test_setup(test_eager_limit_follows_max_send_size, setup),
        cmocka_unit_test_setup(test_unknown_mode_disqualifies, setup),
        cmocka_unit_test_setup(test_string_values, setup),
    };

    int rc;

    /* the MCA variable system */
    if (OPAL_SUCCESS != opal_init_util(&argc, &argv)) {
        fprintf(stderr, "opal_init_util failed\n");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    (void) opal_finalize_util();
    return rc;
}
