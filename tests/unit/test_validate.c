/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 *
 * Unit tests of the pure decisions: provider validation over hand-built
 * fi_info structures, provider ranking, include/exclude lists, parameter
 * clamping and modex parsing.
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#include "btl_ofi_validate.h"

#define ONE_SIDED_CAPS (FI_RMA | FI_ATOMIC)

/** A fi_info and the attribute structures it points to, all on the stack. */
typedef struct {
    struct fi_info info;
    struct fi_fabric_attr fabric;
    struct fi_domain_attr domain;
    struct fi_ep_attr ep;
    struct fi_tx_attr tx;
    struct fi_rx_attr rx;
    char prov[64];
} fake_info_t;

static struct fi_info *make_info(fake_info_t *f, const char *prov, uint32_t prov_version,
                                 int mr_mode, uint64_t caps, uint64_t op_flags)
{
    memset(f, 0, sizeof(*f));
    strncpy(f->prov, prov, sizeof(f->prov) - 1);
    f->fabric.prov_name = f->prov;
    f->fabric.prov_version = prov_version;
    f->domain.mr_mode = mr_mode;
    f->domain.name = "dev0";
    f->domain.data_progress = FI_PROGRESS_MANUAL;
    f->ep.type = FI_EP_RDM;
    f->tx.op_flags = op_flags;
    f->info.caps = caps;
    f->info.mode = FI_CONTEXT;
    f->info.fabric_attr = &f->fabric;
    f->info.domain_attr = &f->domain;
    f->info.ep_attr = &f->ep;
    f->info.tx_attr = &f->tx;
    f->info.rx_attr = &f->rx;
    return &f->info;
}

#define BASIC_MR (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)

/* fabric_attr->prov_version of the providers built into each release */
#define LF_1_17 MCA_BTL_OFI_RELEASE(1, 17)
#define LF_2_1  MCA_BTL_OFI_RELEASE(2, 1)
#define LF_2_2  MCA_BTL_OFI_RELEASE(2, 2)
#define ALL_CAPS (FI_RMA | FI_ATOMIC | FI_MSG)

static bool usable(struct fi_info *info, char *why, size_t len)
{
    return mca_btl_ofi_info_usable(info, ONE_SIDED_CAPS, why, len);
}

static void test_efa_before_1_12_rejected(void **state)
{
    fake_info_t f;
    char why[128] = "";
    (void) state;
    make_info(&f, "efa", FI_VERSION(111, 0), BASIC_MR | FI_MR_LOCAL, ALL_CAPS,
              FI_DELIVERY_COMPLETE);
    assert_false(usable(&f.info, why, sizeof(why)));
    assert_non_null(strstr(why, "1.12"));
}

static void test_efa_from_1_12_accepted(void **state)
{
    fake_info_t f;
    (void) state;
    make_info(&f, "efa", FI_VERSION(112, 0), BASIC_MR | FI_MR_LOCAL | FI_MR_HMEM, ALL_CAPS,
              FI_DELIVERY_COMPLETE);
    assert_true(usable(&f.info, NULL, 0));
    make_info(&f, "efa", FI_VERSION(119, 0), BASIC_MR | FI_MR_LOCAL, ALL_CAPS,
              FI_DELIVERY_COMPLETE);
    assert_true(usable(&f.info, NULL, 0));
}

/* scalable registration as API 1.5 and later report it: no mode bit */
static void test_psm2_accepted(void **state)
{
    fake_info_t f;
    (void) state;
    make_info(&f, "psm2", LF_1_17, 0, ALL_CAPS, FI_DELIVERY_COMPLETE);
    assert_true(usable(&f.info, NULL, 0));
}

/* We ask for API 1.9 or newer: mr_mode is a mask, and the bits of the
 * pre-1.5 values FI_MR_BASIC (1) and FI_MR_SCALABLE (2), deprecated in
 * 2.0, are bits we do not serve, with either version's headers. */
static void test_legacy_mr_values_rejected(void **state)
{
    fake_info_t f;
    char why[128] = "";
    (void) state;
    for (int legacy = 1; legacy <= 2; ++legacy) {
        make_info(&f, "psm2", LF_2_1, legacy, ALL_CAPS, FI_DELIVERY_COMPLETE);
        assert_false(usable(&f.info, why, sizeof(why)));
        assert_non_null(strstr(why, "memory-registration mode"));
    }
}

static void test_software_providers_accepted(void **state)
{
    static const char *provs[] = { "sockets", "tcp;ofi_rxm", "shm", "net" };
    fake_info_t f;
    (void) state;
    for (size_t i = 0; i < sizeof(provs) / sizeof(provs[0]); ++i) {
        make_info(&f, provs[i], FI_VERSION(117, 0), BASIC_MR | FI_MR_ENDPOINT, ALL_CAPS,
                  FI_DELIVERY_COMPLETE);
        assert_true(usable(&f.info, NULL, 0));
    }
}


/* upstream rejects every ofi_rxm by name; we look at what it promises */
static void test_rxm_needs_delivery_complete(void **state)
{
    fake_info_t f;
    char why[128] = "";
    (void) state;
    make_info(&f, "tcp;ofi_rxm", FI_VERSION(117, 0), BASIC_MR, ALL_CAPS, FI_DELIVERY_COMPLETE);
    assert_true(usable(&f.info, NULL, 0));
    make_info(&f, "tcp;ofi_rxm", FI_VERSION(117, 0), BASIC_MR, ALL_CAPS, FI_TRANSMIT_COMPLETE);
    assert_false(usable(&f.info, why, sizeof(why)));
    assert_non_null(strstr(why, "delivery-complete"));
}

/* the check upstream wrote as `op_flags | FI_DELIVERY_COMPLETE` never fails */
static void test_missing_delivery_complete_rejected(void **state)
{
    fake_info_t f;
    (void) state;
    make_info(&f, "sockets", FI_VERSION(117, 0), BASIC_MR, ALL_CAPS, 0);
    assert_false(usable(&f.info, NULL, 0));
}

static void test_verbs_rxm_with_mr_local_accepted(void **state)
{
    fake_info_t f;
    (void) state;
    make_info(&f, "verbs;ofi_rxm", FI_VERSION(117, 0), BASIC_MR | FI_MR_LOCAL, ALL_CAPS,
              FI_DELIVERY_COMPLETE);
    assert_true(usable(&f.info, NULL, 0));
}

static void test_unsupported_shapes_rejected(void **state)
{
    fake_info_t f;
    (void) state;
    make_info(&f, "sockets", FI_VERSION(117, 0), BASIC_MR, FI_MSG, FI_DELIVERY_COMPLETE);
    assert_false(usable(&f.info, NULL, 0)); /* no RMA or atomics */
    make_info(&f, "sockets", FI_VERSION(117, 0), BASIC_MR | FI_MR_RMA_EVENT, ALL_CAPS,
              FI_DELIVERY_COMPLETE);
    assert_false(usable(&f.info, NULL, 0));
    make_info(&f, "sockets", FI_VERSION(117, 0), BASIC_MR, ALL_CAPS, FI_DELIVERY_COMPLETE);
    f.ep.type = FI_EP_MSG;
    assert_false(usable(&f.info, NULL, 0));
    make_info(&f, "sockets", FI_VERSION(117, 0), BASIC_MR, ALL_CAPS, FI_DELIVERY_COMPLETE);
    f.info.mode |= FI_MSG_PREFIX;
    assert_false(usable(&f.info, NULL, 0));
    assert_false(mca_btl_ofi_info_usable(NULL, ONE_SIDED_CAPS, NULL, 0));
}

