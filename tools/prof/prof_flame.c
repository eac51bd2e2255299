/*
 * Folding and flame graph SVG. The folding follows stackcollapse-perf.pl and the drawing
 * follows flamegraph.pl (layout constants, alphabetical siblings, truncation with ".."),
 * so a .folded file written here renders the same in either tool.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prof_flame.h"

struct stack_entry {
	char *stack; /* NULL in an empty slot */
	uint64_t count, hash;
};

struct prof_flame {
	struct stack_entry *slot;
	size_t nslot, used; /* nslot is a power of two, used <= nslot / 2 */
	uint64_t samples;
};

static uint64_t
fnv1a(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

int
prof_flame_create(struct prof_flame **out)
{
	struct prof_flame *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->nslot = 256;
	f->slot = calloc(f->nslot, sizeof(*f->slot));
	if (!f->slot) {
		free(f);
		return -ENOMEM;
	}
	*out = f;
	return 0;
}

void
prof_flame_destroy(struct prof_flame *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nslot; i++)
		free(f->slot[i].stack);
	free(f->slot);
	free(f);
}

static struct stack_entry *
find_slot(struct stack_entry *slot, size_t nslot, const char *stack, uint64_t hash)
{
	size_t i = hash & (nslot - 1);

	while (slot[i].stack && (slot[i].hash != hash || strcmp(slot[i].stack, stack) != 0))
		i = (i + 1) & (nslot - 1);
	return &slot[i];
}

static int
grow(struct prof_flame *f)
{
	size_t n = f->nslot * 2;
	struct stack_entry *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < f->nslot; i++)
		if (f->slot[i].stack)
			*find_slot(s, n, f->slot[i].stack, f->slot[i].hash) = f->slot[i];
	free(f->slot);
	f->slot = s;
	f->nslot = n;
	return 0;
}

int
prof_flame_add(struct prof_flame *f, const char *stack, uint64_t count)
{
	uint64_t hash;
	struct stack_entry *e;

	if (!stack || !*stack || count == 0)
		return -EINVAL;
	if ((f->used + 1) * 2 > f->nslot && grow(f) < 0)
		return -ENOMEM;
	hash = fnv1a(stack, strlen(stack));
	e = find_slot(f->slot, f->nslot, stack, hash);
	if (!e->stack) {
		e->stack = strdup(stack);
		if (!e->stack)
			return -ENOMEM;
		e->hash = hash;
		f->used++;
	}
	e->count += count;
	f->samples += count;
	return 0;
}

uint64_t
prof_flame_samples(const struct prof_flame *f)
{
	return f->samples;
}

/* A growing string; p stays NUL-terminated. */
struct sbuf {
	char *p;
	size_t n, cap;
};

static int
sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (b->n + n + 1 > cap)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return 0;
}

/*
 * One frame line of `perf script`: "<ip> <sym>+0x<off> (<dso>)". Appends the frame's
 * name to b: offset dropped, "[unknown]" replaced by the dso's basename, ';' (our
 * separator) replaced by ':', control bytes by '?', "_[k]" after kernel frames.
 */
static int
fold_frame(struct sbuf *b, const char *line)
{
	const char *p = line, *sym, *end, *dso = NULL, *dso_end = NULL;
	unsigned long long ip;
	bool kernel;
	size_t start = b->n;
	int rc;

	while (isspace((unsigned char)*p))
		p++;
	ip = strtoull(p, (char **)&sym, 16);
	while (isspace((unsigned char)*sym))
		sym++;
	end = sym + strlen(sym);
	while (end > sym && isspace((unsigned char)end[-1]))
		end--;
	if (end > sym && end[-1] == ')') {
		/* the matching '(': a dso may end in " (deleted)" */
		int depth = 0;

		for (const char *q = end - 1; q > sym; q--) {
			depth += (*q == ')') - (*q == '(');
			if (depth == 0 && q[-1] == ' ') {
				dso = q + 1;
				dso_end = end - 1;
				end = q - 1;
				break;
			}
		}
	}
	/* "+0x1c5" at the end is the offset into the symbol. */
	for (const char *q = end; q > sym; q--) {
		if (q[-1] != '+')
			continue;
		if (end - q >= 3 && q[0] == '0' && q[1] == 'x') {
			const char *h = q + 2;

			while (h < end && isxdigit((unsigned char)*h))
				h++;
			if (h == end)
				end = q - 1;
		}
		break;
	}
	kernel = ip >= 0xffff800000000000ull ||
	         (dso && dso_end - dso >= 8 && !strncmp(dso, "[kernel.", 8));
	if (end == sym || (end - sym == 9 && !strncmp(sym, "[unknown]", 9))) {
		if (dso && dso_end > dso && *dso == '[' &&
		    !(dso_end - dso == 9 && !strncmp(dso, "[unknown]", 9))) {
			rc = sb_put(b, dso,
			            (size_t)(dso_end - dso)); /* [vdso], [kernel.kallsyms] */
		} else if (dso && dso_end > dso && *dso != '[') {
			const char *base = dso;

			for (const char *q = dso; q < dso_end; q++)
				if (*q == '/')
					base = q + 1;
			rc = sb_put(b, "[", 1);
			rc = rc ?: sb_put(b, base, (size_t)(dso_end - base));
			rc = rc ?: sb_put(b, "]", 1);
		} else {
			rc = sb_put(b, "[unknown]", 9);
		}
	} else {
		rc = sb_put(b, sym, (size_t)(end - sym));
	}
	if (rc < 0)
		return rc;
	for (size_t i = start; i < b->n; i++)
		if (b->p[i] == ';')
			b->p[i] = ':';
		else if ((unsigned char)b->p[i] < 0x20)
			b->p[i] = '?';
	return kernel ? sb_put(b, "_[k]", 4) : 0;
}

