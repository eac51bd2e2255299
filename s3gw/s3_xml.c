/*
 * s3_xml: request body parsers on libxml2 (a well-kept, hardened parser beats a hand
 * written one for input from the network: entities are not expanded, no network or DTD
 * access, and we cap the body before it gets here) and the small writers shared by the
 * operations.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "s3_sum_internal.h"
#include "s3_xml_internal.h"

#define XML_OPTS (XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOCDATA)

static xmlDocPtr
parse(const char *body, size_t len)
{
	if (len == 0 || len > S3_XML_BODY_MAX)
		return NULL;
	return xmlReadMemory(body, (int)len, NULL, NULL, XML_OPTS);
}

static bool
named(xmlNodePtr n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* Text content of an element; NULL for mixed or element content. Caller frees with xmlFree. */
static char *
text_of(xmlNodePtr n)
{
	for (xmlNodePtr c = n->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE)
			return NULL;
	return (char *)xmlNodeGetContent(n);
}

void
s3_delete_req_fini(struct s3_delete_req *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->keys[i]);
	free(r->keys);
	memset(r, 0, sizeof(*r));
}

int
s3_xml_parse_delete(const char *body, size_t len, struct s3_delete_req *out)
{
	xmlDocPtr doc = parse(body, len);
	xmlNodePtr root;
	int rc = -EINVAL;

	memset(out, 0, sizeof(*out));
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	if (!root || !named(root, "Delete"))
		goto out;
	out->keys = calloc(S3_DELETE_MAX, sizeof(*out->keys));
	if (!out->keys) {
		rc = -ENOMEM;
		goto out;
	}
	for (xmlNodePtr c = root->children; c; c = c->next) {
		if (named(c, "Quiet")) {
			char *t = text_of(c);

			out->quiet = t && strcmp(t, "true") == 0;
			xmlFree(t);
		} else if (named(c, "Object")) {
			char *key = NULL;

			for (xmlNodePtr k = c->children; k; k = k->next) {
				if (named(k, "Key")) {
					xmlFree(key);
					key = text_of(k);
				}
			}
			if (!key || !*key) {
				xmlFree(key);
				goto out;
			}
			if (out->n == S3_DELETE_MAX || strlen(key) > S3_MAX_KEY) {
				xmlFree(key);
				rc = -EMSGSIZE;
				goto out;
			}
			out->keys[out->n] = strdup(key);
			xmlFree(key);
			if (!out->keys[out->n]) {
				rc = -ENOMEM;
				goto out;
			}
			out->n++;
		}
	}
	if (out->n)
		rc = 0;
out:
	xmlFreeDoc(doc);
	if (rc)
		s3_delete_req_fini(out);
	return rc;
}

void
s3_complete_req_fini(struct s3_complete_req *r)
{
	free(r->parts);
	memset(r, 0, sizeof(*r));
}

