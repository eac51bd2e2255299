/*
 * s3_sigv4: AWS Signature Version 4 for S3, verified on the gateway.
 *
 * Canonical URI: S3 signs the path encoded once. We decode the path as received and encode
 * it again with the SigV4 rules ('/' kept), which is what every SDK signs whether it sent
 * '(' or '%28'; only if that fails do we try the raw path as sent (clients such as curl
 * sign the URL they were given verbatim). Query: every name and value decoded and
 * re-encoded strictly ('/' too), pairs sorted by name then value.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "s3_sig_internal.h"

#define SKEW_SEC     (15 * 60)
#define MAX_EXPIRES  604800
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static void
hmac(const void *key, size_t klen, const void *msg, size_t n, uint8_t out[32])
{
	unsigned int len = 32;

	HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &len);
}

void
s3_sigv4_key(const char *secret, const char *date8, const char *region, const char *service,
             uint8_t out[32])
{
	char k0[256];
	uint8_t a[32], b[32];
	int n = snprintf(k0, sizeof(k0), "AWS4%s", secret);

	if (n < 0 || (size_t)n >= sizeof(k0))
		n = sizeof(k0) - 1;
	hmac(k0, (size_t)n, date8, strlen(date8), a);
	hmac(a, 32, region, strlen(region), b);
	hmac(b, 32, service, strlen(service), a);
	hmac(a, 32, "aws4_request", 12, out);
	OPENSSL_cleanse(k0, sizeof(k0));
}

void
s3_sigv4_sign(const uint8_t key[32], const char *sts, size_t n, char out[65])
{
	uint8_t mac[32];

	hmac(key, 32, sts, n, mac);
	s3_hex(mac, 32, out);
}

static void
sha256_hex(const void *p, size_t n, char out[65])
{
	uint8_t d[32];

	SHA256(p, n, d);
	s3_hex(d, 32, out);
}

/* ------------------------------------------------------------ canonical request */

struct qpair {
	char *name, *val; /* encoded canonically, NUL-terminated */
};

static int
qpair_cmp(const void *a, const void *b)
{
	const struct qpair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->val, y->val);
}

static char *
reencode(const char *s, size_t n, int *err)
{
	char *dec = malloc(n + 1);
	struct s3_buf b;
	int len;

	if (!dec) {
		*err = -ENOMEM;
		return NULL;
	}
	len = s3_uri_decode(s, n, dec, n + 1, false);
	if (len < 0) {
		free(dec);
		*err = -EINVAL;
		return NULL;
	}
	s3_buf_init(&b, 4 * n + 16);
	s3_buf_add_uri(&b, dec, (size_t)len, false);
	free(dec);
	if (b.err) {
		*err = b.err;
		s3_buf_fini(&b);
		return NULL;
	}
	if (!b.p)
		return strdup("");
	return b.p; /* the buffer's memory becomes the caller's */
}

static int
canonical_query(const char *q, size_t qn, bool presigned, struct s3_buf *out)
{
	struct qpair *pairs = NULL;
	size_t n = 0, cap = 0;
	int err = 0;
	size_t i = 0;

	while (i < qn) {
		size_t j = i, eq;

		while (j < qn && q[j] != '&')
			j++;
		if (j > i) {
			eq = i;
			while (eq < j && q[eq] != '=')
				eq++;
			if (presigned && eq - i == 15 && memcmp(q + i, "X-Amz-Signature", 15) == 0)
				goto next;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				void *p;

				if (nc > 1024) {
					err = -EMSGSIZE;
					goto out;
				}
				p = realloc(pairs, nc * sizeof(*pairs));
				if (!p) {
					err = -ENOMEM;
					goto out;
				}
				pairs = p;
				cap = nc;
			}
			pairs[n].name = reencode(q + i, eq - i, &err);
			pairs[n].val = eq < j ? reencode(q + eq + 1, j - eq - 1, &err) : strdup("");
			if (!pairs[n].name || !pairs[n].val) {
				free(pairs[n].name);
				free(pairs[n].val);
				if (!err)
					err = -ENOMEM;
				goto out;
			}
			n++;
		}
next:
		i = j + 1;
	}
	if (n)
		qsort(pairs, n, sizeof(*pairs), qpair_cmp);
	for (size_t k = 0; k < n; k++) {
		if (k)
			s3_buf_add(out, "&", 1);
		s3_buf_adds(out, pairs[k].name);
		s3_buf_add(out, "=", 1);
		s3_buf_adds(out, pairs[k].val);
	}
