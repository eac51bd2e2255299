/* Placement (rendezvous hashing) and the cross-datanode listing merge, checked against a
 * single sorted listing of the union. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3_place_internal.h"

static const char *const nodes[] = { "10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000",
	                             "10.0.0.4:7000" };

static void
test_place_balance_and_stability(void **state)
{
	unsigned count[4] = { 0 }, moved = 0, other = 0;
	char key[32];

	(void)state;
	for (int i = 0; i < 40000; i++) {
		unsigned a, b;

		snprintf(key, sizeof(key), "obj-%d", i);
		a = s3_place(nodes, 4, "bucket", key);
		count[a]++;
		assert_int_equal(a, s3_place(nodes, 4, "bucket", key)); /* deterministic */
		b = s3_place(nodes, 3, "bucket", key);                  /* node 4 removed */
		if (a != 3)
			assert_int_equal(a, b); /* only node 4's keys move */
		else
			moved++;
	}
	for (int i = 0; i < 4; i++)
		assert_true(count[i] > 9000 && count[i] < 11000);
	assert_int_equal(moved, count[3]);
	assert_int_equal(s3_place(nodes, 1, "b", "k"), 0);
	/* multipart parts follow their target object */
	for (int i = 0; i < 200; i++) {
		char part[80];

		snprintf(key, sizeof(key), "target-%d", i);
		snprintf(part, sizeof(part), "p/%016x%016llx/%05d", 0x1234567u + i,
		         (unsigned long long)s3_obj_hash("bkt", key), i % 7 + 1);
		assert_int_equal(s3_place(nodes, 4, S3_RESERVED_BUCKET, part),
		                 s3_place(nodes, 4, "bkt", key));
		/* the same names in a client bucket are ordinary keys, placed by their own
		 * hash: the old layout's U+10FFFF "zest-mpu/" keys and "p/" alike */
		if (s3_place(nodes, 4, "bkt", part) != s3_place(nodes, 4, "bkt", key))
			other++;
		snprintf(part, sizeof(part), "\xf4\x8f\xbf\xbfzest-mpu/%016x%016llx/%05d",
		         0x1234567u + i, (unsigned long long)s3_obj_hash("bkt", key), i % 7 + 1);
		if (s3_place(nodes, 4, "bkt", part) != s3_place(nodes, 4, "bkt", key))
			other++;
	}
	assert_true(other > 200); /* about 3/4 of 400 land elsewhere than their "target" */
	/* bucket and key are not just concatenated: "ab"/"c" is not "a"/"bc" */
	assert_true(s3_obj_hash("ab", "c") != s3_obj_hash("a", "bc"));
	assert_true(s3_obj_hash("ab", "c") == s3_obj_hash("ab", "c"));
}

/* Split keys over 3 "nodes" by placement, list each with a limit, merge, and page through;
 * the result must equal listing the union. */
static void
list_node(char **keys, size_t nk, const char *after, const char *delim, unsigned limit,
          struct s3_list_result *r)
{
	char *lastp = NULL;
	unsigned count = 0;

	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < nk; i++) {
		const char *d = delim[0] ? strstr(keys[i], delim) : NULL;

		if (d) {
			size_t cl = (size_t)(d - keys[i]) + strlen(delim);
			char *p = strndup(keys[i], cl);

			if (strcmp(p, after) <= 0 || (lastp && strcmp(p, lastp) == 0)) {
				free(p);
				continue;
			}
			if (count == limit) {
				free(p);
				r->truncated = true;
				break;
			}
			s3_list_result_add_prefix(r, p);
			free(lastp);
			lastp = p;
			count++;
			continue;
		}
		if (strcmp(keys[i], after) <= 0)
			continue;
		if (count == limit) {
			r->truncated = true;
			break;
		}
		s3_list_result_add(r, keys[i], 1, "e", 0);
		free(lastp);
		lastp = strdup(keys[i]);
		count++;
	}
	if (r->truncated)
		r->next_start_after = lastp;
	else
		free(lastp);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
merge_case(const char *delim, unsigned limit)
{
	enum { N = 500 };
	char *all[N], *per[3][N];
	size_t np[3] = { 0 };
	char after[64] = "";
	char *want[N], *got[N];
	size_t nwant = 0, ngot = 0;

	for (int i = 0; i < N; i++) {
		char k[32];

		snprintf(k, sizeof(k), "%c/%03d", 'a' + i % 7, i);
		all[i] = strdup(k);
	}
	qsort(all, N, sizeof(all[0]), cmp_str);
	for (int i = 0; i < N; i++) {
		unsigned who = s3_place(nodes, 3, "b", all[i]);

		per[who][np[who]++] = all[i];
	}
	/* the expected listing: everything, grouped */
	{
		struct s3_list_result r;

		list_node(all, N, "", delim, 100000, &r);
		for (size_t i = 0, e = 0, p = 0; i < r.n + r.nprefix; i++) {
			if (p == r.nprefix ||
			    (e < r.n && strcmp(r.entries[e].key, r.prefixes[p]) < 0))
				want[nwant++] = strdup(r.entries[e++].key);
			else
				want[nwant++] = strdup(r.prefixes[p++]);
		}
		s3_list_result_fini(&r);
	}
	for (int page = 0; page < 1000; page++) {
		struct s3_list_result r[3], out;
		const struct s3_list_result *pr[3] = { &r[0], &r[1], &r[2] };

		for (int n = 0; n < 3; n++)
			list_node(per[n], np[n], after, delim, limit, &r[n]);
		assert_int_equal(s3_list_merge(pr, 3, limit, &out), 0);
		assert_true(out.n + out.nprefix <= limit);
		for (size_t i = 0, e = 0, p = 0; i < out.n + out.nprefix; i++) {
			if (p == out.nprefix ||
			    (e < out.n && strcmp(out.entries[e].key, out.prefixes[p]) < 0))
				got[ngot++] = strdup(out.entries[e++].key);
			else
				got[ngot++] = strdup(out.prefixes[p++]);
		}
		for (int n = 0; n < 3; n++)
			s3_list_result_fini(&r[n]);
		if (!out.truncated) {
			s3_list_result_fini(&out);
			break;
		}
		snprintf(after, sizeof(after), "%s", out.next_start_after);
		s3_list_result_fini(&out);
	}
	assert_int_equal(ngot, nwant);
	for (size_t i = 0; i < ngot; i++) {
		assert_string_equal(got[i], want[i]);
		free(got[i]);
		free(want[i]);
	}
	for (int i = 0; i < N; i++)
		free(all[i]);
}

static void
test_merge(void **state)
{
	(void)state;
	merge_case("", 7);
	merge_case("", 1000);
	merge_case("", 1);
	merge_case("/", 3);
	merge_case("/", 1000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_balance_and_stability),
		cmocka_unit_test(test_merge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
