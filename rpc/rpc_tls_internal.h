/* rpc_tls_internal.h: what rpc_tls.c and rpc_unix.c share (the zest_rpc_tls library). */
#ifndef ZEST_RPC_TLS_INTERNAL_H
#define ZEST_RPC_TLS_INTERNAL_H

#include <stddef.h>

/* Print fmt into err (err_len bytes; either may be 0/NULL) and return rc: a refusal's
 * one-line reason and its -errno in one statement. */
int rpc_tls_fail(char *err, size_t err_len, int rc, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

#endif