out:
	for (size_t k = 0; k < n; k++) {
		free(pairs[k].name);
		free(pairs[k].val);
	}
	free(pairs);
	return err;
}

/* Append "value" trimmed with inner runs of spaces collapsed. */
static void
add_header_value(struct s3_buf *out, const char *v, size_t n)
{
	size_t i = 0;
	bool space = false;

	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	while (i < n && (v[i] == ' ' || v[i] == '\t'))
		i++;
	for (; i < n; i++) {
		if (v[i] == ' ' || v[i] == '\t') {
			space = true;
			continue;
		}
		if (space)
			s3_buf_add(out, " ", 1);
		space = false;
		s3_buf_add(out, v + i, 1);
	}
}

static int
canonical_uri(const struct s3_http_req *req, bool raw, struct s3_buf *out)
{
	char *dec;
	int len;

	if (req->path_len == 0)
		return s3_buf_add(out, "/", 1);
	if (raw)
		return s3_buf_add(out, req->path, req->path_len);
	dec = malloc(req->path_len + 1);
	if (!dec)
		return -ENOMEM;
	len = s3_uri_decode(req->path, req->path_len, dec, req->path_len + 1, false);
	if (len < 0) {
		free(dec);
		return -EINVAL;
	}
	s3_buf_add_uri(out, dec, (size_t)len, true);
	free(dec);
	return out->err;
}

/* raw_uri: bit 0 the path as sent, bit 1 the query as sent (fallbacks, see top). */
static int
canonical_build(const struct s3_http_req *req, const char *sh, size_t sh_len,
                const char *payload_hash, bool presigned, int raw_uri, struct s3_buf *out)
{
	size_t i = 0;
	int rc;

	s3_buf_add(out, req->method, req->method_len);
	s3_buf_add(out, "\n", 1);
	rc = canonical_uri(req, raw_uri & 1, out);
	if (rc)
		return rc;
	s3_buf_add(out, "\n", 1);
	if (raw_uri & 2) /* the query exactly as sent (curl 7.x signs it unsorted) */
		rc = s3_buf_add(out, req->query, req->query_len);
	else
		rc = canonical_query(req->query, req->query_len, presigned, out);
	if (rc)
		return rc;
	s3_buf_add(out, "\n", 1);
	while (i < sh_len) {
		size_t j = i;
		bool found = false;

		while (j < sh_len && sh[j] != ';')
			j++;
		if (j == i)
			return -EINVAL;
		s3_buf_add(out, sh + i, j - i);
		s3_buf_add(out, ":", 1);
		for (unsigned h = 0; h < req->nhdr; h++) {
			const struct s3_hdr *hd = &req->hdr[h];

			if (hd->name_len != j - i || strncasecmp(hd->name, sh + i, j - i) != 0)
				continue;
			if (found)
				s3_buf_add(out, ",", 1);
			add_header_value(out, hd->val, hd->val_len);
			found = true;
		}
		if (!found)
			return -EINVAL;
		s3_buf_add(out, "\n", 1);
		i = j + 1;
	}
	s3_buf_add(out, "\n", 1);
	s3_buf_add(out, sh, sh_len);
	s3_buf_add(out, "\n", 1);
	s3_buf_adds(out, payload_hash);
	return out->err;
}

int
s3_sigv4_canonical(const struct s3_http_req *req, const char *signed_headers, size_t sh_len,
                   const char *payload_hash, bool presigned, struct s3_buf *out)
{
	return canonical_build(req, signed_headers, sh_len, payload_hash, presigned, false, out);
}

/* ------------------------------------------------------------ verification */

struct authparts {
	const char *cred, *sh, *sig;
	size_t cred_len, sh_len, sig_len;
};

static const char *
query_param(const struct s3_http_req *req, const char *name, size_t *len)
{
	size_t nl = strlen(name), i = 0;

	while (i < req->query_len) {
		size_t j = i;

		while (j < req->query_len && req->query[j] != '&')
			j++;
		if (j - i > nl && req->query[i + nl] == '=' &&
		    memcmp(req->query + i, name, nl) == 0) {
			*len = j - i - nl - 1;
			return req->query + i + nl + 1;
		}
		i = j + 1;
	}
	return NULL;
}