/* ---- the version-dependent rules, with 1.17's and 2.1's fi_infos ---- */

/* The built-in providers' version is the release's: 1.17 is 117.0, 2.1 is
 * 201.0 (OFI_VERSION_DEF_PROV), so every "from 1.x" rule holds for 2.x. */
static void test_release_versions(void **state)
{
    (void) state;
    assert_int_equal(LF_1_17, FI_VERSION(117, 0));
    assert_int_equal(LF_2_1, FI_VERSION(201, 0));
    assert_true(FI_VERSION_GE(LF_2_1, MCA_BTL_OFI_RELEASE(1, 18)));
}

/* rxd crashed inside libfabric in our suite with 1.17 and with 2.1; the
 * releases after 2.1 are untried and not refused */
static void test_rxd_per_version(void **state)
{
    static const uint32_t crashed[] = { LF_1_17, MCA_BTL_OFI_RELEASE(1, 18), LF_2_1 };
    fake_info_t f;
    char why[256] = "";
    (void) state;
    for (size_t i = 0; i < sizeof(crashed) / sizeof(crashed[0]); ++i) {
        make_info(&f, "udp;ofi_rxd", crashed[i], BASIC_MR | FI_MR_ENDPOINT, ALL_CAPS,
                  FI_DELIVERY_COMPLETE);
        assert_false(usable(&f.info, why, sizeof(why)));
        assert_non_null(strstr(why, "ofi_rxd"));
    }
    make_info(&f, "udp;ofi_rxd", LF_2_2, BASIC_MR | FI_MR_ENDPOINT, ALL_CAPS,
              FI_DELIVERY_COMPLETE);
    assert_true(usable(&f.info, NULL, 0));
}

static void test_rxm_delivery_complete_per_version(void **state)
{
    static const uint32_t versions[] = { LF_1_17, LF_2_1 };
    fake_info_t f;
    (void) state;
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); ++i) {
        make_info(&f, "tcp;ofi_rxm", versions[i], BASIC_MR, ALL_CAPS,
                  FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE);
        assert_true(usable(&f.info, NULL, 0));
        make_info(&f, "tcp;ofi_rxm", versions[i], BASIC_MR, ALL_CAPS, FI_TRANSMIT_COMPLETE);
        assert_false(usable(&f.info, NULL, 0));
    }
    /* 2.x's native RDM tcp is judged by the same promise */
    make_info(&f, "tcp", LF_2_1, BASIC_MR, ALL_CAPS, FI_DELIVERY_COMPLETE);
    assert_true(usable(&f.info, NULL, 0));
    make_info(&f, "tcp", LF_2_1, BASIC_MR, ALL_CAPS, FI_TRANSMIT_COMPLETE);
    assert_false(usable(&f.info, NULL, 0));
}

static void test_mr_modes_per_version(void **state)
{
    static const uint32_t versions[] = { LF_1_17, LF_2_1 };
    mca_btl_ofi_plan_t plan;
    fake_info_t f;
    (void) state;
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); ++i) {
        make_info(&f, "shm", versions[i], BASIC_MR | FI_MR_HMEM, ALL_CAPS, FI_DELIVERY_COMPLETE);
        assert_true(usable(&f.info, NULL, 0));
        mca_btl_ofi_plan_info(&f.info, &plan);
        assert_true(plan.virt_addr && plan.prov_key);
        assert_false(plan.mr_local || plan.mr_endpoint);
        make_info(&f, "tcp;ofi_rxm", versions[i], FI_MR_ENDPOINT | FI_MR_LOCAL, ALL_CAPS,
                  FI_DELIVERY_COMPLETE);
        assert_true(usable(&f.info, NULL, 0));
        mca_btl_ofi_plan_info(&f.info, &plan);
        assert_true(plan.mr_endpoint && plan.mr_local);
        assert_false(plan.virt_addr || plan.prov_key);
        /* FI_MR_RMA_EVENT and FI_MR_COLLECTIVE ask for what we do not do */
        make_info(&f, "sockets", versions[i], BASIC_MR | FI_MR_RMA_EVENT, ALL_CAPS,
                  FI_DELIVERY_COMPLETE);
        assert_false(usable(&f.info, NULL, 0));
    }
}

/* What the component asks fi_getinfo for with the headers it was built
 * with: no deprecated registration bits, and a table AV from 2.0 on. */
static void test_hints_per_api(void **state)
{
    struct fi_info *hints = fi_allocinfo();
    (void) state;
    assert_non_null(hints);
    mca_btl_ofi_fill_hints(hints, ALL_CAPS, FI_PROGRESS_MANUAL, FI_THREAD_DOMAIN);
    assert_int_equal(hints->domain_attr->mr_mode & 0x3, 0);
    assert_int_equal(hints->domain_attr->mr_mode & FI_MR_HMEM, 0);
    assert_true(0 != (hints->mode & FI_CONTEXT2));
    assert_true(0 != (hints->tx_attr->op_flags & FI_DELIVERY_COMPLETE));
#if FI_MAJOR_VERSION >= 2
    assert_int_equal(hints->domain_attr->av_type, FI_AV_TABLE);
#else
    assert_int_equal(hints->domain_attr->av_type, FI_AV_MAP);
#endif
    fi_freeinfo(hints);
}

/* 2.1 builds psm3, which without its NIC runs over kernel sockets and
 * hung in our suite: turned down then, taken on its NIC */
static void test_psm3_over_sockets_rejected(void **state)
{
    fake_info_t f;
    char why[256] = "";
    (void) state;
    make_info(&f, "psm3", MCA_BTL_OFI_RELEASE(4, 0), 0, ALL_CAPS, FI_DELIVERY_COMPLETE);
    f.fabric.name = "TCP-192.0.2.0/24";
    assert_false(usable(&f.info, why, sizeof(why)));
    assert_non_null(strstr(why, "sockets"));
    f.fabric.name = "UDP-192.0.2.0/24";
    assert_false(usable(&f.info, NULL, 0));
    f.fabric.name = "RoCE-192.0.2.0/24";
    assert_true(usable(&f.info, NULL, 0));
}

/* ---- EFA as libfabric 2.x presents it (no hardware here) ---- */

#define EFA_TX_FLAGS (FI_INJECT | FI_COMPLETION | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE)
/* one-sided traffic without the provider's atomics, with messages for ours */
#define RMA_MSG_CAPS (FI_RMA | FI_MSG)

/* 2.x's efa: RDM over SRD, atomics and part of RMA emulated by the
 * provider, manual progress, no FI_MR_LOCAL, no context mode */
static struct fi_info *make_efa_rdm(fake_info_t *f, uint32_t version)
{
    make_info(f, "efa", version, BASIC_MR | FI_MR_HMEM, ALL_CAPS, EFA_TX_FLAGS);
    f->fabric.name = "efa";
    f->info.mode = 0;
    f->domain.data_progress = FI_PROGRESS_MANUAL;
    return &f->info;
}

/* 2.x's efa-direct: the device alone, RMA and messages, no atomics, no
 * emulated protocol, every local buffer registered, FI_CONTEXT2 */
