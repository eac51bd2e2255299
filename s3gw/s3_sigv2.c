/*
 * s3_sigv2: AWS Signature Version 2 for S3, as MinIO and Ceph RGW still accept it
 * (awscli 1.x presigns with it by default; botocore signs with it given
 * signature_version='s3').
 *
 *   Authorization: AWS AKID:base64(HMAC-SHA1(secret, StringToSign))
 *   presigned:     ?AWSAccessKeyId=AKID&Expires=EPOCH&Signature=base64
 *   StringToSign = VERB \n Content-MD5 \n Content-Type \n Date (or Expires) \n
 *                  CanonicalizedAmzHeaders CanonicalizedResource
 *
 * CanonicalizedAmzHeaders: every x-amz-* header, name lower case, values trimmed and
 * joined by ',', sorted, one "name:value\n" each. CanonicalizedResource: "/bucket" for a
 * virtual-host request, the path as sent, then the sub-resources and response-*
 * overrides of the query, sorted, values decoded. V2 signs no payload: the body is
 * treated like UNSIGNED-PAYLOAD.
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

#include "s3_sig_internal.h"

#define SKEW_SEC (15 * 60)
#define MAX_AMZ  64 /* x-amz-* headers at most (S3_HTTP_MAX_HEADERS) */
#define MAX_SUBR 16

/* The query parameters that are part of the resource (botocore's, MinIO's, Ceph's). */
static const char *const subresources[] = {
	"accelerate",
	"acl",
	"analytics",
	"cors",
	"delete",
	"encryption",
	"inventory",
	"legal-hold",
	"lifecycle",
	"location",
	"logging",
	"metrics",
	"notification",
	"object-lock",
	"partNumber",
	"policy",
	"replication",
	"requestPayment",
	"response-cache-control",
	"response-content-disposition",
	"response-content-encoding",
	"response-content-language",
	"response-content-type",
	"response-expires",
	"restore",
	"retention",
	"select",
	"select-type",
	"tagging",
	"torrent",
	"uploadId",
	"uploads",
	"versionId",
	"versioning",
	"versions",
	"website",
};

time_t
s3_sigv2_time(const char *s, size_t n)
{
	return (time_t)s3_http_date(s, n);
}

/* The raw value of query parameter name, or NULL. */
static const char *
query_raw(const struct s3_http_req *req, const char *name, size_t *len)
{
	size_t nl = strlen(name), i = 0;

	while (i < req->query_len) {
		size_t j = i;

		while (j < req->query_len && req->query[j] != '&')
			j++;
		if (j - i >= nl && memcmp(req->query + i, name, nl) == 0 &&
		    (j - i == nl || req->query[i + nl] == '=')) {
			*len = j - i > nl ? j - i - nl - 1 : 0;
			return req->query + i + nl + (j - i > nl);
		}
		i = j + 1;
	}
	return NULL;
}

/* Decoded value of a query parameter into out (NUL-terminated); -1 absent or bad. */
static int
query_val(const struct s3_http_req *req, const char *name, char *out, size_t cap)
{
	size_t n;
	const char *v = query_raw(req, name, &n);

	if (!v)
		return -1;
	return s3_uri_decode(v, n, out, cap, false) < 0 ? -1 : 0;
}