/*
 * The command name of a header line "comm pid[/tid] time: period event:": everything
 * before the first all-digit field (a comm may contain spaces, which become '_').
 */
static int
fold_comm(struct sbuf *b, const char *line)
{
	size_t len, end;

	while (isspace((unsigned char)*line))
		line++;
	len = strlen(line);
	end = len;

	for (size_t i = 1; i < len; i++) {
		size_t j = i;

		if (!isspace((unsigned char)line[i - 1]) || !isdigit((unsigned char)line[i]))
			continue;
		while (isdigit((unsigned char)line[j]))
			j++;
		if (line[j] == '/')
			for (j++; isdigit((unsigned char)line[j]);)
				j++;
		if (line[j] == 0 || isspace((unsigned char)line[j]) || line[j] == ':') {
			end = i - 1;
			break;
		}
	}
	while (end > 0 && isspace((unsigned char)line[end - 1]))
		end--;
	if (end == 0)
		return sb_put(b, "[unknown]", 9);
	for (size_t i = 0; i < end; i++) {
		char c = line[i];

		if (isspace((unsigned char)c))
			c = '_';
		else if (c == ';')
			c = ':';
		else if ((unsigned char)c < 0x20)
			c = '?';
		if (sb_put(b, &c, 1) < 0)
			return -ENOMEM;
	}
	return 0;
}

struct sample {
	struct sbuf comm;
	struct sbuf frames; /* frame names, leaf first, each followed by '\0' */
	size_t nframes;
	bool open;
	bool header_frame; /* frames holds the header's own "ip sym (dso)" only */
};

/*
 * Without call chains (perf record without -g) the header itself ends in the sampled
 * "ip sym+off (dso)", after the event's "name: ". Returns that tail, or NULL.
 */
static const char *
header_frame(const char *line)
{
	const char *tail = NULL, *p = line;

	while ((p = strstr(p, ": ")) != NULL)
		tail = ++p; /* the last ": ": symbols have "::", not ": " */
	if (!tail)
		return NULL;
	while (isspace((unsigned char)*tail))
		tail++;
	p = tail;
	while (isxdigit((unsigned char)*p))
		p++;
	if (p == tail || *p != ' ' || line[strlen(line) - 1] != ')')
		return NULL;
	return tail;
}