static struct fi_info *make_efa_direct(fake_info_t *f, uint32_t version)
{
    make_info(f, "efa", version, BASIC_MR | FI_MR_LOCAL | FI_MR_HMEM, RMA_MSG_CAPS, EFA_TX_FLAGS);
    f->fabric.name = "efa-direct";
    f->info.mode = FI_CONTEXT2;
    f->domain.data_progress = FI_PROGRESS_MANUAL;
    return &f->info;
}

static void test_efa_rdm_2x(void **state)
{
    mca_btl_ofi_plan_t plan;
    fake_info_t f;
    (void) state;
    make_efa_rdm(&f, LF_2_1);
    assert_true(usable(&f.info, NULL, 0));
    mca_btl_ofi_plan_info(&f.info, &plan);
    assert_false(plan.efa_direct);
    assert_false(plan.mr_local);
    assert_false(plan.context2);
    assert_true(plan.provider_atomics); /* fi_query_atomic is asked */
    assert_true(plan.bypass_mr_cache);  /* before 2.2 */
    assert_true(mca_btl_ofi_progress_thread_wanted(MCA_BTL_OFI_PROGRESS_THREAD_AUTO,
                                                   f.domain.data_progress, NULL));
    assert_true(mca_btl_ofi_provider_rank("efa", false) > mca_btl_ofi_provider_rank("tcp", false));
}

static void test_efa_direct_2x(void **state)
{
    mca_btl_ofi_plan_t plan;
    fake_info_t f;
    char why[128] = "";
    (void) state;
    make_efa_direct(&f, LF_2_1);
    /* with the atomics asked of the provider it does not qualify ... */
    assert_false(usable(&f.info, why, sizeof(why)));
    assert_non_null(strstr(why, "missing capabilities"));
    /* ... without them (our target-applied atomics, over its messages) it does */
    assert_true(mca_btl_ofi_info_usable(&f.info, RMA_MSG_CAPS, NULL, 0));
    mca_btl_ofi_plan_info(&f.info, &plan);
    assert_true(plan.efa_direct);
    assert_true(plan.mr_local);         /* local buffers registered */
    assert_true(plan.context2);         /* two context words per operation */
    assert_false(plan.provider_atomics); /* atomics applied at the target */
    assert_true(plan.bypass_mr_cache);
    /* FI_CONTEXT2 is a mode we serve; one we do not is still refused */
    f.info.mode |= FI_MSG_PREFIX;
    assert_false(mca_btl_ofi_info_usable(&f.info, RMA_MSG_CAPS, NULL, 0));
}

/* Discovery's rounds: device memory goes first, then the provider's
 * atomics (efa-direct qualifies in that round), then, unless the user set
 * the mode, two-sided traffic; then nothing is left. */
static void test_discovery_rounds(void **state)
{
    mca_btl_ofi_wishes_t w = { .rma = true, .msg = true, .msg_optional = true, .hmem = true,
                               .atomics = true };
    uint64_t round[4];
    int n = 0;
    fake_info_t f;
    (void) state;
    do {
        assert_true(n < 4);
        round[n++] = mca_btl_ofi_primary_caps(mca_btl_ofi_wished_caps(&w));
    } while (mca_btl_ofi_give_up_wish(&w));
    assert_int_equal(n, 4);
    assert_true(round[0] & FI_HMEM);
    assert_int_equal(round[1], FI_RMA | FI_ATOMIC | FI_MSG);
    assert_int_equal(round[2], FI_RMA | FI_MSG);
    assert_int_equal(round[3], FI_RMA | FI_ATOMIC);
    assert_int_equal(mca_btl_ofi_primary_caps(FI_RMA | FI_READ | FI_SEND | FI_MSG), FI_RMA | FI_MSG);
    make_efa_direct(&f, LF_2_1);
    for (int i = 0; i < n; ++i) {
        assert_true(mca_btl_ofi_info_usable(&f.info, round[i], NULL, 0) == (2 == i));
    }
    /* the user asked for both: messages are never given up */
    w = (mca_btl_ofi_wishes_t){ .rma = true, .msg = true, .hmem = false, .atomics = true };
    assert_true(mca_btl_ofi_give_up_wish(&w));
    assert_false(w.atomics);
    assert_false(mca_btl_ofi_give_up_wish(&w));
}

/* efa cached registrations itself before 2.2, and ours stayed out; from
 * 2.2 on ours applies.  No other provider is bypassed. */
static void test_mr_cache_rule_per_version(void **state)
{
    mca_btl_ofi_plan_t plan;
    fake_info_t f;
    (void) state;
    make_efa_rdm(&f, LF_1_17);
    mca_btl_ofi_plan_info(&f.info, &plan);
    assert_true(plan.bypass_mr_cache);
    make_efa_rdm(&f, LF_2_1);
    mca_btl_ofi_plan_info(&f.info, &plan);
    assert_true(plan.bypass_mr_cache);
    make_efa_rdm(&f, LF_2_2);
    mca_btl_ofi_plan_info(&f.info, &plan);
    assert_false(plan.bypass_mr_cache);
    make_efa_direct(&f, LF_2_2);
    mca_btl_ofi_plan_info(&f.info, &plan);
    assert_false(plan.bypass_mr_cache);
    make_info(&f, "tcp", LF_2_1, BASIC_MR, ALL_CAPS, FI_DELIVERY_COMPLETE);
    mca_btl_ofi_plan_info(&f.info, &plan);
    assert_false(plan.bypass_mr_cache);
    assert_false(plan.efa_direct);
}

static void test_ranking(void **state)
{
    (void) state;
    assert_true(mca_btl_ofi_provider_rank("efa", false) > mca_btl_ofi_provider_rank("shm", true));
    assert_true(mca_btl_ofi_provider_rank("psm2", true) > mca_btl_ofi_provider_rank("shm", true));
    assert_true(mca_btl_ofi_provider_rank("verbs;ofi_rxm", false)
                > mca_btl_ofi_provider_rank("tcp;ofi_rxm", false));
    assert_true(mca_btl_ofi_provider_rank("shm", true)
                > mca_btl_ofi_provider_rank("tcp;ofi_rxm", true));
    assert_true(mca_btl_ofi_provider_rank("tcp;ofi_rxm", true)
                > mca_btl_ofi_provider_rank("sockets", true));
    assert_true(mca_btl_ofi_provider_rank("sockets", false)
                > mca_btl_ofi_provider_rank("udp;ofi_rxd", false));
    assert_true(mca_btl_ofi_provider_rank("udp;ofi_rxd", false)
                > mca_btl_ofi_provider_rank("net", false));
    /* shm cannot reach another node */
    assert_true(mca_btl_ofi_provider_rank("shm", false) < 0);
    assert_true(mca_btl_ofi_provider_rank(NULL, true) < 0);
}

static void test_lists(void **state)
{
    (void) state;
    assert_true(mca_btl_ofi_list_names("sockets", "sockets"));
    assert_true(mca_btl_ofi_list_names("shm, tcp;ofi_rxm", "tcp;ofi_rxm"));
    assert_true(mca_btl_ofi_list_names("ofi_rxm", "tcp;ofi_rxm"));
    assert_true(mca_btl_ofi_list_names("tcp", "tcp;ofi_rxm"));
    assert_true(mca_btl_ofi_list_names("SOCKETS", "sockets"));
    assert_false(mca_btl_ofi_list_names("sock", "sockets"));
    assert_false(mca_btl_ofi_list_names("tcp", "udp;ofi_rxd"));
    assert_false(mca_btl_ofi_list_names("", "sockets"));
    assert_false(mca_btl_ofi_list_names(NULL, "sockets"));
    assert_false(mca_btl_ofi_list_names("efa,psm2", "shm"));
    /* exact names: libfabric 2.x's RDM "tcp" against "tcp;ofi_rxm" */
    assert_true(mca_btl_ofi_list_names_exactly("shm, tcp", "tcp"));
    assert_false(mca_btl_ofi_list_names_exactly("tcp", "tcp;ofi_rxm"));
    assert_true(mca_btl_ofi_list_names_exactly("TCP;OFI_RXM", "tcp;ofi_rxm"));
}