int
s3_xml_parse_complete(const char *body, size_t len, struct s3_complete_req *out)
{
	xmlDocPtr doc = parse(body, len);
	xmlNodePtr root;
	int rc = -EINVAL;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	if (!root || !named(root, "CompleteMultipartUpload"))
		goto out;
	for (xmlNodePtr c = root->children; c; c = c->next) {
		struct s3_complete_part *p;
		bool have_num = false, have_etag = false;

		if (!named(c, "Part"))
			continue;
		if (out->n == S3_PARTS_MAX) {
			rc = -EMSGSIZE;
			goto out;
		}
		if (out->n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			void *np = realloc(out->parts, nc * sizeof(*out->parts));

			if (!np) {
				rc = -ENOMEM;
				goto out;
			}
			out->parts = np;
			cap = nc;
		}
		p = &out->parts[out->n];
		memset(p, 0, sizeof(*p));
		for (xmlNodePtr k = c->children; k; k = k->next) {
			char *t;

			if (k->type != XML_ELEMENT_NODE)
				continue;
			t = text_of(k);
			if (!t)
				goto out;
			if (named(k, "PartNumber")) {
				char *end;
				long v = strtol(t, &end, 10);

				if (*end || end == t || v < 1 || v > 10000) {
					xmlFree(t);
					goto out;
				}
				p->number = (unsigned)v;
				have_num = true;
			} else if (named(k, "ETag")) {
				const char *e = t;
				size_t el = strlen(e);

				if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
					e++;
					el -= 2;
				}
				if (el >= sizeof(p->etag)) {
					xmlFree(t);
					goto out;
				}
				memcpy(p->etag, e, el);
				p->etag[el] = '\0';
				have_etag = true;
			} else if (strncmp((const char *)k->name, "Checksum", 8) == 0) {
				unsigned ck = s3_ck_from_name((const char *)k->name + 8,
				                              strlen((const char *)k->name + 8));

				if (ck && strlen(t) < sizeof(p->checksum)) {
					p->ck = ck;
					strcpy(p->checksum, t);
				}
			}
			xmlFree(t);
		}
		if (!have_num || !have_etag)
			goto out;
		out->n++;
	}
	if (out->n)
		rc = 0;
out:
	xmlFreeDoc(doc);
	if (rc)
		s3_complete_req_fini(out);
	return rc;
}

int
s3_xml_parse_create_bucket(const char *body, size_t len, char *loc, size_t cap)
{
	xmlDocPtr doc;
	xmlNodePtr root;
	int rc = -EINVAL;

	loc[0] = '\0';
	while (len && (body[len - 1] == ' ' || body[len - 1] == '\n' || body[len - 1] == '\r'))
		len--;
	if (len == 0)
		return 0;
	doc = parse(body, len);
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	if (!root || !named(root, "CreateBucketConfiguration"))
		goto out;
	rc = 0;
	for (xmlNodePtr c = root->children; c; c = c->next) {
		if (named(c, "LocationConstraint")) {
			char *t = text_of(c);

			if (!t || strlen(t) >= cap)
				rc = -EINVAL;
			else
				strcpy(loc, t);
			xmlFree(t);
		}
	}
out:
	xmlFreeDoc(doc);
	return rc;
}

void
s3_xml_error(struct s3_buf *b, const char *code, const char *message, const char *resource,
             const char *request_id)
{
	s3_buf_adds(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>");
	s3_buf_add_xml(b, code, strlen(code));
	s3_buf_adds(b, "</Code><Message>");
	s3_buf_add_xml(b, message, strlen(message));
	s3_buf_adds(b, "</Message><Resource>");
	s3_buf_add_xml(b, resource, strlen(resource));
	s3_buf_adds(b, "</Resource><RequestId>");
	s3_buf_add_xml(b, request_id, strlen(request_id));
	s3_buf_adds(b, "</RequestId></Error>");
}

void
s3_xml_time(uint64_t ns, char *out)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, 32, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
	         (unsigned)(tm.tm_year + 1900) % 10000u, (unsigned)tm.tm_mon % 12u + 1,
	         (unsigned)tm.tm_mday % 32u, (unsigned)tm.tm_hour % 24u, (unsigned)tm.tm_min % 60u,
	         (unsigned)tm.tm_sec % 61u, (unsigned)(ns / 1000000u % 1000u));
}

void
s3_xml_key(struct s3_buf *b, const char *tag, const char *key, bool url)
{
	s3_buf_printf(b, "<%s>", tag);
	if (url) {
		struct s3_buf e;

		s3_buf_init(&e, 16 * 1024);
		s3_buf_add_uri(&e, key, strlen(key), true);
		s3_buf_add_xml(b, e.p ? e.p : "", e.len);
		s3_buf_fini(&e);
	} else {
		s3_buf_add_xml(b, key, strlen(key));
	}
	s3_buf_printf(b, "</%s>", tag);
}