/* Joins comm and the frames root first into one folded stack and adds it once. */
static int
flush_sample(struct prof_flame *f, struct sample *s, struct sbuf *stack)
{
	const char **v;
	const char *p;
	int rc;

	if (!s->open)
		return 0;
	s->open = false;
	v = malloc((s->nframes + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	p = s->frames.p;
	for (size_t i = 0; i < s->nframes; i++) {
		v[i] = p;
		p += strlen(p) + 1;
	}
	stack->n = 0;
	rc = sb_put(stack, s->comm.p, s->comm.n);
	for (size_t i = s->nframes; rc == 0 && i-- > 0;) {
		rc = sb_put(stack, ";", 1);
		rc = rc ?: sb_put(stack, v[i], strlen(v[i]));
	}
	free(v);
	return rc ?: prof_flame_add(f, stack->p, 1);
}

long
prof_flame_read_perf(struct prof_flame *f, FILE *in)
{
	struct sample s = { 0 };
	struct sbuf stack = { 0 };
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long n = 0;
	int rc = 0;

	while (rc == 0 && (len = getline(&line, &cap, in)) >= 0) {
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (line[0] == '#')
			continue;
		if (len == 0 || strspn(line, " \t") == (size_t)len) {
			if (s.open)
				n++;
			rc = flush_sample(f, &s, &stack);
		} else if (line[0] != '\t') {
			/* perf prints each call-chain entry after a tab; a header starts with the
			 * comm, right-aligned in spaces when there are no call chains. */
			/* A header without the blank line before it still starts a sample. */
			if (s.open)
				n++;
			rc = flush_sample(f, &s, &stack);
			s.comm.n = s.frames.n = s.nframes = 0;
			rc = rc ?: fold_comm(&s.comm, line);
			s.open = true;
			s.header_frame = rc == 0 && header_frame(line);
			if (s.header_frame) {
				rc = fold_frame(&s.frames, header_frame(line));
				rc = rc ?: sb_put(&s.frames, "", 1);
				s.nframes = rc == 0;
			}
		} else if (s.open) {
			if (s.header_frame) /* a call chain follows after all: it has the leaf */
				s.frames.n = s.nframes = 0;
			s.header_frame = false;
			rc = fold_frame(&s.frames, line);
			rc = rc ?: sb_put(&s.frames, "", 1); /* the NUL separates frames */
			s.nframes += rc == 0;
		}
	}
	if (rc == 0 && ferror(in))
		rc = -EIO;
	if (rc == 0 && s.open) {
		n++;
		rc = flush_sample(f, &s, &stack);
	}
	free(line);
	free(s.comm.p);
	free(s.frames.p);
	free(stack.p);
	return rc < 0 ? rc : n;
}

long
prof_flame_read_perf_data(struct prof_flame *f, const char *perf_data)
{
	char cmd[4200];
	FILE *p;
	long n;
	int status;

	if (strchr(perf_data, '\'') || strlen(perf_data) > 4096)
		return -EINVAL;
	snprintf(cmd, sizeof(cmd), "perf script -i '%s' 2>/dev/null", perf_data);
	p = popen(cmd, "r");
	if (!p)
		return -errno;
	n = prof_flame_read_perf(f, p);
	status = pclose(p);
	if (n >= 0 && (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0))
		return n > 0 ? n : -ENOENT;
	return n;
}

static int
cmp_entry(const void *a, const void *b)
{
	return strcmp((*(const struct stack_entry *const *)a)->stack,
	              (*(const struct stack_entry *const *)b)->stack);
}

/* The entries in use, sorted by stack; caller frees the array. */
static int
sorted_entries(const struct prof_flame *f, const struct stack_entry ***out)
{
	const struct stack_entry **v = malloc((f->used + 1) * sizeof(*v));
	size_t k = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < f->nslot; i++)
		if (f->slot[i].stack)
			v[k++] = &f->slot[i];
	if (k > 1)
		qsort(v, k, sizeof(*v), cmp_entry);
	*out = v;
	return (int)k;
}

int
prof_flame_write_folded(const struct prof_flame *f, FILE *out)
{
	const struct stack_entry **v;
	int n = sorted_entries(f, &v);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		fprintf(out, "%s %llu\n", v[i]->stack, (unsigned long long)v[i]->count);
	free(v);
	return ferror(out) ? -EIO : 0;
}

/* Does a user-space frame name [s, s + n) contain one of the needles? */
static bool
frame_matches(const char *s, size_t n, const char *const *needles)
{
	if (!needles || (n >= 4 && !memcmp(s + n - 4, "_[k]", 4)))
		return false;
	for (; *needles; needles++) {
		size_t k = strlen(*needles);

		for (size_t i = 0; k && i + k <= n; i++)
			if (!memcmp(s + i, *needles, k))
				return true;
	}
	return false;
}

double
prof_flame_share(const struct prof_flame *f, const char *const *needles)
{
	uint64_t hit = 0;

	if (f->samples == 0)
		return 0;
	for (size_t i = 0; i < f->nslot; i++) {
		const char *p = f->slot[i].stack;

		while (p) {
			const char *semi = strchr(p, ';');
			size_t n = semi ? (size_t)(semi - p) : strlen(p);

			if (frame_matches(p, n, needles)) {
				hit += f->slot[i].count;
				break;
			}
			p = semi ? semi + 1 : NULL;
		}
	}
	return (double)hit / (double)f->samples;
}

/* ---- drawing ---- */

struct node {
	const char *name; /* not NUL-terminated: name_len bytes */
	size_t name_len;
	uint64_t count;
	struct node **kid;
	size_t nkid, capkid;
};

static void
node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nkid; i++)
		node_free(n->kid[i]);
	free(n->kid);
	free(n);
}