static void test_clamp(void **state)
{
    int v;
    (void) state;
    v = 5;
    assert_int_equal(mca_btl_ofi_clamp_int(&v, 1, 10), MCA_BTL_OFI_PARAM_OK);
    assert_int_equal(v, 5);
    v = 0;
    assert_int_equal(mca_btl_ofi_clamp_int(&v, 1, 10), MCA_BTL_OFI_PARAM_CLAMPED);
    assert_int_equal(v, 1);
    v = -7;
    assert_int_equal(mca_btl_ofi_clamp_int(&v, 1, 10), MCA_BTL_OFI_PARAM_CLAMPED);
    assert_int_equal(v, 1);
    /* upstream's num_cq_read could exceed its 128-entry stack buffer */
    v = 100000;
    assert_int_equal(mca_btl_ofi_clamp_int(&v, 1, MCA_BTL_OFI_CQ_BATCH_LIMIT),
                     MCA_BTL_OFI_PARAM_CLAMPED);
    assert_int_equal(v, MCA_BTL_OFI_CQ_BATCH_LIMIT);
}

static void test_progress_mode(void **state)
{
    (void) state;
    assert_int_equal(mca_btl_ofi_parse_progress_mode("manual"), FI_PROGRESS_MANUAL);
    assert_int_equal(mca_btl_ofi_parse_progress_mode("AUTO"), FI_PROGRESS_AUTO);
    assert_int_equal(mca_btl_ofi_parse_progress_mode("unspec"), FI_PROGRESS_UNSPEC);
    assert_int_equal(mca_btl_ofi_parse_progress_mode(NULL), FI_PROGRESS_UNSPEC);
    assert_true(mca_btl_ofi_parse_progress_mode("sometimes") < 0);
}

static void test_progress_thread(void **state)
{
    const char *why = NULL;

    (void) state;
    assert_int_equal(mca_btl_ofi_parse_progress_thread("auto"), MCA_BTL_OFI_PROGRESS_THREAD_AUTO);
    assert_int_equal(mca_btl_ofi_parse_progress_thread(NULL), MCA_BTL_OFI_PROGRESS_THREAD_AUTO);
    assert_int_equal(mca_btl_ofi_parse_progress_thread("ON"), MCA_BTL_OFI_PROGRESS_THREAD_ON);
    assert_int_equal(mca_btl_ofi_parse_progress_thread("1"), MCA_BTL_OFI_PROGRESS_THREAD_ON);
    assert_int_equal(mca_btl_ofi_parse_progress_thread("off"), MCA_BTL_OFI_PROGRESS_THREAD_OFF);
    assert_int_equal(mca_btl_ofi_parse_progress_thread("no"), MCA_BTL_OFI_PROGRESS_THREAD_OFF);
    assert_true(mca_btl_ofi_parse_progress_thread("sometimes") < 0);

    /* auto: a thread for manual data progress, none for a provider that
     * moves data on its own; on and off are obeyed whatever the provider */
    assert_true(mca_btl_ofi_progress_thread_wanted(MCA_BTL_OFI_PROGRESS_THREAD_AUTO,
                                                   FI_PROGRESS_MANUAL, &why));
    assert_non_null(strstr(why, "manual"));
    assert_false(mca_btl_ofi_progress_thread_wanted(MCA_BTL_OFI_PROGRESS_THREAD_AUTO,
                                                    FI_PROGRESS_AUTO, &why));
    assert_non_null(strstr(why, "FI_PROGRESS_AUTO"));
    assert_true(mca_btl_ofi_progress_thread_wanted(MCA_BTL_OFI_PROGRESS_THREAD_ON,
                                                   FI_PROGRESS_AUTO, NULL));
    assert_false(mca_btl_ofi_progress_thread_wanted(MCA_BTL_OFI_PROGRESS_THREAD_OFF,
                                                    FI_PROGRESS_MANUAL, NULL));
}

/* ---- modex ---- */

static size_t build_blob(unsigned char *buf, const char *prov, int count, const char **names)
{
    mca_btl_ofi_modex_hdr_t hdr;
    size_t off = sizeof(hdr);

    memset(&hdr, 0, sizeof(hdr));
    hdr.magic = MCA_BTL_OFI_MODEX_MAGIC;
    hdr.module_count = (uint32_t) count;
    strncpy(hdr.provider, prov, sizeof(hdr.provider) - 1);
    memcpy(buf, &hdr, sizeof(hdr));
    for (int i = 0; i < count; ++i) {
        uint32_t n = (uint32_t) strlen(names[i]);
        memcpy(buf + off, &n, sizeof(n));
        memcpy(buf + off + sizeof(n), names[i], n);
        off += sizeof(n) + n;
    }
    return off;
}

static void test_modex_parse(void **state)
{
    const char *names[] = { "nic-zero", "nic-one-longer" };
    unsigned char buf[512];
    const void *name;
    size_t len, size;
    const char *why;
    (void) state;

    size = build_blob(buf, "sockets", 2, names);
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "sockets", 1, &name, &len, &why), 0);
    assert_int_equal(len, strlen(names[1]));
    assert_memory_equal(name, names[1], len);
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "sockets", 0, &name, &len, &why), 0);
    assert_memory_equal(name, names[0], len);

    /* every truncation point is caught */
    for (size_t cut = 0; cut < size; ++cut) {
        int rc = mca_btl_ofi_modex_parse(buf, cut, "sockets", 1, &name, &len, &why);
        assert_int_equal(rc, -1);
    }
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "shm", 0, &name, &len, &why), -1);
    assert_non_null(strstr(why, "provider"));
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "sockets", 2, &name, &len, &why), -1);
    assert_int_equal(mca_btl_ofi_modex_parse(NULL, 0, "sockets", 0, &name, &len, &why), -1);
    buf[0] ^= 0xff;
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "sockets", 0, &name, &len, &why), -1);
}

static void test_modex_provider(void **state)
{
    const char *names[] = { "nic-zero" };
    unsigned char buf[512];
    mca_btl_ofi_modex_hdr_t *hdr = (mca_btl_ofi_modex_hdr_t *) buf;
    size_t size;
    (void) state;

    size = build_blob(buf, "tcp;ofi_rxm", 1, names);
    assert_string_equal(mca_btl_ofi_modex_provider(buf, size), "tcp;ofi_rxm");
    assert_null(mca_btl_ofi_modex_provider(buf, sizeof(*hdr) - 1));
    assert_null(mca_btl_ofi_modex_provider(NULL, size));
    /* a name without its terminator is not read past the header */
    memset(hdr->provider, 'x', sizeof(hdr->provider));
    assert_null(mca_btl_ofi_modex_provider(buf, size));
    size = build_blob(buf, "shm", 1, names);
    hdr->magic ^= 1;
    assert_null(mca_btl_ofi_modex_provider(buf, size));
}

/* ---- same-host copies (btl_ofi_copy.c) ---- */

