/* zest-prof's flame graphs: folding a canned `perf script` sample (argv[1]) and the SVG
 * drawn from it, parsed back with libxml2. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "prof_flame.h"

static const char *sample_path;
static const char *const copy_frames[] = { "memcpy", "memmove", NULL };

/* What stackcollapse-perf.pl would print for the sample, checked by hand. */
static const char folded_expected[] =
        "default_executo;[unknown];__memmove_avx_unaligned_erms;clear_page_erms_[k] 1\n"
        "zest-datanode;crc32_iscsi_01 1\n"
        "zest-datanode;start_thread;cq_thread;[libgrpc.so.29.0.0];__libc_recvmsg;"
        "tcp_recvmsg_[k];_copy_to_iter_[k] 2\n"
        "zest-datanode;start_thread;cq_thread;rpc_marshal_recv;recv_copy;"
        "grpc_byte_buffer_reader_readall;__memcpy_avx_unaligned_erms 2\n"
        "zest-datanode;zc_now_ns;__vdso_clock_gettime 1\n";

static struct prof_flame *
load_sample(void)
{
	struct prof_flame *f;
	FILE *in = fopen(sample_path, "r");

	assert_non_null(in);
	assert_int_equal(prof_flame_create(&f), 0);
	assert_int_equal(prof_flame_read_perf(f, in), 7);
	fclose(in);
	return f;
}

/* Runs a writer into memory; returns the NUL-terminated text (free it). */
static char *
capture(const struct prof_flame *f, bool svg, const char *title, unsigned width)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	if (svg)
		assert_int_equal(prof_flame_write_svg(f, out, title, width, copy_frames), 0);
	else
		assert_int_equal(prof_flame_write_folded(f, out), 0);
	fclose(out);
	return buf;
}

static void
test_fold_sample(void **state)
{
	struct prof_flame *f = load_sample();
	char *text = capture(f, false, NULL, 0);

	(void)state;
	assert_int_equal(prof_flame_samples(f), 7);
	assert_string_equal(text, folded_expected);
	free(text);
	prof_flame_destroy(f);
}

static void
test_share(void **state)
{
	struct prof_flame *f = load_sample();
	const char *const kernel_only[] = { "copy_to_iter", NULL };
	const char *const none[] = { NULL };

	(void)state;
	/* two memcpy samples, one memmove; the kernel's _copy_to_iter does not count */
	assert_true(prof_flame_share(f, copy_frames) > 3.0 / 7 - 1e-9);
	assert_true(prof_flame_share(f, copy_frames) < 3.0 / 7 + 1e-9);
	assert_true(prof_flame_share(f, kernel_only) == 0);
	assert_true(prof_flame_share(f, none) == 0);
	prof_flame_destroy(f);
}

static void
test_add(void **state)
{
	struct prof_flame *f;
	char *text;

	(void)state;
	assert_int_equal(prof_flame_create(&f), 0);
	assert_int_equal(prof_flame_add(f, "", 1), -EINVAL);
	assert_int_equal(prof_flame_add(f, "a;b", 0), -EINVAL);
	/* enough distinct stacks to grow the table a few times */
	for (int i = 0; i < 2000; i++) {
		char s[32];

		snprintf(s, sizeof(s), "t;f%04d", i);
		assert_int_equal(prof_flame_add(f, s, 1 + (i == 7)), 0);
	}
	assert_int_equal(prof_flame_add(f, "t;f0007", 2), 0);
	assert_int_equal(prof_flame_samples(f), 2003);
	text = capture(f, false, NULL, 0);
	assert_non_null(strstr(text, "t;f0000 1\nt;f0001 1\n"));
	assert_non_null(strstr(text, "\nt;f0007 4\nt;f0008 1\n"));
	free(text);
	prof_flame_destroy(f);
	prof_flame_destroy(NULL);
}

static double
attr_num(xmlNode *n, const char *name)
{
	xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
	double d;

	assert_non_null(v);
	d = strtod((const char *)v, NULL);
	xmlFree(v);
	return d;
}

static xmlNode *
child(xmlNode *n, const char *name)
{
	for (xmlNode *c = n->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && !strcmp((const char *)c->name, name))
			return c;
	return NULL;
}

/* One drawn frame: its tooltip, rectangle and label. */
struct frame {
	char title[256], label[256];
	double x, y, w;
	int r, g, b;
};

