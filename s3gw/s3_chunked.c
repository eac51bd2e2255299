/*
 * s3_chunked: streaming body decoders. Payload is never copied: emit() receives spans of
 * the caller's input. Only framing (size lines, CRLFs, trailers) is gathered into the
 * decoder's small line buffer, because it may straddle two reads.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3_chunked_internal.h"
#include "s3_sum_internal.h"

enum { ST_SIZE, ST_DATA, ST_DATA_CRLF, ST_TRAILER, ST_DONE };

/* Gather one CRLF-terminated line. Returns 1 when complete (without CRLF, NUL-terminated),
 * 0 when more input is needed, -EMSGSIZE or -EINVAL (bare LF, NUL). *used counts input. */
static int
gather_line_lf(char *line, size_t cap, size_t *len, const uint8_t *in, size_t n, size_t *used,
               bool lf_ok)
{
	size_t i = 0;

	while (i < n) {
		char c = (char)in[i++];

		if (c == '\n') {
			if (*len == 0 || line[*len - 1] != '\r') {
				if (!lf_ok)
					return -EINVAL;
				(*len)++; /* a bare LF ends the line too (minio-go trailers) */
			}
			(*len)--;
			line[*len] = '\0';
			*used = i;
			return 1;
		}
		if (c == '\0')
			return -EINVAL;
		if (*len + 1 >= cap)
			return -EMSGSIZE;
		line[(*len)++] = c;
	}
	*used = i;
	return 0;
}

static int
gather_line(char *line, size_t cap, size_t *len, const uint8_t *in, size_t n, size_t *used)
{
	return gather_line_lf(line, cap, len, in, n, used, false);
}

/* Parse leading hex digits; stops at ';' or end. -EINVAL on junk, -EOVERFLOW for a value
 * past 64 bits (leading zeros are fine). */
static int
parse_hex(const char *s, uint64_t *out, const char **rest)
{
	uint64_t v = 0;
	size_t i = 0;

	for (; s[i] && s[i] != ';' && s[i] != ' ' && s[i] != '\t'; i++) {
		char c = s[i];
		int d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -EINVAL;
		if (v >> 60)
			return -EOVERFLOW;
		v = v << 4 | (uint64_t)d;
	}
	if (i == 0)
		return -EINVAL;
	*out = v;
	*rest = s + i;
	return 0;
}

/* The framing fields that both decoders' structs have, borrowed by chunk_framing(). */
struct framing {
	int *state;
	uint64_t *left;
	char *line;
	size_t cap, *len;
	uint64_t max, total; /* payload cap (0: none) and payload bytes before this chunk */
};

#define FRAMING_OF(d, tot)                                                                       \
	{                                                                                        \
		&(d)->state, &(d)->left, (d)->line, sizeof((d)->line), &(d)->line_len, (d)->max, \
		        tot                                                                      \
	}

/*
 * The framing step HTTP chunked and aws-chunked share, in ST_SIZE or ST_DATA_CRLF: gathers
 * the line at in[*pos..n) (a line may straddle two feeds) and advances *pos past what it
 * used. A complete size line "hex[;ext]" sets *left, points *ext at what follows the
 * digits and returns 1: the caller picks the next state. A complete (empty) line after a
 * chunk's data moves to ST_SIZE and returns 0, as does a line still incomplete. -EINVAL
 * for a malformed line, -EMSGSIZE for an overlong one, -EOVERFLOW for a size past 64
 * bits and -EFBIG for a chunk that would take the payload past f->max: both refused at
 * the size line, before a byte of the chunk is read.
 */
static int
chunk_framing(const struct framing *f, const uint8_t *in, size_t n, size_t *pos, const char **ext)
{
	size_t used = 0;
	int rc = gather_line(f->line, f->cap, f->len, in + *pos, n - *pos, &used);

	*pos += used;
	if (rc <= 0)
		return rc;
	if (*f->state == ST_DATA_CRLF) {
		if (*f->len != 0)
			return -EINVAL;
		*f->state = ST_SIZE;
		return 0;
	}
	*f->len = 0;
	rc = parse_hex(f->line, f->left, ext);
	if (rc < 0)
		return rc;
	if (f->max && (*f->left > f->max || f->total > f->max - *f->left))
		return -EFBIG;
	return 1;
}