static void test_host_id(void **state)
{
    const mca_btl_ofi_host_id_t *self = mca_btl_ofi_host_id_self();
    mca_btl_ofi_host_id_t peer;
    (void) state;

    assert_int_equal(self->pid, (uint32_t) getpid());
    assert_true(self->pid_ns != 0);
    assert_int_equal(strlen(self->boot_id), 36); /* the kernel's UUID */
    assert_ptr_equal(mca_btl_ofi_host_id_self(), self);

    peer = *self;
    peer.pid = 1;
    assert_true(mca_btl_ofi_host_id_shared(self, &peer));
    peer.pid_ns ^= 1; /* another PID namespace: its pid names someone else here */
    assert_false(mca_btl_ofi_host_id_shared(self, &peer));
    peer = *self;
    peer.boot_id[0] = (char) (peer.boot_id[0] == 'a' ? 'b' : 'a'); /* another kernel */
    assert_false(mca_btl_ofi_host_id_shared(self, &peer));
    memset(&peer, 0, sizeof(peer)); /* a peer built before this field: zeros */
    assert_false(mca_btl_ofi_host_id_shared(self, &peer));
    peer = *self;
    peer.pid = 0;
    assert_false(mca_btl_ofi_host_id_shared(self, &peer));
}

static void test_copy_with(void **state)
{
    static char there[1 << 17];
    static char here[1 << 17];
    (void) state;

    for (size_t i = 0; i < sizeof(here); ++i) {
        here[i] = (char) (i * 7 + 1);
    }
    memset(there, 0, sizeof(there));
    /* into "a peer" (ourselves, by pid): every byte, and only those */
    assert_int_equal(mca_btl_ofi_copy_with(getpid(), true, here, (uint64_t) (uintptr_t) (there + 1),
                                           sizeof(here) - 2),
                     0);
    assert_int_equal(there[0], 0);
    assert_memory_equal(there + 1, here, sizeof(here) - 2);
    assert_int_equal(there[sizeof(there) - 1], 0);
    /* and back out of it */
    memset(here, 0, sizeof(here));
    assert_int_equal(mca_btl_ofi_copy_with(getpid(), false, here, (uint64_t) (uintptr_t) there, 8),
                     0);
    assert_memory_equal(here, there, 8);
    assert_int_equal(mca_btl_ofi_copy_with(getpid(), true, here, 0, 0), 0);
    /* the errors the component falls back on */
    assert_int_equal(mca_btl_ofi_copy_with(getpid(), true, here, 8, 8), EFAULT);
    assert_int_equal(mca_btl_ofi_copy_with(0x7ffffff0, true, here, (uint64_t) (uintptr_t) there, 8),
                     ESRCH);
}

/* ---- wake-ups of a peer's progress thread ---- */

static void test_wake_route(void **state)
{
    const uint32_t ip4 = 0x0a000002; /* any non-zero address */
    (void) state;

    /* a peer with no thread (port 0) is never woken, wherever it is */
    assert_int_equal(mca_btl_ofi_wake_route(ip4, 0, true), MCA_BTL_OFI_WAKE_NONE);
    assert_int_equal(mca_btl_ofi_wake_route(ip4, 0, false), MCA_BTL_OFI_WAKE_NONE);
    /* on this node: the loopback address, even when the provider has none (shm) */
    assert_int_equal(mca_btl_ofi_wake_route(0, 4711, true), MCA_BTL_OFI_WAKE_LOOPBACK);
    assert_int_equal(mca_btl_ofi_wake_route(ip4, 4711, true), MCA_BTL_OFI_WAKE_LOOPBACK);
    /* on another node: only at an address its provider named */
    assert_int_equal(mca_btl_ofi_wake_route(ip4, 4711, false), MCA_BTL_OFI_WAKE_REMOTE);
    assert_int_equal(mca_btl_ofi_wake_route(0, 4711, false), MCA_BTL_OFI_WAKE_NONE);
}

static void test_wake_due(void **state)
{
    const int64_t after = 30000; /* 30 us */
    mca_btl_ofi_stall_watch_t w = { 0, 0 };
    int64_t t = 1000, gap = after;
    (void) state;

    /* nothing outstanding: never, and the watch is reset */
    assert_false(mca_btl_ofi_wake_due(&w, t, after, false));
    assert_int_equal(w.since, 0);
    /* the first empty progress starts the watch; due once the wait
     * reaches 'after' */
    assert_false(mca_btl_ofi_wake_due(&w, t, after, true));
    /* while the same wait lasts, each gap is twice the one before, up to
     * the back-off limit */
    for (int i = 0; i < 10; ++i) {
        assert_false(mca_btl_ofi_wake_due(&w, t + gap - 1, after, true));
        assert_true(mca_btl_ofi_wake_due(&w, t + gap, after, true));
        t += gap;
        gap = gap * 2 > after * MCA_BTL_OFI_WAKE_BACKOFF ? after * MCA_BTL_OFI_WAKE_BACKOFF
                                                         : gap * 2;
    }
    assert_int_equal(w.gap, after * MCA_BTL_OFI_WAKE_BACKOFF);
    /* the end of the wait starts over with the first gap */
    assert_false(mca_btl_ofi_wake_due(&w, t + 1, after, false));
    assert_int_equal(w.since, 0);
    assert_false(mca_btl_ofi_wake_due(&w, t + 2, after, true));
    assert_true(mca_btl_ofi_wake_due(&w, t + 2 + after, after, true));
    /* wake-ups off (0) never fire */
    w.since = 0;
    assert_false(mca_btl_ofi_wake_due(&w, 1, 0, true));
    assert_false(mca_btl_ofi_wake_due(&w, 10000000, 0, true));
}

static void test_eager_waits(void **state)
{
    const int64_t after = 30000, answer = MCA_BTL_OFI_EAGER_ANSWER_NS;
    mca_btl_ofi_stall_watch_t w = { 0 };
    int64_t t = 1000;
    (void) state;

    /* no wait has woken anyone: never at once */
    assert_false(mca_btl_ofi_wake_at_once(&w));
    mca_btl_ofi_stall_wait_ended(&w, t, true);
    assert_false(mca_btl_ofi_wake_at_once(&w));
    /* a wake-up answered later than MCA_BTL_OFI_EAGER_ANSWER_NS: the target
     * was slow, not asleep, and the delay stays */
    assert_false(mca_btl_ofi_wake_due(&w, t, after, true));
    assert_true(mca_btl_ofi_wake_due(&w, t + after, after, true));
    w.woke_ns = t + after;
    mca_btl_ofi_stall_wait_ended(&w, t + after + answer + 1, true);
    assert_int_equal(w.since, 0);
    assert_int_equal(w.woke_ns, 0);
    assert_false(mca_btl_ofi_wake_at_once(&w));
    /* answered promptly, in a process that yields: the next
     * MCA_BTL_OFI_EAGER_WAITS waits wake at once, each at its first empty
     * pass only, then none */
    w.woke_ns = t;
    mca_btl_ofi_stall_wait_ended(&w, t + answer, true);
    for (int i = 0; i < MCA_BTL_OFI_EAGER_WAITS; ++i) {
        assert_true(mca_btl_ofi_wake_at_once(&w));
        assert_false(mca_btl_ofi_wake_due(&w, t, after, true));
        assert_false(mca_btl_ofi_wake_at_once(&w));
        mca_btl_ofi_stall_wait_ended(&w, t + 1, true);
    }
    assert_false(mca_btl_ofi_wake_at_once(&w));
    /* a process that does not yield keeps its delay */
    w.woke_ns = t;
    mca_btl_ofi_stall_wait_ended(&w, t + 1, false);
    assert_false(mca_btl_ofi_wake_at_once(&w));
    /* a late answer to a wake-up that went to one target: that target
     * needed it, and the next waits wake at once; to several, they do not */
    w.woke_ns = t;
    w.woke_peers = 2;
    mca_btl_ofi_stall_wait_ended(&w, t + answer + 1, true);
    assert_false(mca_btl_ofi_wake_at_once(&w));
    w.woke_ns = t;
    w.woke_peers = 1;
    mca_btl_ofi_stall_wait_ended(&w, t + answer + 1, true);
    assert_true(mca_btl_ofi_wake_at_once(&w));
    w.woke_ns = t;
    w.woke_peers = 1;
    w.eager = 0;
    mca_btl_ofi_stall_wait_ended(&w, t + answer + 1, false);
    assert_false(mca_btl_ofi_wake_at_once(&w));
}