/* Parses the SVG (fails the test unless well-formed) and collects its frames. */
static int
parse_frames(const char *svg, struct frame *fr, int max)
{
	xmlDoc *doc = xmlReadMemory(svg, (int)strlen(svg), "flame.svg", NULL,
	                            XML_PARSE_NONET | XML_PARSE_NOBLANKS);
	xmlNode *root;
	int n = 0;

	assert_non_null(doc);
	root = xmlDocGetRootElement(doc);
	assert_string_equal((const char *)root->name, "svg");
	for (xmlNode *g = root->children; g; g = g->next) {
		xmlNode *title, *rect, *text;
		xmlChar *s;

		if (g->type != XML_ELEMENT_NODE || strcmp((const char *)g->name, "g"))
			continue;
		assert_true(n < max);
		title = child(g, "title");
		rect = child(g, "rect");
		text = child(g, "text");
		assert_non_null(title);
		assert_non_null(rect);
		s = xmlNodeGetContent(title);
		snprintf(fr[n].title, sizeof(fr[n].title), "%s", (const char *)s);
		xmlFree(s);
		fr[n].label[0] = 0;
		if (text) {
			s = xmlNodeGetContent(text);
			snprintf(fr[n].label, sizeof(fr[n].label), "%s", (const char *)s);
			xmlFree(s);
		}
		fr[n].x = attr_num(rect, "x");
		fr[n].y = attr_num(rect, "y");
		fr[n].w = attr_num(rect, "width");
		s = xmlGetProp(rect, (const xmlChar *)"fill");
		assert_int_equal(
		        sscanf((const char *)s, "rgb(%d,%d,%d)", &fr[n].r, &fr[n].g, &fr[n].b), 3);
		xmlFree(s);
		n++;
	}
	xmlFreeDoc(doc);
	return n;
}

static const struct frame *
find(const struct frame *fr, int n, const char *title_prefix)
{
	for (int i = 0; i < n; i++)
		if (!strncmp(fr[i].title, title_prefix, strlen(title_prefix)))
			return &fr[i];
	fail_msg("no frame titled %s", title_prefix);
	return NULL;
}

static void
test_svg(void **state)
{
	struct prof_flame *f = load_sample();
	char *svg = capture(f, true, "copy <marshaller> & co", 0);
	struct frame fr[64];
	const double px = 1180.0 / 7; /* 1200 wide, 10 px padding each side */
	int n = parse_frames(svg, fr, 64);
	const struct frame *all, *dflt, *zest, *crc, *st, *zcnow, *memcpy_f, *memmove_f, *k;

	(void)state;
	assert_non_null(strstr(svg, ">copy &lt;marshaller&gt; &amp; co</text>"));
	assert_int_equal(n, 19); /* distinct frames of the folded stacks, plus "all" */
	all = find(fr, n, "all (7 samples, 100.00%)");
	assert_true(all->x == 10 && all->w > 1179.9 && all->w < 1180.1);
	assert_string_equal(all->label, "all");

	/* siblings in alphabetical order, widths proportional to samples */
	dflt = find(fr, n, "default_executo (1 samples, 14.29%)");
	zest = find(fr, n, "zest-datanode (6 samples, 85.71%)");
	assert_true(dflt->x == 10 && zest->x > dflt->x);
	assert_true(zest->x > 10 + px - 0.1 && zest->x < 10 + px + 0.1);
	assert_true(zest->w > 6 * px - 0.1 && zest->w < 6 * px + 0.1);
	crc = find(fr, n, "crc32_iscsi_01 (1 samples, 14.29%)");
	st = find(fr, n, "start_thread (4 samples, 57.14%)");
	zcnow = find(fr, n, "zc_now_ns (1 samples, 14.29%)");
	assert_true(crc->x == zest->x && st->x > crc->x && zcnow->x > st->x);
	assert_true(zcnow->x > 10 + 6 * px - 0.1 && zcnow->x < 10 + 6 * px + 0.1);
	/* deeper frames sit higher: y decreases by one frame height per level */
	assert_true(all->y - zest->y == 16 && zest->y - st->y == 16);

	/* labels cut to what fits (168.6 px / 7.08 px per char = 23 chars) */
	memmove_f = find(fr, n, "__memmove_avx_unaligned_erms (1 samples");
	assert_string_equal(memmove_f->label, "__memmove_avx_unalign..");
	memcpy_f = find(fr, n, "__memcpy_avx_unaligned_erms (2 samples, 28.57%)");
	assert_string_equal(memcpy_f->label, "__memcpy_avx_unaligned_erms");

	/* colours: copies blue, kernel orange, the rest red */
	assert_true(memcpy_f->b >= 215 && memcpy_f->r < 120);
	assert_true(memmove_f->b >= 215);
	k = find(fr, n, "_copy_to_iter_[k] (2 samples");
	assert_true(k->b == 0 && k->r >= 190 && k->g >= 90);
	assert_true(st->r >= 200 && st->g == st->b);
	free(svg);
	prof_flame_destroy(f);
}