void
s3_http_chunked_init(struct s3_http_chunked *d)
{
	memset(d, 0, sizeof(*d));
	d->state = ST_SIZE;
}

long
s3_http_chunked_feed(struct s3_http_chunked *d, const uint8_t *in, size_t n, s3_span_fn emit,
                     void *arg)
{
	size_t pos = 0;

	while (pos < n && d->state != ST_DONE) {
		const struct framing fr = FRAMING_OF(d, d->total);
		size_t used = 0;
		const char *ext;
		int rc;

		switch (d->state) {
		case ST_SIZE:
		case ST_DATA_CRLF:
			rc = chunk_framing(&fr, in, n, &pos, &ext);
			if (rc < 0)
				return rc;
			if (rc == 1)
				d->state = d->left ? ST_DATA : ST_TRAILER;
			break;
		case ST_DATA: {
			size_t take = n - pos < d->left ? n - pos : (size_t)d->left;

			rc = emit(arg, in + pos, take);
			if (rc < 0)
				return rc;
			pos += take;
			d->left -= take;
			d->total += take;
			if (!d->left)
				d->state = ST_DATA_CRLF;
			break;
		}
		case ST_TRAILER:
			rc = gather_line(d->line, sizeof(d->line), &d->line_len, in + pos, n - pos,
			                 &used);
			pos += used;
			if (rc < 0)
				return rc;
			if (rc == 1) {
				bool empty = d->line_len == 0;

				d->line_len = 0;
				if (empty) {
					d->state = ST_DONE;
					d->done = true;
				}
			}
			break;
		}
	}
	return (long)pos;
}

int
s3_chunked_init(struct s3_chunked *d, enum s3_payload mode, const struct s3_auth *auth)
{
	memset(d, 0, sizeof(*d));
	switch (mode) {
	case S3_PAYLOAD_STREAMING:
		d->sigs = true;
		break;
	case S3_PAYLOAD_STREAMING_TRAILER:
		d->sigs = d->trailer = true;
		break;
	case S3_PAYLOAD_UNSIGNED_TRAILER:
		d->trailer = true;
		break;
	default:
		return -EINVAL;
	}
	if (d->sigs && (!auth || auth->anonymous))
		d->sigs = false; /* anonymous gateway: nothing to verify against */
	d->auth = auth;
	if (d->sigs) {
		memcpy(d->prev_sig, auth->seed_sig, 65);
		d->sha = EVP_MD_CTX_new();
		if (!d->sha || !EVP_DigestInit_ex(d->sha, EVP_sha256(), NULL)) {
			EVP_MD_CTX_free(d->sha);
			return -ENOMEM;
		}
	}
	s3_buf_init(&d->trail, 4096);
	d->state = ST_SIZE;
	return 0;
}

void
s3_chunked_fini(struct s3_chunked *d)
{
	EVP_MD_CTX_free(d->sha);
	d->sha = NULL;
	s3_buf_fini(&d->trail);
}

static int
chunk_verify(struct s3_chunked *d)
{
	uint8_t h[32];
	char sig[65];

	EVP_DigestFinal_ex(d->sha, h, NULL);
	EVP_DigestInit_ex(d->sha, EVP_sha256(), NULL);
	s3_sigv4_chunk_sig(d->auth, d->prev_sig, h, sig);
	if (CRYPTO_memcmp(sig, d->want_sig, 64) != 0)
		return -EBADMSG;
	memcpy(d->prev_sig, sig, 65);
	return 0;
}