static struct node *
node_child(struct node *n, const char *name, size_t len)
{
	struct node *c;

	for (size_t i = 0; i < n->nkid; i++)
		if (n->kid[i]->name_len == len && !memcmp(n->kid[i]->name, name, len))
			return n->kid[i];
	if (n->nkid == n->capkid) {
		size_t cap = n->capkid ? n->capkid * 2 : 4;
		struct node **k = realloc(n->kid, cap * sizeof(*k));

		if (!k)
			return NULL;
		n->kid = k;
		n->capkid = cap;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->name = name;
	c->name_len = len;
	n->kid[n->nkid++] = c;
	return c;
}

static int
cmp_node(const void *a, const void *b)
{
	const struct node *x = *(const struct node *const *)a, *y = *(const struct node *const *)b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, n);

	return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static void
node_sort(struct node *n)
{
	if (n->nkid > 1)
		qsort(n->kid, n->nkid, sizeof(*n->kid), cmp_node);
	for (size_t i = 0; i < n->nkid; i++)
		node_sort(n->kid[i]);
}

/* flamegraph.pl's defaults. */
#define FG_FRAME_H   16
#define FG_FONT      12
#define FG_FONT_W    0.59
#define FG_MIN_W     0.1
#define FG_XPAD      10
#define FG_YPAD1     (FG_FONT * 3)
#define FG_YPAD2     (FG_FONT * 2 + 10)
#define FG_FRAME_PAD 1

struct draw {
	FILE *out;
	double px_per_sample;
	uint64_t total;
	int height;
	const char *const *highlight;
};

static void
xml_text(FILE *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '<')
			fputs("&lt;", out);
		else if (c == '>')
			fputs("&gt;", out);
		else if (c == '&')
			fputs("&amp;", out);
		else if (c == '"')
			fputs("&quot;", out);
		else if (c == '\'')
			fputs("&apos;", out);
		else if (c < 0x20 || c >= 0x7f)
			fputc('?', out); /* keeps the document well-formed ASCII */
		else
			fputc(c, out);
	}
}

/*
 * Deterministic colours from the name (flamegraph.pl --hash), in its java palette's
 * scheme: native frames red, kernel orange; copies blue so that they stand out.
 */
static void
frame_color(const struct draw *d, const struct node *n, int *r, int *g, int *b)
{
	uint64_t h = fnv1a(n->name, n->name_len);
	double v1 = (double)(h & 0xffff) / 65536.0, v2 = (double)((h >> 16) & 0xffff) / 65536.0;

	if (frame_matches(n->name, n->name_len, d->highlight)) {
		*r = 60 + (int)(50 * v1), *g = 110 + (int)(50 * v1), *b = 215 + (int)(40 * v2);
	} else if (n->name_len >= 4 && !memcmp(n->name + n->name_len - 4, "_[k]", 4)) {
		*r = 190 + (int)(65 * v1), *g = 90 + (int)(65 * v1), *b = 0;
	} else {
		*r = 200 + (int)(55 * v2), *g = 50 + (int)(80 * v1), *b = *g;
	}
}

static void
draw_node(const struct draw *d, const struct node *n, uint64_t start, int depth)
{
	double x1 = FG_XPAD + (double)start * d->px_per_sample;
	double w = (double)n->count * d->px_per_sample;
	int y1 = d->height - FG_YPAD2 - (depth + 1) * FG_FRAME_H + FG_FRAME_PAD;
	int y2 = d->height - FG_YPAD2 - depth * FG_FRAME_H;
	int r, g, b, chars;
	uint64_t x = start;

	if (w < FG_MIN_W)
		return;
	frame_color(d, n, &r, &g, &b);
	fputs("<g>\n<title>", d->out);
	xml_text(d->out, n->name, n->name_len);
	fprintf(d->out, " (%llu samples, %.2f%%)</title>", (unsigned long long)n->count,
	        100.0 * (double)n->count / (double)d->total);
	fprintf(d->out,
	        "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" "
	        "rx=\"2\" ry=\"2\"/>\n",
	        x1, y1, w, y2 - y1, r, g, b);
	chars = (int)(w / (FG_FONT * FG_FONT_W));
	if (chars >= 3) {
		fprintf(d->out, "<text x=\"%.2f\" y=\"%.1f\">", x1 + 3, 3 + (y1 + y2) / 2.0);
		if (n->name_len <= (size_t)chars) {
			xml_text(d->out, n->name, n->name_len);
		} else {
			xml_text(d->out, n->name, (size_t)chars - 2);
			fputs("..", d->out);
		}
		fputs("</text>\n", d->out);
	}
	fputs("</g>\n", d->out);
	for (size_t i = 0; i < n->nkid; i++) {
		draw_node(d, n->kid[i], x, depth + 1);
		x += n->kid[i]->count;
	}
}

