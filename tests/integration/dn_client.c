/*
 * dn_client: a small zest.Datanode client for the integration tests (rpc_client_*).
 *
 *   dn_client --target HOST:PORT [TLS] CMD ARGS...
 *     TLS: --cluster-ca FILE --cluster-cert FILE --cluster-key FILE (mutual TLS), or
 *          --insecure (plaintext); one of them is required, as for zest-s3gw
 *     mb B | rb B | hb B | lsb
 *     put B K FILE [CHUNK] [K+M]        (FILE '-': zero bytes; prints size and crc)
 *     get B K OUT [OFFSET LENGTH]       (prints size)
 *     stat B K | rm B K | ls B [PREFIX [DELIM [START [LIMIT]]]]
 *     compose B K DELETE(0|1) PART...   (PART: KEY in B, or BUCKET::KEY)
 *     raw METHOD HEX...                 (hand-packed messages on one call of
 *                                        /zest.Datanode/METHOD, past every client check;
 *                                        prints OK or "ERR <status> zest=<code> <message>")
 *
 * Success prints a result line and exits 0; a failed call prints "ERR <message>" and
 * exits 1 (usage errors 2).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpc_client.h"
#include "rpc_raw.h"
#include "rpc_tls_internal.h"

#define DN_TEST_RPC_ONLY /* the client helpers, shared with test_dn_rpc.c; no store */
#include "dn_test.h"

static int
file_sink(void *arg, uint64_t offset, const struct zc_seg *seg)
{
	(void)offset;
	return fwrite(seg->ptr, 1, seg->len, arg) == seg->len ? 0 : -EIO;
}

static int
fail(const struct rpc_status *st)
{
	printf("ERR %d %s\n", rpc_status_from_err(st->err), st->msg);
	return 1;
}

/* The bytes of a hex string (even length), or .bytes NULL. */
static struct raw_msg
unhex(const char *h)
{
	size_t n = strlen(h) / 2;
	struct raw_msg m = { malloc(n + 1), n };

	if (!m.bytes || strlen(h) % 2)
		goto bad;
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(h + 2 * i, "%2x", &v) != 1)
			goto bad;
		m.bytes[i] = (uint8_t)v;
	}
	return m;
bad:
	free(m.bytes);
	return (struct raw_msg){ NULL, 0 };
}

static int
raw_cmd(const char *target, const struct rpc_tls *tls, int argc, char **argv)
{
	grpc_channel_credentials *creds;
	char err[RPC_TLS_ERR_MAX];
	struct rpc_status st = { 0 };
	struct raw_msg *msgs;
	char path[96];
	int n = argc - 1;

	if (argc < 2)
		return 2;
	msgs = calloc((size_t)n, sizeof(*msgs));
	if (!msgs)
		return 2;
	for (int i = 0; i < n; i++) {
		msgs[i] = unhex(argv[1 + i]);
		if (!msgs[i].bytes) {
			fprintf(stderr, "dn_client: bad hex %s\n", argv[1 + i]);
			return 2;
		}
	}
	snprintf(path, sizeof(path), "/zest.Datanode/%s", argv[0]);
	grpc_init();
	if (rpc_tls_channel_creds(tls, &creds, err, sizeof(err))) {
		fprintf(stderr, "dn_client: %s\n", err);
		st.err = -EINVAL; /* nothing was sent */
		snprintf(st.msg, sizeof(st.msg), "credentials refused");
		goto out;
	}
	raw_call_creds(target, creds, path, msgs, (size_t)n, true, &st);
	grpc_channel_credentials_release(creds);
out:
	grpc_shutdown();
	for (int i = 0; i < n; i++)
		free(msgs[i].bytes);
	free(msgs);
	if (rpc_status_from_err(st.err) == GRPC_STATUS_OK) {
		printf("OK\n");
		return 0;
	}
	printf("ERR %d zest=%d %s\n", rpc_status_from_err(st.err), (int)zc_err_code(st.err),
	       st.msg);
	return 1;
}