static void test_stall_read_pacing(void **state)
{
    mca_btl_ofi_stall_watch_t w = { 0 };
    int64_t t = 1000000;
    int passes;
    (void) state;

    /* the first two passes read the clock: the second measures a pass */
    assert_true(mca_btl_ofi_stall_read_due(&w));
    mca_btl_ofi_stall_clock_read(&w, t);
    assert_true(mca_btl_ofi_stall_read_due(&w));
    /* passes of 500 ns: one read per 2 us, every 4 passes */
    t += 500;
    mca_btl_ofi_stall_clock_read(&w, t);
    assert_int_equal(w.per_read, MCA_BTL_OFI_STALL_READ_NS / 500);
    for (passes = 1; !mca_btl_ofi_stall_read_due(&w); ++passes) {
    }
    assert_int_equal(passes, MCA_BTL_OFI_STALL_READ_NS / 500 + 1);
    /* fast passes: no more than MCA_BTL_OFI_STALL_READ_PASSES between reads */
    t += passes * 10;
    mca_btl_ofi_stall_clock_read(&w, t);
    assert_int_equal(w.per_read, MCA_BTL_OFI_STALL_READ_PASSES);
    /* a slow pass (a system call over many sockets): every pass reads */
    for (passes = 1; !mca_btl_ofi_stall_read_due(&w); ++passes) {
    }
    t += (int64_t) passes * 100000;
    mca_btl_ofi_stall_clock_read(&w, t);
    assert_int_equal(w.per_read, 0);
    assert_true(mca_btl_ofi_stall_read_due(&w));
    /* a clock that did not move (or a read with no pass counted) keeps the
     * pace and divides by nothing */
    mca_btl_ofi_stall_clock_read(&w, t);
    mca_btl_ofi_stall_clock_read(&w, t);
    assert_int_equal(w.passes, 0);
}

static void test_wake_after(void **state)
{
    (void) state;

    /* small operations: the parameter alone */
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, 0, 0), 100000);
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, 8, 1), 100008);
    /* a 1 MiB put is not overdue before it could have moved at 1 GB/s:
     * shm's 90 us for it no longer reads as a stall */
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, 1 << 20, 1), 100000 + 1048576);
    assert_true(mca_btl_ofi_wake_after_ns(100, 0, 1 << 20, 1) > 1000000);
    /* below the cap every outstanding byte counts */
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, 8 << 16, 8), 100000 + 524288);
    /* 64 puts of 64 KiB: charged up to the cap, 1 ms, not 4 */
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, 64 << 16, 64), 100000 + 1000000);
    /* 64 puts of 1 MiB: one of them, not 64 ms, so a preempted target is
     * woken */
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, 64 << 20, 64), 100000 + 1048576);
    /* bytes caught without their operations count as one operation */
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, 4 << 20, 0), 100000 + 4194304);
    /* wake-ups off stay off, whatever is outstanding */
    assert_int_equal(mca_btl_ofi_wake_after_ns(0, 0, 1 << 20, 1), 0);
    /* a counter caught mid-update below zero counts as nothing */
    assert_int_equal(mca_btl_ofi_wake_after_ns(100, 0, -4096, 1), 100000);
    /* ranks outnumber the CPUs: never sooner than the floor, and a wait
     * on more bytes than the floor covers keeps its allowance */
    assert_int_equal(mca_btl_ofi_wake_after_ns(200, 2000, 8, 1), 2000000);
    assert_int_equal(mca_btl_ofi_wake_after_ns(200, 2000, 4 << 20, 1), 200000 + 4194304);
    assert_int_equal(mca_btl_ofi_wake_after_ns(200, 2000, 64 << 20, 64), 2000000);
    assert_int_equal(mca_btl_ofi_wake_after_ns(0, 2000, 8, 1), 0);
}

/* ---- the progress thread's period ---- */

static void test_look_after(void **state)
{
    mca_btl_ofi_look_plan_t plan = { .exposed = false, .can_sleep = true, .quiet_ns = 0,
                                     .linger_ns = 10000000, .interval_us = 100,
                                     .sleep_us = 10000, .cpu_calm = true };

    (void) state;
    /* nothing exposed and quiet: no peer can need a look, so no timer */
    plan.quiet_ns = plan.linger_ns;
    assert_int_equal(-1, mca_btl_ofi_look_after_us(&plan));
    plan.quiet_ns = 1000000000;
    assert_int_equal(-1, mca_btl_ofi_look_after_us(&plan));
    /* nothing exposed right after traffic (between two rendezvous
     * messages): a slow timer, so the next exposure need not kick it */
    plan.quiet_ns = plan.linger_ns - 1;
    assert_int_equal(10000, mca_btl_ofi_look_after_us(&plan));
    /* ... where some peer cannot wake it too (its exposures kick it) */
    plan.can_sleep = false;
    assert_int_equal(10000, mca_btl_ofi_look_after_us(&plan));
    plan.can_sleep = true;
    plan.quiet_ns = 1000000000;
    /* a send may wait in the provider: awake, although nothing is exposed
     * (the thread itself stops watching sends after the linger time) */
    plan.sending = true;
    assert_int_equal(100, mca_btl_ofi_look_after_us(&plan));
    /* sends outlived the watch: slow looks until they complete, never none */
    plan.sending = false;
    plan.own_sends = true;
    assert_int_equal(10000, mca_btl_ofi_look_after_us(&plan));
    plan.own_sends = false;
    /* exposed, traffic within the linger time: awake */
    plan.exposed = true;
    plan.quiet_ns = plan.linger_ns - 1;
    assert_int_equal(100, mca_btl_ofi_look_after_us(&plan));
    /* quiet for the whole linger time: asleep */
    plan.quiet_ns = plan.linger_ns;
    assert_int_equal(10000, mca_btl_ofi_look_after_us(&plan));
    /* the backed-off interval counts while awake */
    plan.quiet_ns = 0;
    plan.interval_us = 1600;
    assert_int_equal(1600, mca_btl_ofi_look_after_us(&plan));
    /* a sleep period shorter than the interval never shortens it */
    plan.quiet_ns = plan.linger_ns;
    plan.sleep_us = 500;
    assert_int_equal(1600, mca_btl_ofi_look_after_us(&plan));
    /* traffic, but the last look found the application in every context:
     * a peer that waits on us wakes the thread, so it sleeps long */
    plan.sleep_us = 10000;
    plan.interval_us = 100;
    plan.quiet_ns = 0;
    plan.app_present = true;
    assert_int_equal(MCA_BTL_OFI_PRESENT_LOOK_US, mca_btl_ofi_look_after_us(&plan));
    /* ... never shorter than a longer sleep period */
    plan.sleep_us = 2 * MCA_BTL_OFI_PRESENT_LOOK_US;
    assert_int_equal(2 * MCA_BTL_OFI_PRESENT_LOOK_US, mca_btl_ofi_look_after_us(&plan));
    plan.sleep_us = 10000;
    /* ... and only once the core has been judged: a load that is there
     * from the start must not wait a whole long sleep to be seen */
    plan.cpu_calm = false;
    assert_int_equal(10000, mca_btl_ofi_look_after_us(&plan));
    plan.cpu_calm = true;
    /* ... unless sends of ours were outstanding: no peer can know of them */
    plan.own_sends = true;
    assert_int_equal(100, mca_btl_ofi_look_after_us(&plan));
    plan.own_sends = false;
    /* nobody can wake it: it keeps the awake period however quiet */
    plan.can_sleep = false;
    assert_int_equal(100, mca_btl_ofi_look_after_us(&plan));
    plan.quiet_ns = plan.linger_ns;
    assert_int_equal(100, mca_btl_ofi_look_after_us(&plan));
    /* the application in MPI on a contended core: short looks while
     * traffic is recent, so that its rank gets the core back sooner */
    plan.can_sleep = true;
    plan.contended = true;
    plan.quiet_ns = 0;
    assert_int_equal(MCA_BTL_OFI_CONTENDED_LOOK_US, mca_btl_ofi_look_after_us(&plan));
    /* ... never longer than the sleep period, and asleep once quiet */
    plan.sleep_us = 1000;
    assert_int_equal(1000, mca_btl_ofi_look_after_us(&plan));
    plan.sleep_us = 10000;
    plan.quiet_ns = plan.linger_ns;
    assert_int_equal(10000, mca_btl_ofi_look_after_us(&plan));
    /* the application away: the awake period, contended or not */
    plan.quiet_ns = 0;
    plan.app_present = false;
    assert_int_equal(100, mca_btl_ofi_look_after_us(&plan));
}

