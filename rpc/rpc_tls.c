/*
 * rpc_tls: PEM loading and checking, and the gRPC credentials built from them.
 *
 * gRPC itself only notices a bad certificate or a mismatched key when the first
 * handshake fails, long after start-up and far from the flag that caused it; so the
 * files are parsed and checked here with OpenSSL (the library gRPC uses on Debian), and
 * a daemon refuses to start with the file's name in the message.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

#include "rpc_tls.h"
#include "rpc_tls_internal.h"

#define PEM_MAX (1u << 20) /* a certificate bundle larger than this is not one */

int
rpc_tls_fail(char *err, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* The last OpenSSL error's reason, and the queue cleared for the next check. */
static const char *
openssl_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r ? r : "malformed";
}

int
rpc_tls_read_pem(const char *what, const char *path, char **out, char *err, size_t len)
{
	struct stat st;
	FILE *f;
	char *buf;
	size_t n;
	int rc;

	f = fopen(path, "rb");
	if (!f) {
		rc = -errno;
		return rpc_tls_fail(err, len, rc, "%s %s: %s", what, path, strerror(-rc));
	}
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size > PEM_MAX) {
		fclose(f);
		return rpc_tls_fail(err, len, -EINVAL, "%s %s: not a regular file of at most 1 MiB",
		                    what, path);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		fclose(f);
		return rpc_tls_fail(err, len, -ENOMEM, "%s %s: out of memory", what, path);
	}
	n = fread(buf, 1, (size_t)st.st_size, f);
	fclose(f);
	if (n != (size_t)st.st_size || memchr(buf, 0, n)) {
		free(buf);
		return rpc_tls_fail(err, len, -EINVAL, "%s %s: cannot read it as PEM text", what,
		                    path);
	}
	buf[n] = 0;
	*out = buf;
	return 0;
}

/* Every certificate in text, or NULL with err set (none, a broken one, no memory). */
static STACK_OF(X509) *
        parse_certs(const char *text, const char *what, const char *path, char *err, size_t len)
{
	STACK_OF(X509) *sk = sk_X509_new_null();
	BIO *bio = BIO_new_mem_buf(text, -1);
	X509 *x;

	if (!sk || !bio)
		goto fail;
	ERR_clear_error();
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
		if (!sk_X509_push(sk, x)) {
			X509_free(x);
			goto fail;
		}
	/* the loop ends at the end of the text (no start line) or at a broken certificate */
	if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE || sk_X509_num(sk) == 0) {
		rpc_tls_fail(err, len, -EINVAL, "%s %s: %s", what, path,
		             sk_X509_num(sk) ? openssl_reason() : "no PEM certificate in it");
		goto fail;
	}
	ERR_clear_error();
	BIO_free(bio);
	return sk;
fail:
	if (!err[0])
		rpc_tls_fail(err, len, -ENOMEM, "%s %s: out of memory", what, path);
	BIO_free(bio);
	sk_X509_pop_free(sk, X509_free);
	return NULL;
}

