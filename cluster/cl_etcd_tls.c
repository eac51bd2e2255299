/*
 * cl_etcd: channel credentials for https:// endpoints. The files are read by rpc_tls's
 * reader; unlike the internal gRPC's mutual TLS, each is optional (no CA: the system's;
 * no certificate: an etcd that does not ask for one).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include <grpc/grpc_security.h>

#include "cl_etcd_internal.h"
#include "rpc_tls.h"
#include "zc.h"

/* The whole of a PEM file as a string; NULL and *err on failure (logged). */
static char *
read_pem(const char *what, const char *path, int *err)
{
	char why[RPC_TLS_ERR_MAX], *pem = NULL;

	*err = rpc_tls_read_pem(what, path, &pem, why, sizeof(why));
	if (*err)
		ZC_WARN("etcd", "%s", why);
	return pem;
}

int
cl_etcd_tls_credentials(const struct cl_etcd_opts *opts, grpc_channel_credentials **out)
{
	grpc_ssl_pem_key_cert_pair pair = { NULL, NULL };
	char *ca = NULL, *cert = NULL, *key = NULL;
	int rc = 0;

	*out = NULL;
	if (!opts->cert_file != !opts->key_file)
		return -EINVAL;
	if (opts->ca_file && !(ca = read_pem("CA", opts->ca_file, &rc)))
		goto out;
	if (opts->cert_file && (!(cert = read_pem("certificate", opts->cert_file, &rc)) ||
	                        !(key = read_pem("key", opts->key_file, &rc))))
		goto out;
	pair.private_key = key;
	pair.cert_chain = cert;
	/* gRPC copies the PEM strings */
	*out = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
	if (!*out)
		rc = -EINVAL;
out:
	free(ca);
	free(cert);
	free(key);
	/* a missing or unreadable file is a bad option, said once at create */
	return rc == -ENOMEM ? rc : rc ? -EINVAL : 0;
}