int
main(int argc, char **argv)
{
	struct rpc_client_opts co = { 0 };
	struct rpc_client *cl;
	struct rpc_status st = { 0 };
	struct rpc_unary_resp resp = { 0 };
	union rpc_unary_req rq;
	const char *cmd;
	int rc = 0;

	if (argc < 4 || strcmp(argv[1], "--target")) {
		fprintf(stderr, "usage: dn_client --target HOST:PORT [TLS] CMD ARGS...\n");
		return 2;
	}
	co.target = argv[2];
	argv += 3;
	argc -= 3;
	for (; argc >= 1 && !strncmp(argv[0], "--", 2); argv++, argc--) {
		const char **file = !strcmp(argv[0], "--cluster-ca")     ? &co.tls.ca_file
		                    : !strcmp(argv[0], "--cluster-cert") ? &co.tls.cert_file
		                    : !strcmp(argv[0], "--cluster-key")  ? &co.tls.key_file
		                                                         : NULL;

		if (!strcmp(argv[0], "--insecure")) {
			co.tls.insecure = true;
		} else if (file && argc >= 2) {
			*file = argv[1];
			argv++;
			argc--;
		} else {
			fprintf(stderr, "dn_client: unknown flag or missing value: %s\n", argv[0]);
			return 2;
		}
	}
	if (argc < 1) {
		fprintf(stderr, "usage: dn_client --target HOST:PORT [TLS] CMD ARGS...\n");
		return 2;
	}
	cmd = argv[0];
	argv++;
	argc--;
	if (!strcmp(cmd, "raw"))
		return raw_cmd(co.target, &co.tls, argc, argv);
	/* rpc logs why TLS settings are refused */
	if (rpc_client_create(&co, &cl))
		return 2;

	if (!strcmp(cmd, "mb") || !strcmp(cmd, "rb") || !strcmp(cmd, "hb")) {
		enum rpc_method m = cmd[0] == 'm'   ? RPC_CREATE_BUCKET
		                    : cmd[0] == 'r' ? RPC_DELETE_BUCKET
		                                    : RPC_HEAD_BUCKET;

		if (argc < 1)
			goto usage;
		rq.bucket = (struct rpc_bucket_req){ .bucket = argv[0] };
		rc = rpc_client_call(cl, m, &rq, &resp, &st);
		if (rc)
			goto failed;
		printf("OK\n");
	} else if (!strcmp(cmd, "lsb")) {
		rc = rpc_client_call(cl, RPC_LIST_BUCKETS, NULL, &resp, &st);
		if (rc)
			goto failed;
		for (size_t i = 0; i < resp.buckets.n_buckets; i++)
			printf("%s\n", resp.buckets.buckets[i].name);
	} else if (!strcmp(cmd, "put")) {
		unsigned k = 0, m = 0;
		struct rpc_write_result res = { 0 };
		size_t chunk = 1 << 20, len = 0;
		void *buf = NULL;
		int fd = -1;

		if (argc < 3)
			goto usage;
		if (argc > 3)
			chunk = strtoull(argv[3], NULL, 0);
		if (argc > 4 && sscanf(argv[4], "%u+%u", &k, &m) != 2)
			goto usage;
		if (strcmp(argv[2], "-")) {
			struct stat sb;

			fd = open(argv[2], O_RDONLY);
			if (fd < 0 || fstat(fd, &sb)) {
				perror(argv[2]);
				return 2;
			}
			len = (size_t)sb.st_size;
			if (len) {
				buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
				if (buf == MAP_FAILED) {
					perror("mmap");
					return 2;
				}
			}
		}
		rc = t_rpc_put(cl, argv[0], argv[1], buf, len, chunk, k, m, &res, &st);
		if (buf)
			munmap(buf, len);
		if (fd >= 0)
			close(fd);
		if (rc)
			goto failed;
		printf("size=%llu crc32c=%08x\n", (unsigned long long)res.size, res.crc32c);
	} else if (!strcmp(cmd, "get")) {
		struct t_get g = { .sink = file_sink };
		uint64_t off = 0, length = 0;
		FILE *out;

		if (argc < 3)
			goto usage;
		if (argc > 4) {
			off = strtoull(argv[3], NULL, 0);
			length = strtoull(argv[4], NULL, 0);
		}
		out = fopen(argv[2], "wb");
		if (!out) {
			perror(argv[2]);
			return 2;
		}
		g.arg = out;
		if (t_rpc_get(cl, argv[0], argv[1], off, length, argc > 4, &g)) {
			fprintf(stderr, "cannot open a Read\n");
			return 2;
		}
		if (fclose(out))
			g.bad = true;
		st = g.st;
		if (rpc_status_from_err(st.err) != GRPC_STATUS_OK) {
			rc = 1;
			goto failed;
		}
		if (g.bad) {
			printf("ERR local: offsets or file write\n");
			rc = 1;
			goto out;
		}
		printf("size=%llu\n", (unsigned long long)g.bytes);
	} else if (!strcmp(cmd, "stat") || !strcmp(cmd, "rm")) {
		if (argc < 2)
			goto usage;
		rq.object = (struct rpc_object_req){ .bucket = argv[0], .key = argv[1] };
		rc = rpc_client_call(cl, cmd[0] == 's' ? RPC_STAT : RPC_DELETE, &rq, &resp, &st);
		if (rc)
			goto failed;
		if (cmd[0] == 's') {
			const struct rpc_object_info *oi = &resp.info;

			printf("key=%s size=%llu etag=%s crc32c=%08x ec=%u+%u", oi->key,
			       (unsigned long long)oi->size, oi->etag, oi->crc32c, oi->ec_k,
			       oi->ec_m);
			for (size_t i = 0; i < oi->n_attrs; i++)
				printf(" attr:%s=%s", oi->attrs[i].name, oi->attrs[i].value);
			printf("\n");
		} else {
			printf("existed=%d\n", resp.del.existed);
		}
	} else if (!strcmp(cmd, "ls")) {
		struct rpc_list_req lr = { 0 };
		const struct rpc_list_result *res = &resp.list;

		if (argc < 1)
			goto usage;
		lr.bucket = argv[0];
		if (argc > 1)
			lr.prefix = argv[1];
		if (argc > 2)
			lr.delimiter = argv[2];
		if (argc > 3)
			lr.start_after = argv[3];
		if (argc > 4)
			lr.limit = (uint32_t)atoi(argv[4]);
		rq.list = lr;
		rc = rpc_client_call(cl, RPC_LIST, &rq, &resp, &st);
		if (rc)
			goto failed;
		for (size_t i = 0; i < res->n_entries; i++)
			printf("key %s %llu\n", res->entries[i].key,
			       (unsigned long long)res->entries[i].size);
		for (size_t i = 0; i < res->n_common_prefixes; i++)
			printf("prefix %s\n", res->common_prefixes[i]);
		printf("truncated=%d next=%s\n", res->truncated, res->next_start_after);
	} else if (!strcmp(cmd, "compose")) {
		struct rpc_compose_req cr = { 0 };
		struct rpc_object_req *parts;
		const struct rpc_write_result *wr = &resp.write;

		if (argc < 4)
			goto usage;
		cr.bucket = argv[0];
		cr.key = argv[1];
		cr.delete_parts = atoi(argv[2]) != 0;
		cr.etag = "composed-etag";
		cr.n_parts = (size_t)argc - 3;
		parts = calloc(cr.n_parts, sizeof(*parts));
		if (!parts)
			return 2;
		for (size_t i = 0; i < cr.n_parts; i++) {
			char *sep = strstr(argv[3 + i], "::"); /* BUCKET::KEY: another bucket */

			parts[i].bucket = argv[0];
			parts[i].key = argv[3 + i];
			if (sep) {
				*sep = 0;
				parts[i].bucket = argv[3 + i];
				parts[i].key = sep + 2;
			}
		}
		cr.parts = parts;
		rq.compose = cr;
		rc = rpc_client_call(cl, RPC_COMPOSE, &rq, &resp, &st);
		free(parts);
		if (rc)
			goto failed;
		printf("size=%llu crc32c=%08x etag=%s\n", (unsigned long long)wr->size, wr->crc32c,
		       wr->etag);
	} else {
		goto usage;
	}
	goto out;
failed:
	rc = fail(&st);
out:
	rpc_unary_resp_fini(&resp);
	rpc_client_destroy(cl);
	return rc;
usage:
	fprintf(stderr, "dn_client: bad arguments for %s\n", cmd);
	rpc_client_destroy(cl);
	return 2;
}
