/*
 * s3_http: the request-head parser. Strict where leniency lets two parsers disagree about
 * where a request ends (request smuggling): bare LF, obs-fold, spaces before the colon,
 * Content-Length together with Transfer-Encoding, differing repeated Content-Lengths and
 * unknown transfer codings are all rejected.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3_http_internal.h"

static bool
tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool
eq_ci(const char *a, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(a, lit, n) == 0;
}

/* Does the comma-separated list v contain token tok (case-insensitive)? */
static bool
list_has(const char *v, size_t n, const char *tok)
{
	size_t i = 0;

	while (i < n) {
		size_t j = i, s, e;

		while (j < n && v[j] != ',')
			j++;
		s = i;
		e = j;
		while (s < e && (v[s] == ' ' || v[s] == '\t'))
			s++;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (eq_ci(v + s, e - s, tok))
			return true;
		i = j + 1;
	}
	return false;
}

const struct s3_hdr *
s3_http_header(const struct s3_http_req *req, const char *name)
{
	size_t n = strlen(name);

	for (unsigned i = 0; i < req->nhdr; i++)
		if (req->hdr[i].name_len == n && strncasecmp(req->hdr[i].name, name, n) == 0)
			return &req->hdr[i];
	return NULL;
}

int
s3_http_parse(struct s3_http_req *req, const char *buf, size_t len, size_t max_head)
{
	const char *p = buf, *end, *eol, *sp;
	size_t scan = len < max_head ? len : max_head;
	bool conn_close = false, conn_keep = false, te_seen = false;

	memset(req, 0, sizeof(*req));
	if (!buf)
		return -EINVAL;
	/* RFC 9112 2.2: ignore empty lines before the request line. */
	while (scan >= 2 && p[0] == '\r' && p[1] == '\n') {
		p += 2;
		scan -= 2;
	}
	end = memmem(p, scan, "\r\n\r\n", 4);
	if (!end) {
		if (len >= max_head)
			return -EMSGSIZE;
		/* a bare LF or a NUL already seen makes more bytes pointless */
		for (size_t i = 0; i < scan; i++)
			if ((p[i] == '\n' && (i == 0 || p[i - 1] != '\r')) || p[i] == '\0')
				return -EINVAL;
		return -EAGAIN;
	}
	req->head_len = (size_t)(end + 4 - buf);

	/* request line */
	eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
	if (!eol)
		return -EINVAL;
	sp = memchr(p, ' ', (size_t)(eol - p));
	if (!sp || sp == p)
		return -EINVAL;
	for (const char *c = p; c < sp; c++)
		if (!tchar((unsigned char)*c))
			return -EINVAL;
	req->method = p;
	req->method_len = (size_t)(sp - p);
	req->target = sp + 1;
	sp = memchr(req->target, ' ', (size_t)(eol - req->target));
	if (!sp || sp == req->target)
		return -EINVAL;
	req->target_len = (size_t)(sp - req->target);
	for (size_t i = 0; i < req->target_len; i++) {
		unsigned char c = (unsigned char)req->target[i];

		if (c <= 0x20 || c == 0x7f)
			return -EINVAL;
	}
	if (req->target[0] != '/')
		return -EINVAL;
	if ((size_t)(eol - sp - 1) != 8 || memcmp(sp + 1, "HTTP/1.", 7) != 0) {
		if ((size_t)(eol - sp - 1) == 8 && memcmp(sp + 1, "HTTP/", 5) == 0)
			return -ENOTSUP;
		return -EINVAL;
	}
	if (sp[8] != '0' && sp[8] != '1')
		return -ENOTSUP;
	req->minor = sp[8] - '0';
	{
		const char *q = memchr(req->target, '?', req->target_len);

		req->path = req->target;
		if (q) {
			req->path_len = (size_t)(q - req->target);
			req->query = q + 1;
			req->query_len = req->target_len - req->path_len - 1;
		} else {
			req->path_len = req->target_len;
			req->query = req->target + req->target_len;
		}
	}

	/* header fields */
	p = eol + 2;
	while (p < end + 2) {
		const char *colon, *v, *ve;
		struct s3_hdr *h;

		eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
		if (!eol)
			return -EINVAL;
		if (p[0] == ' ' || p[0] == '\t')
			return -EINVAL; /* obs-fold */
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p)
			return -EINVAL;
		for (const char *c = p; c < colon; c++)
			if (!tchar((unsigned char)*c))
				return -EINVAL;
		v = colon + 1;
		ve = eol;
		for (const char *c = v; c < ve; c++) {
			unsigned char ch = (unsigned char)*c;

			if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
				return -EINVAL;
		}
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (req->nhdr == S3_HTTP_MAX_HEADERS)
			return -EMSGSIZE;
		h = &req->hdr[req->nhdr++];
		h->name = p;
		h->name_len = (size_t)(colon - p);
		h->val = v;
		h->val_len = (size_t)(ve - v);

		if (eq_ci(h->name, h->name_len, "content-length")) {
			uint64_t cl = 0;

			if (h->val_len == 0 || h->val_len > 19)
				return -EINVAL;
			for (size_t i = 0; i < h->val_len; i++) {
				if (h->val[i] < '0' || h->val[i] > '9')
					return -EINVAL;
				cl = cl * 10 + (uint64_t)(h->val[i] - '0');
			}
			if (req->has_length && cl != req->content_length)
				return -EINVAL;
			req->has_length = true;
			req->content_length = cl;
		} else if (eq_ci(h->name, h->name_len, "transfer-encoding")) {
			if (te_seen || !eq_ci(h->val, h->val_len, "chunked"))
				return -EINVAL;
			te_seen = true;
			req->chunked = true;
		} else if (eq_ci(h->name, h->name_len, "connection")) {
			conn_close |= list_has(h->val, h->val_len, "close");
			conn_keep |= list_has(h->val, h->val_len, "keep-alive");
		} else if (eq_ci(h->name, h->name_len, "expect")) {
			if (eq_ci(h->val, h->val_len, "100-continue"))
				req->expect_continue = true;
		}
		p = eol + 2;
	}
	if (req->chunked && req->has_length)
		return -EINVAL;
	req->keep_alive = req->minor == 1 ? !conn_close : (conn_keep && !conn_close);
	if (req->minor == 0 && req->chunked)
		return -EINVAL;
	return 0;
}

