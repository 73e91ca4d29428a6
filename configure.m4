# -*- shell-script -*-
#
# Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
# $COPYRIGHT$
#
# $HEADER$
#

# MCA_opal_btl_ofi_CONFIG([action-if-can-compile], [action-if-cant-compile])
# ---------------------------------------------------------------------------
# Build when libfabric is found and is at least API 1.9 with the
# delivery-complete and memory-registration mode bits this BTL relies on.
AC_DEFUN([MCA_opal_btl_ofi_CONFIG],[
    OPAL_VAR_SCOPE_PUSH([btl_ofi_usable btl_ofi_saved_CPPFLAGS])
    AC_CONFIG_FILES([opal/mca/btl/ofi/Makefile])

    OPAL_CHECK_OFI([btl_ofi], [btl_ofi_usable=yes], [btl_ofi_usable=no])

    AS_IF([test "$btl_ofi_usable" = "yes"],
          [btl_ofi_saved_CPPFLAGS=$CPPFLAGS
           OPAL_FLAGS_APPEND_UNIQ([CPPFLAGS], [$btl_ofi_CPPFLAGS])
           AC_MSG_CHECKING([whether libfabric offers the API btl/ofi needs])
           AC_COMPILE_IFELSE(
               [AC_LANG_PROGRAM([[#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#if FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 9))
#error libfabric older than 1.9
#endif]],
                                [[uint64_t needed = FI_DELIVERY_COMPLETE | FI_MR_VIRT_ADDR | FI_MR_ENDPOINT;
                                  (void) needed;]])],
               [AC_MSG_RESULT([yes])],
               [AC_MSG_RESULT([no])
                btl_ofi_usable=no])
           CPPFLAGS=$btl_ofi_saved_CPPFLAGS])

    AS_IF([test "$btl_ofi_usable" = "yes"],
          [OPAL_MCA_CHECK_DEPENDENCY([opal], [btl], [ofi], [opal], [common], [ofi])])

    AS_IF([test "$btl_ofi_usable" = "yes"],
          [$1],
          [AS_IF([test -n "$with_ofi" && test "$with_ofi" != "no"],
                 [AC_MSG_WARN([libfabric was requested with --with-ofi but btl/ofi cannot use it])
                  AC_MSG_ERROR([Cannot continue])])
           $2])

    AC_SUBST([btl_ofi_CPPFLAGS])
    AC_SUBST([btl_ofi_LDFLAGS])
    AC_SUBST([btl_ofi_LIBS])
    OPAL_VAR_SCOPE_POP
])dnl