static int
parse_auth_header(const char *v, size_t n, struct authparts *ap)
{
	static const char alg[] = "AWS4-HMAC-SHA256";
	size_t i = sizeof(alg) - 1;

	memset(ap, 0, sizeof(*ap));
	if (n < i || memcmp(v, alg, i) != 0 || (n > i && v[i] != ' '))
		return -EINVAL;
	while (i < n) {
		size_t j, eq;

		while (i < n && (v[i] == ' ' || v[i] == ','))
			i++;
		j = i;
		while (j < n && v[j] != ',')
			j++;
		eq = i;
		while (eq < j && v[eq] != '=')
			eq++;
		if (eq == j)
			return i == j ? 0 : -EINVAL;
		size_t kl = eq - i, vl = j - eq - 1;
		const char *val = v + eq + 1;

		while (vl && val[vl - 1] == ' ')
			vl--;
		if (kl == 10 && memcmp(v + i, "Credential", 10) == 0) {
			ap->cred = val;
			ap->cred_len = vl;
		} else if (kl == 13 && memcmp(v + i, "SignedHeaders", 13) == 0) {
			ap->sh = val;
			ap->sh_len = vl;
		} else if (kl == 9 && memcmp(v + i, "Signature", 9) == 0) {
			ap->sig = val;
			ap->sig_len = vl;
		}
		i = j;
	}
	return ap->cred && ap->sh && ap->sig ? 0 : -EINVAL;
}

/* "20130524T000000Z" -> epoch seconds, or -1. */
static time_t
parse_amz_date(const char *s, size_t n)
{
	struct tm tm = { 0 };

	if (n != 16 || s[8] != 'T' || s[15] != 'Z')
		return -1;
	for (int i = 0; i < 15; i++)
		if (i != 8 && !isdigit((unsigned char)s[i]))
			return -1;
	tm.tm_year =
	        (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + s[3] - '0' - 1900;
	tm.tm_mon = (s[4] - '0') * 10 + s[5] - '0' - 1;
	tm.tm_mday = (s[6] - '0') * 10 + s[7] - '0';
	tm.tm_hour = (s[9] - '0') * 10 + s[10] - '0';
	tm.tm_min = (s[11] - '0') * 10 + s[12] - '0';
	tm.tm_sec = (s[13] - '0') * 10 + s[14] - '0';
	if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
	    tm.tm_min > 59 || tm.tm_sec > 60)
		return -1;
	return timegm(&tm);
}

/* True when the ';'-separated list sh names the header name[0..n). */
static bool
sh_has(const char *sh, size_t sh_len, const char *name, size_t n)
{
	size_t i = 0;

	while (i < sh_len) {
		size_t j = i;

		while (j < sh_len && sh[j] != ';')
			j++;
		if (j - i == n && strncasecmp(sh + i, name, n) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

/*
 * AWS refuses a request whose host or x-amz-* headers (and the Date it takes the time
 * from) are not all signed: otherwise anyone on the path could add x-amz-meta-*,
 * x-amz-copy-source or a checksum to a signed request. Every SDK signs them: botocore
 * all but expect, transfer-encoding, user-agent and x-amzn-trace-id; minio-go all but
 * authorization, user-agent and accept-encoding (older releases also skip content-type
 * and content-length); curl --aws-sigv4 host, x-amz-date and each header it is given.
 */
static bool
headers_signed(const struct s3_http_req *req, const char *sh, size_t sh_len, bool date)
{
	for (unsigned h = 0; h < req->nhdr; h++) {
		const struct s3_hdr *hd = &req->hdr[h];
		bool must = (hd->name_len == 4 && strncasecmp(hd->name, "host", 4) == 0) ||
		            (hd->name_len > 6 && strncasecmp(hd->name, "x-amz-", 6) == 0) ||
		            (date && hd->name_len == 4 && strncasecmp(hd->name, "date", 4) == 0);

		if (must && !sh_has(sh, sh_len, hd->name, hd->name_len))
			return false;
	}
	return true;
}

#define NOT_SIGNED_MSG "There were headers present in the request which were not signed"

static bool
hexdigest(const char *s, size_t n, uint8_t out[32])
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < 32; i++) {
		int v = 0;

		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];

			v <<= 4;
			if (c >= '0' && c <= '9')
				v |= c - '0';
			else if (c >= 'a' && c <= 'f')
				v |= c - 'a' + 10;
			else if (c >= 'A' && c <= 'F')
				v |= c - 'A' + 10;
			else
				return false;
		}
		out[i] = (uint8_t)v;
	}
	return true;
}