static void
add_trimmed(struct s3_buf *b, const char *v, size_t n)
{
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	while (n && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	s3_buf_add(b, v, n);
}

static int
hdr_cmp(const void *a, const void *b)
{
	const struct s3_hdr *x = *(const struct s3_hdr *const *)a;
	const struct s3_hdr *y = *(const struct s3_hdr *const *)b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = strncasecmp(x->name, y->name, n);

	return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static void
amz_headers(const struct s3_http_req *req, struct s3_buf *b)
{
	const struct s3_hdr *amz[MAX_AMZ];
	unsigned n = 0;

	for (unsigned h = 0; h < req->nhdr && n < MAX_AMZ; h++)
		if (req->hdr[h].name_len > 6 && strncasecmp(req->hdr[h].name, "x-amz-", 6) == 0)
			amz[n++] = &req->hdr[h];
	/* a stable sort keeps repeated headers in the order sent, as their join wants */
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && hdr_cmp(&amz[j - 1], &amz[j]) > 0; j--) {
			const struct s3_hdr *t = amz[j];

			amz[j] = amz[j - 1];
			amz[j - 1] = t;
		}
	for (unsigned i = 0; i < n; i++) {
		bool same = i > 0 && hdr_cmp(&amz[i - 1], &amz[i]) == 0;

		if (same) {
			s3_buf_add(b, ",", 1);
		} else {
			if (i)
				s3_buf_add(b, "\n", 1);
			for (size_t k = 0; k < amz[i]->name_len; k++) {
				char c = (char)tolower((unsigned char)amz[i]->name[k]);

				s3_buf_add(b, &c, 1);
			}
			s3_buf_add(b, ":", 1);
		}
		add_trimmed(b, amz[i]->val, amz[i]->val_len);
	}
	if (n)
		s3_buf_add(b, "\n", 1);
}

/* The bucket named by a virtual-host Host header, as s3_ops' routing finds it. */
static size_t
vhost_bucket(const struct s3_http_req *req, const char *domain, const char **bucket)
{
	const struct s3_hdr *host = s3_http_header(req, "host");
	size_t dl, hl;
	const char *colon;

	if (!host || !domain)
		return 0;
	dl = strlen(domain);
	hl = host->val_len;
	colon = memchr(host->val, ':', hl);
	if (colon)
		hl = (size_t)(colon - host->val);
	if (hl > dl + 1 && host->val[hl - dl - 1] == '.' &&
	    strncasecmp(host->val + hl - dl, domain, dl) == 0) {
		*bucket = host->val;
		return hl - dl - 1;
	}
	return 0;
}

/* True for a path-style bucket path "/bucket": its resource is also signed as "/bucket/". */
static bool
bare_bucket(const struct s3_http_req *req)
{
	return req->path_len > 1 && req->path[0] == '/' &&
	       !memchr(req->path + 1, '/', req->path_len - 1);
}

/* RES_SLASH: a bare bucket path signed with the trailing '/' S3 gives a bucket's resource,
 * as botocore's HmacV1Auth signs "GET /bucket?list-type=2" (AWS's form comes first). */
enum { RES_SLASH = 1, RES_VARIANTS = 2 };

static int
resource(const struct s3_http_req *req, const char *domain, int variant, struct s3_buf *b)
{
	const char *bucket;
	size_t bl = vhost_bucket(req, domain, &bucket);
	bool first = true;

	if (bl) {
		s3_buf_add(b, "/", 1);
		s3_buf_add(b, bucket, bl);
	}
	if (req->path_len)
		s3_buf_add(b, req->path, req->path_len);
	else
		s3_buf_add(b, "/", 1);
	if ((variant & RES_SLASH) && !bl && bare_bucket(req))
		s3_buf_add(b, "/", 1);
	/* the list is sorted as strcmp sorts: append in its order */
	for (size_t i = 0; i < sizeof(subresources) / sizeof(subresources[0]); i++) {
		size_t vl;
		const char *v = query_raw(req, subresources[i], &vl);

		if (!v)
			continue;
		s3_buf_add(b, first ? "?" : "&", 1);
		s3_buf_adds(b, subresources[i]);
		first = false;
		if (vl) {
			char *dec = malloc(vl + 1);
			int n = dec ? s3_uri_decode(v, vl, dec, vl + 1, false) : -ENOMEM;

			if (n < 0) {
				free(dec);
				return n;
			}
			s3_buf_add(b, "=", 1);
			s3_buf_add(b, dec, (size_t)n);
			free(dec);
		}
	}
	return b->err;
}

static int
string_to_sign(const struct s3_http_req *req, const char *date, const char *domain, int variant,
               struct s3_buf *out)
{
	static const char *const std[] = { "content-md5", "content-type" };

	s3_buf_add(out, req->method, req->method_len);
	s3_buf_add(out, "\n", 1);
	for (int i = 0; i < 2; i++) {
		const struct s3_hdr *h = s3_http_header(req, std[i]);

		if (h)
			add_trimmed(out, h->val, h->val_len);
		s3_buf_add(out, "\n", 1);
	}
	s3_buf_adds(out, date);
	s3_buf_add(out, "\n", 1);
	amz_headers(req, out);
	return resource(req, domain, variant, out);
}

int
s3_sigv2_string(const struct s3_http_req *req, const char *date, const char *domain,
                struct s3_buf *out)
{
	return string_to_sign(req, date, domain, 0, out);
}

/* Does the base64 signature sig match one computed over StringToSign with date? */
static enum s3_err
sig_check(const struct s3_http_req *req, const struct s3_creds *creds, const char *date,
          const char *sig, size_t sig_len)
{
	uint8_t want[32];
	int wl = s3_b64_decode(sig, sig_len, want, sizeof(want));

	if (wl != 20)
		return S3E_SIGNATURE_DOES_NOT_MATCH;
	for (int variant = 0; variant < RES_VARIANTS; variant++) {
		uint8_t mac[EVP_MAX_MD_SIZE];
		unsigned int ml = sizeof(mac);
		struct s3_buf sts;
		bool ok;

		if ((variant & RES_SLASH) && !bare_bucket(req))
			continue;
		s3_buf_init(&sts, 256 * 1024);
		if (string_to_sign(req, date, creds->domain, variant, &sts) != 0) {
			int err = sts.err;

			s3_buf_fini(&sts);
			return err == -ENOMEM ? S3E_INTERNAL : S3E_SIGNATURE_DOES_NOT_MATCH;
		}
		HMAC(EVP_sha1(), creds->secret_key, (int)strlen(creds->secret_key),
		     (uint8_t *)sts.p, sts.len, mac, &ml);
		s3_buf_fini(&sts);
		ok = ml == 20 && CRYPTO_memcmp(mac, want, 20) == 0;
		if (ok)
			return S3_OK;
	}
	return S3E_SIGNATURE_DOES_NOT_MATCH;
}

/* V2 signs no payload; a hash named in x-amz-content-sha256 is still checked. */
static enum s3_err
payload_v2(const struct s3_http_req *req, struct s3_auth *auth)
{
	const struct s3_hdr *h = s3_http_header(req, "x-amz-content-sha256");

	auth->payload = S3_PAYLOAD_UNSIGNED;
	if (!h || (h->val_len == 16 && memcmp(h->val, "UNSIGNED-PAYLOAD", 16) == 0))
		return S3_OK;
	if (h->val_len == 34 && memcmp(h->val, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", 34) == 0) {
		auth->payload = S3_PAYLOAD_UNSIGNED_TRAILER;
		return S3_OK;
	}
	if (h->val_len == 64) {
		for (size_t i = 0; i < 32; i++) {
			unsigned v;
			char two[3] = { h->val[2 * i], h->val[2 * i + 1], 0 };

			if (!isxdigit((unsigned char)two[0]) || !isxdigit((unsigned char)two[1]) ||
			    sscanf(two, "%2x", &v) != 1)
				return S3E_INVALID_ARGUMENT;
			auth->payload_sha256[i] = (uint8_t)v;
		}
		auth->payload = S3_PAYLOAD_HASH;
		return S3_OK;
	}
	/* signed aws-chunks chain from a SigV4 seed signature: V2 has none */
	auth->msg = "Streaming uploads need Signature Version 4";
	return S3E_INVALID_REQUEST;
}

enum s3_err
s3_sigv2_verify(const struct s3_http_req *req, const struct s3_creds *creds, time_t now,
                struct s3_auth *auth)
{
	const struct s3_hdr *ah = s3_http_header(req, "authorization");
	size_t akl;
	enum s3_err e;

	memset(auth, 0, sizeof(*auth));
	auth->v2 = true;
	if (!creds->access_key) {
		auth->anonymous = true;
		return payload_v2(req, auth);
	}
	akl = strlen(creds->access_key);
	if (ah) {
		const struct s3_hdr *xd = s3_http_header(req, "x-amz-date");
		const struct s3_hdr *dh = s3_http_header(req, "date");
		const struct s3_hdr *th = xd ? xd : dh;
		const char *v, *colon;
		char date[64] = "";
		size_t n;
		time_t t;

		if (ah->val_len < 4 || memcmp(ah->val, "AWS ", 4) != 0)
			return S3E_AUTH_HEADER_MALFORMED;
		v = ah->val + 4;
		n = ah->val_len - 4;
		colon = memchr(v, ':', n);
		if (!colon)
			return S3E_AUTH_HEADER_MALFORMED;
		if ((size_t)(colon - v) != akl || memcmp(v, creds->access_key, akl) != 0)
			return S3E_INVALID_ACCESS_KEY;
		if (!th || (t = s3_sigv2_time(th->val, th->val_len)) < 0) {
			auth->msg = "AWS authentication requires a valid Date or x-amz-date header";
			return S3E_ACCESS_DENIED;
		}
		if (t > now + SKEW_SEC || t < now - SKEW_SEC)
			return S3E_REQUEST_TIME_TOO_SKEWED;
		e = payload_v2(req, auth);
		if (e)
			return e;
		v = colon + 1;
		n = ah->val_len - (size_t)(v - ah->val);
		if (dh && dh->val_len < sizeof(date)) {
			memcpy(date, dh->val, dh->val_len);
			date[dh->val_len] = '\0';
		}
		/* With x-amz-date, AWS signs an empty Date line; botocore and MinIO sign the
		 * Date header it also sends: accept either. */
		e = sig_check(req, creds, date, v, n);
		if (e == S3E_SIGNATURE_DOES_NOT_MATCH && xd && date[0])
			e = sig_check(req, creds, "", v, n);
		return e;
	}
	{
		char ak[256], exp[32], sig[128];
		char *end;
		long long t;

		auth->presigned = true;
		if (query_val(req, "AWSAccessKeyId", ak, sizeof(ak)) < 0 ||
		    query_val(req, "Expires", exp, sizeof(exp)) < 0 ||
		    query_val(req, "Signature", sig, sizeof(sig)) < 0) {
			auth->msg = "Query-string authentication requires the Signature, Expires "
			            "and AWSAccessKeyId parameters";
			return S3E_ACCESS_DENIED;
		}
		if (strcmp(ak, creds->access_key) != 0)
			return S3E_INVALID_ACCESS_KEY;
		errno = 0;
		t = strtoll(exp, &end, 10);
		if (!isdigit((unsigned char)exp[0]) || *end || errno) {
			auth->msg = "Invalid date (should be seconds since epoch): Expires";
			return S3E_ACCESS_DENIED;
		}
		if (t < (long long)now) {
			auth->msg = "Request has expired";
			return S3E_ACCESS_DENIED;
		}
		e = payload_v2(req, auth);
		if (e)
			return e;
		return sig_check(req, creds, exp, sig, strlen(sig));
	}
}