static void
test_svg_narrow_and_escaped(void **state)
{
	struct prof_flame *f;
	struct frame fr[16];
	char *svg;
	int n;

	(void)state;
	assert_int_equal(prof_flame_create(&f), 0);
	assert_int_equal(prof_flame_add(f, "app;big", 1000000), 0);
	assert_int_equal(prof_flame_add(f, "app;tiny", 1), 0); /* 0.0006 px: not drawn */
	assert_int_equal(prof_flame_add(f, "app;a<b>&\"c'\x01", 500000), 0);
	svg = capture(f, true, NULL, 600);
	n = parse_frames(svg, fr, 16);
	assert_int_equal(n, 4); /* all, app, big and the escaped one */
	find(fr, n, "a<b>&\"c'? (500000 samples, 33.33%)");
	assert_null(strstr(svg, "tiny"));
	assert_non_null(strstr(svg, "width=\"600\""));
	free(svg);
	prof_flame_destroy(f);

	/* an empty set still draws a valid document; a width of 10 px cannot hold one */
	assert_int_equal(prof_flame_create(&f), 0);
	assert_int_equal(prof_flame_write_svg(f, stdout, NULL, 10, NULL), -EINVAL);
	svg = capture(f, true, "empty", 0);
	assert_int_equal(parse_frames(svg, fr, 16), 0);
	free(svg);
	prof_flame_destroy(f);
}

static void
test_perf_text_edge_cases(void **state)
{
	static const char text[] = "comm;with;semis 12 1.0: 1 cpu-clock:\n"
	                           "\t  abc f+0x10 (/x/lib.so)\n"
	                           "\t  abd g+0xZZ (/x/lib.so)\n"
	                           "\t  abe [unknown] ([vdso])\n"
	                           "\t  abf [unknown] (/tmp/old lib.so (deleted))\n"
	                           "\n\n"
	                           "lonely 13 2.0: 1 cpu-clock:\n"
	                           "\n";
	struct prof_flame *f;
	FILE *in = fmemopen((void *)text, sizeof(text) - 1, "r");
	char *out;

	(void)state;
	assert_int_equal(prof_flame_create(&f), 0);
	assert_int_equal(prof_flame_read_perf(f, in), 2);
	fclose(in);
	out = capture(f, false, NULL, 0);
	/* ';' in a name would split the frame: it becomes ':'; a bad offset stays */
	assert_string_equal(out,
	                    "comm:with:semis;[old lib.so (deleted)];[vdso];g+0xZZ;f 1\nlonely 1\n");
	free(out);
	prof_flame_destroy(f);
	/* without call chains the header carries the one sampled frame */
	{
		static const char flat[] =
		        "   zest-datanode 23600 10586.117405:    2004008 cpu-clock:  "
		        "ffffffff81b6ac04 "
		        "_copy_to_iter+0x154 ([kernel.kallsyms])\n"
		        "zest-datanode 23600 10586.118405:    2004008 cpu-clock:  4d63f5 "
		        "grpc_core::ExecCtx::Flush+0x42 (/usr/lib/libgrpc.so.29)\n"
		        "zest-datanode 23600 10586.119405:    2004008 cpu-clock:  4d63f5 "
		        "grpc_core::ExecCtx::Flush+0x42 (/usr/lib/libgrpc.so.29)\n"
		        "            idle 0 10586.120405:    2004008 cpu-clock: \n";

		in = fmemopen((void *)flat, sizeof(flat) - 1, "r");
		assert_int_equal(prof_flame_create(&f), 0);
		assert_int_equal(prof_flame_read_perf(f, in), 4);
		fclose(in);
		out = capture(f, false, NULL, 0);
		assert_string_equal(out, "idle 1\nzest-datanode;_copy_to_iter_[k] 1\n"
		                         "zest-datanode;grpc_core::ExecCtx::Flush 2\n");
		free(out);
		prof_flame_destroy(f);
	}
	/* perf that cannot read its file gives no samples, not a crash */
	assert_int_equal(prof_flame_create(&f), 0);
	assert_true(prof_flame_read_perf_data(f, "/nonexistent/perf.data") < 0);
	assert_int_equal(prof_flame_read_perf_data(f, "it's"), -EINVAL);
	prof_flame_destroy(f);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fold_sample),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_svg),
		cmocka_unit_test(test_svg_narrow_and_escaped),
		cmocka_unit_test(test_perf_text_edge_cases),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s perf_script_sample.txt\n", argv[0]);
		return 2;
	}
	sample_path = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