static void test_look_is_nudged(void **state)
{
    mca_btl_ofi_look_plan_t plan = { .can_sleep = true, .app_present = true };
    (void) state;

    /* the application in MPI on a core of its own: nobody waits for the look */
    assert_false(mca_btl_ofi_look_is_nudged(&plan));
    /* away: the look may serve a peer */
    plan.app_present = false;
    assert_true(mca_btl_ofi_look_is_nudged(&plan));
    /* present, but behind other work on its core: the wake-up helps it */
    plan.app_present = true;
    plan.contended = true;
    assert_true(mca_btl_ofi_look_is_nudged(&plan));
    /* some peer cannot wake the thread: every look may serve */
    plan.contended = false;
    plan.can_sleep = false;
    assert_true(mca_btl_ofi_look_is_nudged(&plan));
    /* ranks outnumber the CPUs: a late look costs a slice anyway */
    plan.app_present = false;
    plan.crowded = true;
    assert_false(mca_btl_ofi_look_is_nudged(&plan));
}

static void test_crowded_us(void **state)
{
    (void) state;

    /* a CPU per rank: the setting as it is */
    assert_int_equal(mca_btl_ofi_crowded_us(100, 1, 4000), 100);
    /* two ranks a CPU: twice, but never under the floor */
    assert_int_equal(mca_btl_ofi_crowded_us(100, 2, 4000), 4000);
    assert_int_equal(mca_btl_ofi_crowded_us(3000, 2, 4000), 6000);
    /* at most 1 s */
    assert_int_equal(mca_btl_ofi_crowded_us(400000, 16, 4000), 1000000);
    assert_int_equal(mca_btl_ofi_crowded_us(2000000, 1, 4000), 1000000);
}

static void test_cpu_contended(void **state)
{
    const int64_t wall = MCA_BTL_OFI_CONTENDED_SAMPLE_NS;
    (void) state;

    /* idle: about 1 % of the time waiting for a CPU */
    assert_false(mca_btl_ofi_cpu_contended(wall / 100, wall));
    assert_false(mca_btl_ofi_cpu_contended(wall / MCA_BTL_OFI_CONTENDED_SHARE, wall));
    assert_true(mca_btl_ofi_cpu_contended(wall / MCA_BTL_OFI_CONTENDED_SHARE + 1, wall));
    /* beside one CPU-bound process per core: about 70 % */
    assert_true(mca_btl_ofi_cpu_contended(wall * 7 / 10, wall));
    /* no time passed, or a counter that went backwards: not contended */
    assert_false(mca_btl_ofi_cpu_contended(1000, 0));
    assert_false(mca_btl_ofi_cpu_contended(-1000, wall));
}

static void test_modex_carries_wake_address(void **state)
{
    const char *names[] = { "nic-zero" };
    unsigned char buf[512];
    mca_btl_ofi_modex_hdr_t hdr;
    const void *name;
    size_t len, size;
    const char *why;
    (void) state;

    size = build_blob(buf, "tcp;ofi_rxm", 1, names);
    memcpy(&hdr, buf, sizeof(hdr));
    hdr.wake_ip4 = 0x0a000002;
    hdr.wake_port = 4711;
    hdr.wake_net_port = 4712;
    hdr.wake_key = 0x0123456789abcdefull;
    memcpy(buf, &hdr, sizeof(hdr));
    /* the names after the header are found as before */
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "tcp;ofi_rxm", 0, &name, &len, &why), 0);
    assert_memory_equal(name, names[0], len);
    memcpy(&hdr, buf, sizeof(hdr));
    assert_int_equal(hdr.wake_port, 4711);
    assert_int_equal(hdr.wake_net_port, 4712);
    assert_true(hdr.wake_key == 0x0123456789abcdefull);
    /* blobs of the layouts before the wake-up fields and before the wake-up
     * key are refused, not misread */
    hdr.magic = 0x4f464933u;
    memcpy(buf, &hdr, sizeof(hdr));
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "tcp;ofi_rxm", 0, &name, &len, &why), -1);
    hdr.magic = 0x4f464931u;
    memcpy(buf, &hdr, sizeof(hdr));
    assert_int_equal(mca_btl_ofi_modex_parse(buf, size, "tcp;ofi_rxm", 0, &name, &len, &why), -1);
}

static void test_default_eager_limit(void **state)
{
    (void) state;
    /* where eager measured faster than ob1's rendezvous */
    assert_int_equal(mca_btl_ofi_default_eager_limit("sockets", 65536), 65536);
    /* shm's rendezvous read is one copy; rxm has its own rendezvous above
     * its 16 KiB buffers; others stay there too */
    assert_int_equal(mca_btl_ofi_default_eager_limit("shm", 65536), 16384);
    assert_int_equal(mca_btl_ofi_default_eager_limit("tcp;ofi_rxm", 65536), 16384);
    assert_int_equal(mca_btl_ofi_default_eager_limit("net;ofi_rxm", 65536), 16384);
    assert_int_equal(mca_btl_ofi_default_eager_limit("efa", 65536), 16384);
    assert_int_equal(mca_btl_ofi_default_eager_limit(NULL, 65536), 16384);
    /* never above the receive buffer the user chose */
    assert_int_equal(mca_btl_ofi_default_eager_limit("sockets", 8192), 8192);
    assert_int_equal(mca_btl_ofi_default_eager_limit("tcp;ofi_rxm", 8192), 8192);
}

