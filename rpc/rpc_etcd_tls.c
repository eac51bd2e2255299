/*
 * rpc_etcd: channel credentials for https:// endpoints. Kept apart so that it can move
 * onto rpc/rpc_tls.c (the shared PEM and credential helpers) once that lands.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include <grpc/grpc_security.h>

#include "rpc_etcd_internal.h"
#include "zc.h"

/* The whole of a PEM file as a string; NULL and *err on failure. */
static char *
read_pem(const char *path, int *err)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		*err = -errno;
		ZC_WARN("etcd", "file=%s cannot open: %s", path, strerror(errno));
		return NULL;
	}
	do {
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap + 65536);

			if (!nb) {
				free(buf);
				fclose(f);
				*err = -ENOMEM;
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

int
etcd_tls_credentials(const struct rpc_etcd_opts *opts, grpc_channel_credentials **out)
{
	grpc_ssl_pem_key_cert_pair pair = { NULL, NULL };
	char *ca = NULL, *cert = NULL, *key = NULL;
	int rc = 0;

	*out = NULL;
	if (!opts->cert_file != !opts->key_file)
		return -EINVAL;
	if (opts->ca_file && !(ca = read_pem(opts->ca_file, &rc)))
		goto out;
	if (opts->cert_file &&
	    (!(cert = read_pem(opts->cert_file, &rc)) || !(key = read_pem(opts->key_file, &rc))))
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