/* The key matches the first certificate, which chains to the CA and is valid now. */
static int
check_pem(const struct rpc_tls *t, const struct rpc_tls_pem *pem, char *err, size_t len)
{
	STACK_OF(X509) *ca = NULL, *chain = NULL;
	X509_STORE *store = NULL;
	X509_STORE_CTX *ctx = NULL;
	EVP_PKEY *key = NULL;
	BIO *bio = NULL;
	int rc = -EINVAL;

	err[0] = 0;
	ca = parse_certs(pem->ca, "CA", t->ca_file, err, len);
	if (!ca)
		goto out;
	chain = parse_certs(pem->cert, "certificate", t->cert_file, err, len);
	if (!chain)
		goto out;
	bio = BIO_new_mem_buf(pem->key, -1);
	key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	if (!key) {
		rpc_tls_fail(err, len, rc, "key %s: %s", t->key_file, openssl_reason());
		goto out;
	}
	if (X509_check_private_key(sk_X509_value(chain, 0), key) != 1) {
		ERR_clear_error();
		rpc_tls_fail(err, len, rc, "key %s does not belong to certificate %s", t->key_file,
		             t->cert_file);
		goto out;
	}
	store = X509_STORE_new();
	ctx = X509_STORE_CTX_new();
	if (!store || !ctx) {
		rc = rpc_tls_fail(err, len, -ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < sk_X509_num(ca); i++)
		X509_STORE_add_cert(store, sk_X509_value(ca, i));
	if (X509_STORE_CTX_init(ctx, store, sk_X509_value(chain, 0), chain) != 1 ||
	    X509_verify_cert(ctx) != 1) {
		rpc_tls_fail(err, len, rc, "certificate %s is not valid under CA %s: %s",
		             t->cert_file, t->ca_file,
		             X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
		ERR_clear_error();
		goto out;
	}
	rc = 0;
out:
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	EVP_PKEY_free(key);
	BIO_free(bio);
	sk_X509_pop_free(chain, X509_free);
	sk_X509_pop_free(ca, X509_free);
	return rc;
}

int
rpc_tls_pem_load(const struct rpc_tls *t, struct rpc_tls_pem *pem, char *err, size_t len)
{
	char own[RPC_TLS_ERR_MAX];
	int rc;

	if (!err || !len) {
		err = own;
		len = sizeof(own);
	}
	memset(pem, 0, sizeof(*pem));
	if (!t)
		return rpc_tls_fail(err, len, -EINVAL, "no TLS settings");
	if (t->insecure) {
		if (t->ca_file || t->cert_file || t->key_file)
			return rpc_tls_fail(
			        err, len, -EINVAL,
			        "insecure (plaintext) and TLS files exclude each other");
		return 0;
	}
	if (!t->ca_file || !t->cert_file || !t->key_file)
		return rpc_tls_fail(
		        err, len, -EINVAL,
		        "TLS needs a CA, a certificate and its key (or plaintext asked for "
		        "explicitly); missing:%s%s%s",
		        t->ca_file ? "" : " CA", t->cert_file ? "" : " certificate",
		        t->key_file ? "" : " key");
	rc = rpc_tls_read_pem("CA", t->ca_file, &pem->ca, err, len);
	if (!rc)
		rc = rpc_tls_read_pem("certificate", t->cert_file, &pem->cert, err, len);
	if (!rc)
		rc = rpc_tls_read_pem("key", t->key_file, &pem->key, err, len);
	if (!rc)
		rc = check_pem(t, pem, err, len);
	if (rc)
		rpc_tls_pem_fini(pem);
	return rc;
}

void
rpc_tls_pem_fini(struct rpc_tls_pem *pem)
{
	free(pem->ca);
	free(pem->cert);
	if (pem->key) /* a private key does not linger in freed heap */
		OPENSSL_cleanse(pem->key, strlen(pem->key));
	free(pem->key);
	memset(pem, 0, sizeof(*pem));
}

int
rpc_tls_check(const struct rpc_tls *t, char *err, size_t len)
{
	struct rpc_tls_pem pem;
	int rc = rpc_tls_pem_load(t, &pem, err, len);

	rpc_tls_pem_fini(&pem);
	return rc;
}

int
rpc_tls_cert_names(const struct rpc_tls *t, const char *name, char *err, size_t len)
{
	char own[RPC_TLS_ERR_MAX], *text = NULL, have[256] = "";
	GENERAL_NAMES *sans = NULL;
	BIO *bio = NULL;
	X509 *x = NULL;
	size_t hl = 0;
	int rc;

	if (!err || !len) {
		err = own;
		len = sizeof(own);
	}
	if (!t || t->insecure || !t->cert_file || !name || !name[0])
		return rpc_tls_fail(err, len, -EINVAL, "no certificate to name \"%s\"",
		                    name ? name : "");
	rc = rpc_tls_read_pem("certificate", t->cert_file, &text, err, len);
	if (rc)
		return rc;
	rc = -EINVAL;
	bio = BIO_new_mem_buf(text, -1);
	x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	if (!x) {
		rpc_tls_fail(err, len, rc, "certificate %s: %s", t->cert_file, openssl_reason());
		goto out;
	}
	sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	for (int i = 0; i < sk_GENERAL_NAME_num(sans); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		const unsigned char *d;
		int n;

		if (g->type != GEN_DNS)
			continue;
		d = ASN1_STRING_get0_data(g->d.dNSName);
		n = ASN1_STRING_length(g->d.dNSName);
		/* exact length: a DNS entry with a NUL inside names nothing */
		if (n == (int)strlen(name) && !memchr(d, 0, (size_t)n) &&
		    strncasecmp((const char *)d, name, (size_t)n) == 0) {
			rc = 0;
			goto out;
		}
		if (hl < sizeof(have))
			hl += (size_t)snprintf(have + hl, sizeof(have) - hl, "%s%.*s",
			                       hl ? "," : "", n, (const char *)d);
	}
	rpc_tls_fail(err, len, rc,
	             "certificate %s does not name node \"%s\" (its subjectAltName DNS "
	             "entries: %s)",
	             t->cert_file, name, hl ? have : "none");
out:
	GENERAL_NAMES_free(sans);
	X509_free(x);
	BIO_free(bio);
	ERR_clear_error();
	free(text);
	return rc;
}

int
rpc_tls_channel_creds(const struct rpc_tls *t, grpc_channel_credentials **out, char *err,
                      size_t len)
{
	struct rpc_tls_pem pem;
	grpc_ssl_pem_key_cert_pair pair;
	int rc = rpc_tls_pem_load(t, &pem, err, len);

	if (rc)
		return rc;
	if (t->insecure) {
		*out = grpc_insecure_credentials_create();
	} else {
		pair.private_key = pem.key;
		pair.cert_chain = pem.cert;
		/* verify_options NULL: gRPC checks the chain against our CA and the target's
		 * name against the certificate's subjectAltName (DNS or IP) */
		*out = grpc_ssl_credentials_create(pem.ca, &pair, NULL, NULL);
	}
	rpc_tls_pem_fini(&pem);
	return *out ? 0 : rpc_tls_fail(err, len, -ENOMEM, "gRPC refused the credentials");
}

int
rpc_tls_server_creds(const struct rpc_tls *t, grpc_server_credentials **out, char *err, size_t len)
{
	struct rpc_tls_pem pem;
	grpc_ssl_pem_key_cert_pair pair;
	int rc = rpc_tls_pem_load(t, &pem, err, len);

	if (rc)
		return rc;
	if (t->insecure) {
		*out = grpc_insecure_server_credentials_create();
	} else {
		pair.private_key = pem.key;
		pair.cert_chain = pem.cert;
		*out = grpc_ssl_server_credentials_create_ex(
		        pem.ca, &pair, 1,
		        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
	}
	rpc_tls_pem_fini(&pem);
	return *out ? 0 : rpc_tls_fail(err, len, -ENOMEM, "gRPC refused the credentials");
}