/* One trailer line "name:value" (or the empty end line). */
static int
trailer_line(struct s3_chunked *d)
{
	char *colon;
	size_t nl, vl;
	const char *v;

	if (d->line_len == 0) {
		if (d->sigs && d->trail.len)
			return 0; /* the blank line minio-go puts before the trailer signature */
		d->state = ST_DONE;
		d->done = true;
		return 0;
	}
	colon = memchr(d->line, ':', d->line_len);
	if (!colon || colon == d->line)
		return -EINVAL;
	nl = (size_t)(colon - d->line);
	v = colon + 1;
	while (*v == ' ')
		v++;
	vl = d->line_len - (size_t)(v - d->line);
	while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		vl--;
	if (nl == 23 && strncasecmp(d->line, "x-amz-trailer-signature", 23) == 0) {
		char sig[65];

		if (!d->sigs)
			return -EINVAL;
		if (vl != 64)
			return -EBADMSG;
		s3_sigv4_trailer_sig(d->auth, d->prev_sig, d->trail.p ? d->trail.p : "",
		                     d->trail.len, sig);
		if (CRYPTO_memcmp(sig, v, 64) != 0)
			return -EBADMSG;
		s3_buf_fini(&d->trail); /* signature consumed: the end line follows */
		s3_buf_init(&d->trail, 4096);
		d->sigs = false;
		return 0;
	}
	if (nl > 15 && strncasecmp(d->line, "x-amz-checksum-", 15) == 0) {
		unsigned ck = s3_ck_from_name(d->line + 15, nl - 15);

		if (!ck || d->trailer_ck || vl >= sizeof(d->trailer_val))
			return -EINVAL;
		d->trailer_ck = ck;
		memcpy(d->trailer_val, v, vl);
		d->trailer_val[vl] = '\0';
	}
	for (size_t i = 0; i < nl; i++) {
		char c = d->line[i];

		s3_buf_add(&d->trail, &(char){ (char)(c >= 'A' && c <= 'Z' ? c + 32 : c) }, 1);
	}
	s3_buf_add(&d->trail, ":", 1);
	s3_buf_add(&d->trail, v, vl);
	s3_buf_add(&d->trail, "\n", 1);
	return d->trail.err;
}

long
s3_chunked_feed(struct s3_chunked *d, const uint8_t *in, size_t n, s3_span_fn emit, void *arg)
{
	size_t pos = 0;

	while (pos < n && d->state != ST_DONE) {
		const struct framing fr = FRAMING_OF(d, d->decoded);
		size_t used = 0;
		const char *ext;
		int rc;

		switch (d->state) {
		case ST_SIZE:
		case ST_DATA_CRLF:
			rc = chunk_framing(&fr, in, n, &pos, &ext);
			if (rc <= 0) {
				if (rc < 0)
					return rc;
				break;
			}
			if (d->sigs) {
				static const char tag[] = ";chunk-signature=";

				if (strncmp(ext, tag, sizeof(tag) - 1) != 0 ||
				    strlen(ext + sizeof(tag) - 1) != 64)
					return -EBADMSG;
				memcpy(d->want_sig, ext + sizeof(tag) - 1, 65);
			}
			if (d->left == 0) {
				if (d->sigs && (rc = chunk_verify(d)) < 0)
					return rc;
				d->state = ST_TRAILER;
			} else {
				d->state = ST_DATA;
			}
			break;
		case ST_DATA: {
			size_t take = n - pos < d->left ? n - pos : (size_t)d->left;

			if (d->sha && !d->sha_by_emit)
				EVP_DigestUpdate(d->sha, in + pos, take);
			rc = emit(arg, in + pos, take);
			if (rc < 0)
				return rc;
			pos += take;
			d->left -= take;
			d->decoded += take;
			if (!d->left) {
				if (d->sigs && (rc = chunk_verify(d)) < 0)
					return rc;
				d->state = ST_DATA_CRLF;
			}
			break;
		}
		case ST_TRAILER:
			/* Trailer lines: S3 SDKs end them with CRLF; minio-go ends each header with
			 * LF and puts a CRLF before x-amz-trailer-signature. Accept both. */
			rc = gather_line_lf(d->line, sizeof(d->line), &d->line_len, in + pos,
			                    n - pos, &used, d->trailer);
			pos += used;
			if (rc < 0)
				return rc;
			if (rc == 1) {
				if (!d->trailer && d->line_len)
					return -EINVAL;
				rc = trailer_line(d);
				d->line_len = 0;
				if (rc < 0)
					return rc;
			}
			break;
		}
	}
	return (long)pos;
}