static void test_sockets_buf_size(void **state)
{
    (void) state;
    assert_int_equal(mca_btl_ofi_sockets_buf_size("sockets", NULL), MCA_BTL_OFI_SOCKETS_BUF_SZ);
    /* the user's value stands, and a non-positive one means none */
    assert_int_equal(mca_btl_ofi_sockets_buf_size("sockets", "1048576"), 1048576);
    assert_int_equal(mca_btl_ofi_sockets_buf_size("sockets", "0"), 0);
    assert_int_equal(mca_btl_ofi_sockets_buf_size("sockets", "-5"), 0);
    assert_int_equal(mca_btl_ofi_sockets_buf_size("sockets", "lots"), 0);
    /* nobody else reads it */
    assert_int_equal(mca_btl_ofi_sockets_buf_size("tcp;ofi_rxm", NULL), 0);
    assert_int_equal(mca_btl_ofi_sockets_buf_size("tcp", "1048576"), 0);
    assert_int_equal(mca_btl_ofi_sockets_buf_size(NULL, NULL), 0);
}

static int rcvbuf_of(int fd)
{
    int size = 0;
    socklen_t len = sizeof(size);
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, &len), 0);
    return size;
}

/* Over loopback: the connected socket whose peer is the listener's address
 * takes the size; the listener and the accepted socket keep theirs. */
static void test_widen_sockets_to(void **state)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    int listener, client, accepted, probe, expected, listener_before, accepted_before;
    int size = 1024 * 1024;
    (void) state;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    listener = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(listener >= 0);
    assert_int_equal(bind(listener, (struct sockaddr *) &addr, sizeof(addr)), 0);
    assert_int_equal(listen(listener, 1), 0);
    assert_int_equal(getsockname(listener, (struct sockaddr *) &addr, &len), 0);
    client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(client, (struct sockaddr *) &addr, sizeof(addr)), 0);
    accepted = accept(listener, NULL, NULL);
    assert_true(accepted >= 0);

    /* what the kernel makes of the request (it doubles it, capped by rmem_max) */
    probe = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(setsockopt(probe, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)), 0);
    expected = rcvbuf_of(probe);
    listener_before = rcvbuf_of(listener);
    accepted_before = rcvbuf_of(accepted);

    assert_int_equal(mca_btl_ofi_widen_sockets_to((struct sockaddr *) &addr, sizeof(addr), size),
                     1);
    assert_int_equal(rcvbuf_of(client), expected);
    assert_int_equal(rcvbuf_of(listener), listener_before);
    assert_int_equal(rcvbuf_of(accepted), accepted_before);

    /* nothing is connected to a port nobody listens on */
    close(accepted);
    close(client);
    close(listener);
    close(probe);
    assert_int_equal(mca_btl_ofi_widen_sockets_to((struct sockaddr *) &addr, sizeof(addr), size),
                     0);
}

/* Every cut covers the transfer exactly once, in order, on align. */
static void check_cut(size_t size, int rails, size_t min, size_t align, int expect_chunks)
{
    size_t off[MCA_BTL_OFI_MAX_RAILS], len[MCA_BTL_OFI_MAX_RAILS], next = 0;
    int n = mca_btl_ofi_stripe_cut(size, rails, min, align, off, len);

    assert_int_equal(expect_chunks, n);
    for (int i = 0; i < n; ++i) {
        assert_int_equal(next, off[i]);
        assert_true(len[i] > 0);
        assert_int_equal(0, off[i] % align);
        next += len[i];
    }
    assert_int_equal(size, next);
    for (int i = 1; i + 1 < n; ++i) {
        assert_true(len[i] <= len[0]); /* the larger shares come first */
    }
}

static void test_stripe_cut(void **state)
{
    size_t off[MCA_BTL_OFI_MAX_RAILS], len[MCA_BTL_OFI_MAX_RAILS];

    (void) state;
    check_cut(8, 2, 65536, 64, 1);              /* below the threshold */
    check_cut(65535, 2, 65536, 64, 1);          /* one byte below */
    check_cut(65536, 2, 65536, 64, 2);          /* at it */
    check_cut(65536 + 1, 2, 65536, 64, 2);      /* one byte over: the odd byte goes last */
    check_cut(65536 + 63, 3, 65536, 64, 3);     /* shares of 342/341/341 units */
    check_cut(1 << 24, 4, 65536, 64, 4);        /* 16 MiB on 4 */
    check_cut((1 << 24) - 1, 8, 65536, 64, 8);  /* odd size, 8 rails */
    check_cut(100, 4, 1, 64, 2);                /* only two whole units to give */
    check_cut(64, 4, 1, 64, 1);                 /* one unit: one chunk */
    check_cut(1 << 20, 2, 0, 64, 1);            /* striping off */
    check_cut(1 << 20, 1, 65536, 64, 1);        /* one rail */
    assert_int_equal(2, mca_btl_ofi_stripe_cut(65536 + 1, 2, 65536, 64, off, len));
    assert_int_equal(32768 + 64, len[0]);
    assert_int_equal(32768 - 63, len[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_efa_before_1_12_rejected),
        cmocka_unit_test(test_efa_from_1_12_accepted),
        cmocka_unit_test(test_psm2_accepted),
        cmocka_unit_test(test_legacy_mr_values_rejected),
        cmocka_unit_test(test_software_providers_accepted),
        cmocka_unit_test(test_rxm_needs_delivery_complete),
        cmocka_unit_test(test_missing_delivery_complete_rejected),
        cmocka_unit_test(test_verbs_rxm_with_mr_local_accepted),
        cmocka_unit_test(test_unsupported_shapes_rejected),
        cmocka_unit_test(test_release_versions),
        cmocka_unit_test(test_rxd_per_version),
        cmocka_unit_test(test_rxm_delivery_complete_per_version),
        cmocka_unit_test(test_mr_modes_per_version),
        cmocka_unit_test(test_hints_per_api),
        cmocka_unit_test(test_psm3_over_sockets_rejected),
        cmocka_unit_test(test_efa_rdm_2x),
        cmocka_unit_test(test_efa_direct_2x),
        cmocka_unit_test(test_mr_cache_rule_per_version),
        cmocka_unit_test(test_discovery_rounds),
        cmocka_unit_test(test_ranking),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_clamp),
        cmocka_unit_test(test_progress_mode),
        cmocka_unit_test(test_progress_thread),
        cmocka_unit_test(test_modex_parse),
        cmocka_unit_test(test_modex_provider),
        cmocka_unit_test(test_host_id),
        cmocka_unit_test(test_copy_with),
        cmocka_unit_test(test_wake_route),
        cmocka_unit_test(test_wake_due),
        cmocka_unit_test(test_eager_waits),
        cmocka_unit_test(test_look_is_nudged),
        cmocka_unit_test(test_crowded_us),
        cmocka_unit_test(test_cpu_contended),
        cmocka_unit_test(test_stall_read_pacing),
        cmocka_unit_test(test_wake_after),
        cmocka_unit_test(test_look_after),
        cmocka_unit_test(test_modex_carries_wake_address),
        cmocka_unit_test(test_default_eager_limit),
        cmocka_unit_test(test_sockets_buf_size),
        cmocka_unit_test(test_widen_sockets_to),
        cmocka_unit_test(test_stripe_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