static enum s3_err
payload_mode(const struct s3_hdr *h, struct s3_auth *auth)
{
	static const struct {
		const char *s;
		enum s3_payload m;
	} modes[] = {
		{ "UNSIGNED-PAYLOAD", S3_PAYLOAD_UNSIGNED },
		{ "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", S3_PAYLOAD_STREAMING },
		{ "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", S3_PAYLOAD_STREAMING_TRAILER },
		{ "STREAMING-UNSIGNED-PAYLOAD-TRAILER", S3_PAYLOAD_UNSIGNED_TRAILER },
	};

	if (!h) {
		auth->payload = S3_PAYLOAD_UNSIGNED;
		return S3_OK;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (h->val_len == strlen(modes[i].s) &&
		    memcmp(h->val, modes[i].s, h->val_len) == 0) {
			auth->payload = modes[i].m;
			return S3_OK;
		}
	if (!hexdigest(h->val, h->val_len, auth->payload_sha256))
		return S3E_INVALID_ARGUMENT;
	auth->payload = S3_PAYLOAD_HASH;
	return S3_OK;
}

/* Check one credential "AK/20130524/us-east-1/s3/aws4_request"; fills auth->scope. */
static enum s3_err
check_credential(const char *cred, size_t n, const struct s3_creds *creds, struct s3_auth *auth,
                 char date8[9])
{
	const char *slash = memchr(cred, '/', n);
	size_t akl, rest;

	if (!slash)
		return S3E_AUTH_HEADER_MALFORMED;
	akl = (size_t)(slash - cred);
	rest = n - akl - 1;
	if (akl != strlen(creds->access_key) || memcmp(cred, creds->access_key, akl) != 0)
		return S3E_INVALID_ACCESS_KEY;
	if (rest >= sizeof(auth->scope) || rest < 9 || slash[9] != '/')
		return S3E_AUTH_HEADER_MALFORMED;
	memcpy(auth->scope, slash + 1, rest);
	auth->scope[rest] = '\0';
	memcpy(date8, auth->scope, 8);
	date8[8] = '\0';
	{
		char want[128];

		snprintf(want, sizeof(want), "%s/%s/s3/aws4_request", date8, creds->region);
		if (strcmp(want, auth->scope) != 0)
			return S3E_AUTH_HEADER_MALFORMED;
	}
	return S3_OK;
}

static bool
path_differs(const struct s3_http_req *req)
{
	struct s3_buf a, b;
	bool same;

	s3_buf_init(&a, 64 * 1024);
	s3_buf_init(&b, 64 * 1024);
	canonical_uri(req, false, &a);
	canonical_uri(req, true, &b);
	same = a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
	s3_buf_fini(&a);
	s3_buf_fini(&b);
	return !same;
}

static enum s3_err
finish(const struct s3_http_req *req, const struct s3_creds *creds, struct s3_auth *auth,
       const char *date8, const char *sh, size_t sh_len, const char *sig, size_t sig_len,
       const char *payload_hash, bool presigned)
{
	struct s3_buf canon, sts;
	enum s3_err res = S3E_SIGNATURE_DOES_NOT_MATCH;
	char chash[65], mysig[65];

	if (memcmp(auth->amz_date, date8, 8) != 0)
		return S3E_SIGNATURE_DOES_NOT_MATCH;
	s3_sigv4_key(creds->secret_key, date8, creds->region, "s3", auth->key);
	for (int raw = 0; raw < 4 && res != S3_OK; raw++) {
		/* fallbacks only where the raw form differs from the canonical one */
		if ((raw & 1) && !path_differs(req))
			continue;
		if ((raw & 2) && (presigned || req->query_len == 0))
			continue;
		s3_buf_init(&canon, 256 * 1024);
		s3_buf_init(&sts, 1024);
		if (canonical_build(req, sh, sh_len, payload_hash, presigned, raw, &canon) != 0) {
			/* e.g. a bad %-escape: the raw forms may still be what was signed */
			res = canon.err == -ENOMEM ? S3E_INTERNAL : S3E_SIGNATURE_DOES_NOT_MATCH;
			s3_buf_fini(&canon);
			s3_buf_fini(&sts);
			if (res == S3E_INTERNAL)
				break;
			continue;
		}
		sha256_hex(canon.p, canon.len, chash);
		s3_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", auth->amz_date, auth->scope,
		              chash);
		s3_sigv4_sign(auth->key, sts.p, sts.len, mysig);
		if (sig_len == 64 && CRYPTO_memcmp(mysig, sig, 64) == 0)
			res = S3_OK;
		s3_buf_fini(&canon);
		s3_buf_fini(&sts);
	}
	if (res == S3_OK)
		memcpy(auth->seed_sig, mysig, 65);
	return res;
}