/* Deepest depth at which a frame is still wide enough to draw. */
static int
max_depth(const struct node *n, double px_per_sample, int depth)
{
	int m = depth;

	for (size_t i = 0; i < n->nkid; i++) {
		if ((double)n->kid[i]->count * px_per_sample < FG_MIN_W)
			continue;
		int k = max_depth(n->kid[i], px_per_sample, depth + 1);

		m = k > m ? k : m;
	}
	return m;
}

int
prof_flame_write_svg(const struct prof_flame *f, FILE *out, const char *title, unsigned width_px,
                     const char *const *highlight)
{
	struct node root = { .name = "all", .name_len = 3 };
	const struct stack_entry **v;
	struct draw d = { .out = out, .total = f->samples, .highlight = highlight };
	int n, rc = 0, width = width_px ? (int)width_px : 1200;

	if (width < 100 || width > 100000)
		return -EINVAL;
	n = sorted_entries(f, &v);
	if (n < 0)
		return n;
	for (int i = 0; i < n && rc == 0; i++) {
		struct node *at = &root;
		const char *p = v[i]->stack;

		root.count += v[i]->count;
		while (p && at) {
			const char *semi = strchr(p, ';');
			size_t len = semi ? (size_t)(semi - p) : strlen(p);

			at = node_child(at, p, len);
			if (at)
				at->count += v[i]->count;
			p = semi ? semi + 1 : NULL;
		}
		if (!at)
			rc = -ENOMEM;
	}
	free(v);
	if (rc < 0)
		goto free_tree;
	node_sort(&root);
	d.px_per_sample = root.count ? (double)(width - 2 * FG_XPAD) / (double)root.count : 0;
	d.height = (max_depth(&root, d.px_per_sample, 0) + 1) * FG_FRAME_H + FG_YPAD1 + FG_YPAD2;

	fprintf(out,
	        "<?xml version=\"1.0\" standalone=\"no\"?>\n"
	        "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
	        "xmlns=\"http://www.w3.org/2000/svg\">\n"
	        "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
	        "<stop stop-color=\"#eeeeee\" offset=\"5%%\"/>"
	        "<stop stop-color=\"#eeeeb0\" offset=\"95%%\"/></linearGradient></defs>\n"
	        "<style type=\"text/css\">text { font-family: Verdana, sans-serif; "
	        "font-size: %dpx; fill: rgb(0,0,0); }</style>\n"
	        "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#background)\"/>\n",
	        width, d.height, width, d.height, FG_FONT, width, d.height);
	fprintf(out, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" style=\"font-size: 17px\">",
	        width / 2);
	xml_text(out, title ? title : "Flame Graph", strlen(title ? title : "Flame Graph"));
	fputs("</text>\n", out);
	fprintf(out,
	        "<text x=\"%d\" y=\"%d\">%llu samples; width = share of samples, "
	        "siblings in alphabetical order; red: user space, orange: kernel",
	        FG_XPAD, d.height - FG_YPAD2 / 2, (unsigned long long)f->samples);
	if (highlight && *highlight) {
		fputs("; blue: user-space frames matching ", out);
		for (const char *const *h = highlight; *h; h++) {
			if (h != highlight)
				fputs("|", out);
			xml_text(out, *h, strlen(*h));
		}
	}
	fputs("</text>\n", out);
	if (root.count)
		draw_node(&d, &root, 0, 0);
	fputs("</svg>\n", out);
	rc = ferror(out) ? -EIO : 0;
free_tree:
	for (size_t i = 0; i < root.nkid; i++)
		node_free(root.kid[i]);
	free(root.kid);
	return rc;
}
