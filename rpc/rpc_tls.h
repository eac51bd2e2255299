/*
 * rpc_tls: mutual TLS for zest's internal gRPC (gateway <-> datanode, later datanode <->
 * datanode and the etcd client). Part of rpc's public face (rpc.h includes it); a module
 * that only needs credentials (an etcd client) may include it alone.
 *
 * One trust domain: a cluster CA signs every daemon's certificate. A server demands a
 * client certificate signed by that CA at the handshake; a client checks the server's
 * certificate against the same CA and the target's host name or IP (subjectAltName).
 * Plaintext is only ever what the caller asked for (insecure = true): an rpc_tls with
 * neither files nor insecure is an error, so a lost flag cannot quietly drop security.
 *
 * PEM files are read and checked when credentials are made (at start-up): a missing,
 * unreadable or malformed file, a key that does not match its certificate, or a
 * certificate the CA did not sign is an error with a message naming the file.
 *
 * Threading: none of these functions keeps state; any thread (rpc_unix_add_port: at
 * start-up).
 */
#ifndef ZEST_RPC_TLS_H
#define ZEST_RPC_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct rpc_tls {
	const char *ca_file;   /* PEM: the cluster CA (one or more certificates) */
	const char *cert_file; /* PEM: this process's certificate, then any intermediates */
	const char *key_file;  /* PEM: its private key */
	bool insecure;         /* plaintext, no authentication; the three files must be NULL */
};

/* The PEM texts of an rpc_tls (NUL-terminated heap strings; NULL when insecure). */
struct rpc_tls_pem {
	char *ca, *cert, *key;
};

#define RPC_TLS_ERR_MAX 512

/*
 * Read and check t's files into pem (rpc_tls_pem_fini releases it). Checks: either
 * insecure or all three files; each parses; the key matches the certificate; the
 * certificate chains to the CA and is valid now. Returns 0, or -EINVAL / -ENOENT /
 * -EACCES / -ENOMEM with a one-line reason naming the file in err (err_len bytes).
 */
int rpc_tls_pem_load(const struct rpc_tls *t, struct rpc_tls_pem *pem, char *err, size_t err_len);
void rpc_tls_pem_fini(struct rpc_tls_pem *pem);

/* Read the PEM file path (what names it in err: "CA", "certificate", ...) into *out, a
 * NUL-terminated heap string (free() it): 0, or -errno with a one-line reason in err. Also
 * the etcd client's reader for its https:// files. */
int rpc_tls_read_pem(const char *what, const char *path, char **out, char *err, size_t err_len);

/* rpc_tls_pem_load, then free: a daemon's start-up check of its flags. Same returns. */
int rpc_tls_check(const struct rpc_tls *t, char *err, size_t err_len);

/*
 * Whether the first certificate in t's cert_file names `name`: a subjectAltName DNS
 * entry equal to it, ASCII case ignored (what gRPC's check matches a client's expected
 * name against, rpc_chan_opts.peer_name). A cluster node's identity: a datanode refuses
 * to start with a certificate that does not name its --node. Returns 0, -EINVAL (it does
 * not, or t is insecure; err lists the DNS names it has) or rpc_tls_read_pem's errors.
 */
int rpc_tls_cert_names(const struct rpc_tls *t, const char *name, char *err, size_t err_len);

/*
 * rpc_tls_probe.c: does a gRPC server at an address show a certificate of our CA that
 * names a given node? One mTLS connection (TCP, TLS handshake with our certificate, the
 * server's checked against the CA and `name` as rpc_tls_cert_names reads it), no call;
 * the channel is closed after. For the membership view (cluster/cl_members.h): a node
 * counts as live only once a probe of its registration succeeded.
 *
 * A prober owns one completion-queue thread on which every probe's callback runs; probes
 * run side by side, each bounded by the prober's timeout. Threading: create/destroy from
 * one thread; rpc_tls_probe from any thread, callbacks included.
 */
struct rpc_tls_prober;
/* ok: connected with the name check passed; false: refused, unreachable, a certificate
 * of another CA or naming another node, or the timeout passed (gRPC logs the handshake's
 * reason). */
typedef void (*rpc_tls_probe_cb)(void *arg, bool ok);

/* t (not insecure) is read now; timeout_ms 0: 5000. 0 and *out, or what
 * rpc_tls_pem_load returns (the reason in err), -ENOMEM, -EAGAIN (no thread). */
int rpc_tls_prober_create(const struct rpc_tls *t, unsigned timeout_ms, struct rpc_tls_prober **out,
                          char *err, size_t err_len);
/* Start one probe of address (host:port) for name (both copied): cb(arg, ok) follows
 * exactly once on the prober's thread. 0, -ENOMEM, -ECANCELED (being destroyed). */
int rpc_tls_probe(struct rpc_tls_prober *p, const char *address, const char *name,
                  rpc_tls_probe_cb cb, void *arg);
/* Wait for the probes in flight (their callbacks run; at most the timeout), then free.
 * NULL: no-op. */
void rpc_tls_prober_destroy(struct rpc_tls_prober *p);

/*
 * The local link (rpc_unix.c): gRPC over a Unix socket, for a gateway on the datanode's
 * host. The kernel authenticates instead of TLS: the socket file is private to the
 * server's user (mode 0700, made under umask 077), so only that user and root connect,
 * and gRPC's local credentials refuse anything but a Unix socket.
 */
/* addr is a "unix:PATH" target (PATH relative or absolute). */
bool rpc_unix_is_target(const char *addr);
#endif