enum s3_err
s3_sigv4_verify(const struct s3_http_req *req, const struct s3_creds *creds, time_t now,
                struct s3_auth *auth)
{
	const struct s3_hdr *ah = s3_http_header(req, "authorization");
	const struct s3_hdr *ph = s3_http_header(req, "x-amz-content-sha256");
	size_t alg_len = 0;
	const char *alg = query_param(req, "X-Amz-Algorithm", &alg_len);
	char date8[9];
	enum s3_err e;

	memset(auth, 0, sizeof(*auth));
	if (!creds->access_key) {
		auth->anonymous = true;
		return payload_mode(ph, auth) == S3_OK ? S3_OK : S3E_INVALID_ARGUMENT;
	}
	if (ah) {
		struct authparts ap;
		const struct s3_hdr *dh = s3_http_header(req, "x-amz-date");
		bool http_date = false;
		time_t t;

		if (ah->val_len > 4 && memcmp(ah->val, "AWS ", 4) == 0)
			return s3_sigv2_verify(req, creds, now, auth);
		if (parse_auth_header(ah->val, ah->val_len, &ap) != 0)
			return S3E_AUTH_HEADER_MALFORMED;
		if (dh) {
			t = parse_amz_date(dh->val, dh->val_len);
			if (t >= 0)
				memcpy(auth->amz_date, dh->val, 16);
		} else {
			/* no X-Amz-Date: the Date header is the request time, and the string
			 * to sign carries it in the ISO 8601 basic form */
			struct tm tm;

			dh = s3_http_header(req, "date");
			t = dh ? s3_sigv2_time(dh->val, dh->val_len) : -1;
			if (t >= 0 && gmtime_r(&t, &tm))
				strftime(auth->amz_date, sizeof(auth->amz_date), "%Y%m%dT%H%M%SZ",
				         &tm);
			http_date = true;
		}
		if (t < 0) {
			auth->msg = "AWS authentication requires a valid Date or x-amz-date header";
			return S3E_ACCESS_DENIED;
		}
		e = check_credential(ap.cred, ap.cred_len, creds, auth, date8);
		if (e)
			return e;
		if (t > now + SKEW_SEC || t < now - SKEW_SEC)
			return S3E_REQUEST_TIME_TOO_SKEWED;
		if (!headers_signed(req, ap.sh, ap.sh_len, http_date)) {
			auth->msg = NOT_SIGNED_MSG;
			return S3E_ACCESS_DENIED;
		}
		if (!ph) {
			auth->msg =
			        "Missing required header for this request: x-amz-content-sha256";
			return S3E_INVALID_REQUEST;
		}
		e = payload_mode(ph, auth);
		if (e)
			return e;
		{
			char hash[65];

			memcpy(hash, ph->val, ph->val_len < 64 ? ph->val_len : 64);
			hash[ph->val_len < 64 ? ph->val_len : 64] = '\0';
			if (ph->val_len > 64) {
				/* the streaming mode names are longer than a digest */
				char *h = strndup(ph->val, ph->val_len);

				if (!h)
					return S3E_INTERNAL;
				e = finish(req, creds, auth, date8, ap.sh, ap.sh_len, ap.sig,
				           ap.sig_len, h, false);
				free(h);
				return e;
			}
			return finish(req, creds, auth, date8, ap.sh, ap.sh_len, ap.sig, ap.sig_len,
			              hash, false);
		}
	}
	if (alg) {
		size_t cl, dl, el, shl, sgl;
		const char *cred = query_param(req, "X-Amz-Credential", &cl);
		const char *date = query_param(req, "X-Amz-Date", &dl);
		const char *exp = query_param(req, "X-Amz-Expires", &el);
		const char *sh = query_param(req, "X-Amz-SignedHeaders", &shl);
		const char *sig = query_param(req, "X-Amz-Signature", &sgl);
		char cbuf[512], shbuf[1024], ebuf[16];
		int n;
		time_t t;
		long expires;

		if (alg_len != 16 || memcmp(alg, "AWS4-HMAC-SHA256", 16) != 0) {
			auth->msg = "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"";
			return S3E_AUTH_QUERY_PARAMS;
		}
		if (!cred || !date || !exp || !sh || !sig)
			return S3E_AUTH_QUERY_PARAMS;
		auth->presigned = true;
		n = s3_uri_decode(cred, cl, cbuf, sizeof(cbuf), false);
		if (n < 0)
			return S3E_AUTH_HEADER_MALFORMED;
		if (dl != 16 || (t = parse_amz_date(date, dl)) < 0)
			return S3E_AUTH_HEADER_MALFORMED;
		memcpy(auth->amz_date, date, 16);
		e = check_credential(cbuf, (size_t)n, creds, auth, date8);
		if (e)
			return e;
		/* a plain decimal count of seconds, AWS's messages for each refusal */
		if (el && exp[0] == '-') {
			auth->msg = "X-Amz-Expires must be non-negative";
			return S3E_AUTH_QUERY_PARAMS;
		}
		for (size_t i = 0; i < el; i++)
			if (!isdigit((unsigned char)exp[i]))
				el = 0;
		if (el == 0) {
			auth->msg = "X-Amz-Expires should be a number";
			return S3E_AUTH_QUERY_PARAMS;
		}
		if (el >= sizeof(ebuf))
			el = sizeof(ebuf) - 1; /* still more than a week */
		memcpy(ebuf, exp, el);
		ebuf[el] = '\0';
		expires = strtol(ebuf, NULL, 10);
		if (expires > MAX_EXPIRES) {
			auth->msg = "X-Amz-Expires must be less than a week (in seconds); that is, "
			            "the given X-Amz-Expires must be less than 604800 seconds";
			return S3E_AUTH_QUERY_PARAMS;
		}
		if (t > now + SKEW_SEC)
			return S3E_REQUEST_TIME_TOO_SKEWED;
		if (expires == 0 || now > t + expires) {
			auth->msg = "Request has expired";
			return S3E_ACCESS_DENIED;
		}
		n = s3_uri_decode(sh, shl, shbuf, sizeof(shbuf), false);
		if (n < 0)
			return S3E_AUTH_HEADER_MALFORMED;
		if (!headers_signed(req, shbuf, (size_t)n, false)) {
			auth->msg = NOT_SIGNED_MSG;
			return S3E_ACCESS_DENIED;
		}
		auth->payload = S3_PAYLOAD_UNSIGNED;
		return finish(req, creds, auth, date8, shbuf, (size_t)n, sig, sgl,
		              "UNSIGNED-PAYLOAD", true);
	}
	if (query_param(req, "AWSAccessKeyId", &alg_len) || query_param(req, "Signature", &alg_len))
		return s3_sigv2_verify(req, creds, now, auth);
	return S3E_ACCESS_DENIED;
}

/* ------------------------------------------------------------ chunk signatures */

void
s3_sigv4_chunk_sig(const struct s3_auth *auth, const char *prev_sig, const uint8_t chunk_sha256[32],
                   char out[65])
{
	char sts[512], h[65];
	int n;

	s3_hex(chunk_sha256, 32, h);
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s",
	             auth->amz_date, auth->scope, prev_sig, EMPTY_SHA256, h);
	s3_sigv4_sign(auth->key, sts, (size_t)n, out);
}

void
s3_sigv4_trailer_sig(const struct s3_auth *auth, const char *prev_sig, const void *trailer,
                     size_t len, char out[65])
{
	char sts[512], h[65];
	int n;

	sha256_hex(trailer, len, h);
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s", auth->amz_date,
	             auth->scope, prev_sig, h);
	s3_sigv4_sign(auth->key, sts, (size_t)n, out);
}
