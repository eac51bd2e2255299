/* rpc_tls_internal.h: the gRPC half of rpc_tls (credentials, the local link's port), for
 * rpc/'s client and server and for tests that speak raw gRPC; and what rpc_tls.c and
 * rpc_unix.c share. rpc_tls.h (PEM files, no gRPC type) is the public half. */
#ifndef ZEST_RPC_TLS_INTERNAL_H
#define ZEST_RPC_TLS_INTERNAL_H

#include <stddef.h>

#include <grpc/grpc_security.h>

#include "rpc_tls.h"

/* Print fmt into err (err_len bytes; either may be 0/NULL) and return rc: a refusal's
 * one-line reason and its -errno in one statement. */
int rpc_tls_fail(char *err, size_t err_len, int rc, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/*
 * gRPC credentials for t (insecure: the insecure ones). Client: the CA verifies the
 * server, the certificate and key are ours. Server: the CA verifies clients, and a client
 * without a certificate it signed is refused at the handshake. The caller releases them
 * (grpc_channel_credentials_release / grpc_server_credentials_release); gRPC copies the
 * PEM texts. Call after grpc_init(). Returns 0 and *out, or what rpc_tls_pem_load returns.
 */
int rpc_tls_channel_creds(const struct rpc_tls *t, grpc_channel_credentials **out, char *err,
                          size_t err_len);
int rpc_tls_server_creds(const struct rpc_tls *t, grpc_server_credentials **out, char *err,
                         size_t err_len);

/* Local credentials for a unix: target; the caller releases them. 0 or -ENOMEM. */
int rpc_unix_channel_creds(grpc_channel_credentials **out);
/*
 * Make server also listen on the socket path (before grpc_server_start, at start-up: it
 * sets the process's umask for a moment). A stale socket file nobody serves is replaced;
 * a live one is -EADDRINUSE. Returns 0, or -EINVAL / -ENAMETOOLONG (over 107 bytes) /
 * -EEXIST (not a socket) / -EADDRINUSE / -EACCES / -ENOMEM with the reason in err.
 */
int rpc_unix_add_port(grpc_server *server, const char *path, char *err, size_t err_len);

#endif