/* The zone after a date's time: seconds east of UTC into *off; false for a zone that is
 * not UTC under some name and not a numeric offset. */
static bool
date_zone(const char *z, long *off)
{
	static const char *const utc[] = { "GMT", "UT", "UTC", "Z" };

	while (*z == ' ')
		z++;
	*off = 0;
	for (size_t i = 0; i < sizeof(utc) / sizeof(utc[0]); i++)
		if (strcasecmp(z, utc[i]) == 0)
			return true;
	if ((z[0] == '+' || z[0] == '-') && strlen(z) == 5 && isdigit((unsigned char)z[1]) &&
	    isdigit((unsigned char)z[2]) && isdigit((unsigned char)z[3]) &&
	    isdigit((unsigned char)z[4])) {
		long hh = (z[1] - '0') * 10 + (z[2] - '0'), mm = (z[3] - '0') * 10 + (z[4] - '0');

		if (hh > 23 || mm > 59)
			return false;
		*off = (z[0] == '-' ? -1 : 1) * (hh * 3600 + mm * 60);
		return true;
	}
	return false;
}

long long
s3_http_date(const char *s, size_t n)
{
	char buf[64];
	struct tm tm;
	const char *end;
	long off = 0;

	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	memset(&tm, 0, sizeof(tm));
	if ((end = strptime(buf, "%a, %d %b %Y %H:%M:%S", &tm)) != NULL) {
		if (*end != ' ' || !date_zone(end, &off))
			return -1;
	} else if (memset(&tm, 0, sizeof(tm)),
	           (end = strptime(buf, "%A, %d-%b-%y %H:%M:%S", &tm)) != NULL) {
		if (*end != ' ' || !date_zone(end, &off))
			return -1;
	} else if (memset(&tm, 0, sizeof(tm)),
	           (end = strptime(buf, "%a %b %e %H:%M:%S %Y", &tm)) != NULL) {
		if (*end)
			return -1; /* asctime has no zone: it is UTC */
	} else {
		return -1;
	}
	return (long long)timegm(&tm) - off;
}
