/* A small SVG scatter chart (bench_svg.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "bench_svg.h"

#define ML 70 /* margins: room for tick labels and axis titles */
#define MR 20
#define MT 40
#define MB 50

struct frame {
	double x0, x1, y0, y1;     /* data range shown */
	double px0, px1, py0, py1; /* plot area in pixels (py0 is the bottom) */
	bool logy;
};

double
bench_svg_step(double span, unsigned want)
{
	double raw, mag, f;

	if (!(span > 0) || want == 0)
		return 1;
	raw = span / want;
	mag = pow(10, floor(log10(raw)));
	f = raw / mag;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void
put_text(FILE *out, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		default:
			fputc(*s, out);
		}
	}
}

static double
px(const struct frame *f, double x)
{
	return f->px0 + (x - f->x0) / (f->x1 - f->x0) * (f->px1 - f->px0);
}

static double
py(const struct frame *f, double y)
{
	double t;

	if (f->logy)
		t = (log10(y > f->y0 ? y : f->y0) - log10(f->y0)) / (log10(f->y1) - log10(f->y0));
	else
		t = (y - f->y0) / (f->y1 - f->y0);
	if (t > 1)
		t = 1;
	return f->py0 - t * (f->py0 - f->py1);
}

/* Data ranges over every series, rounded out to ticks. */
static void
ranges(struct frame *f, const struct bench_svg_series *s, unsigned ns)
{
	double xmax = 0, ymax = 0, ypos = INFINITY, step;

	for (unsigned i = 0; i < ns; i++)
		for (size_t j = 0; j < s[i].n; j++) {
			if (s[i].x[j] > xmax)
				xmax = s[i].x[j];
			if (s[i].y[j] > ymax)
				ymax = s[i].y[j];
			if (s[i].y[j] > 0 && s[i].y[j] < ypos)
				ypos = s[i].y[j];
		}
	step = bench_svg_step(xmax, 8);
	f->x0 = 0;
	f->x1 = xmax > 0 ? ceil(xmax / step) * step : 1;
	if (f->logy) {
		if (!isfinite(ypos))
			ypos = ymax = 1;
		f->y0 = pow(10, floor(log10(ypos)));
		f->y1 = pow(10, ceil(log10(ymax)));
		if (f->y1 <= f->y0)
			f->y1 = f->y0 * 10;
	} else {
		step = bench_svg_step(ymax, 6);
		f->y0 = 0;
		f->y1 = ymax > 0 ? ceil(ymax / step) * step : 1;
	}
}

static void
axes(FILE *out, const struct frame *f, const struct bench_svg_opts *o)
{
	double step = bench_svg_step(f->x1 - f->x0, 8);

	fprintf(out, "<g stroke=\"#ccc\" stroke-width=\"1\" font-size=\"12\" fill=\"#333\">\n");
	for (double x = f->x0; x <= f->x1 + step / 1e6; x += step)
		fprintf(out,
		        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
		        "stroke=\"none\">%g</text>\n",
		        px(f, x), f->py0, px(f, x), f->py1, px(f, x), f->py0 + 16, x);
	if (f->logy) {
		for (double y = f->y0; y <= f->y1 * 1.0001; y *= 10)
			fprintf(out,
			        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
			        "stroke=\"none\">%g</text>\n",
			        f->px0, py(f, y), f->px1, py(f, y), f->px0 - 6, py(f, y) + 4, y);
	} else {
		step = bench_svg_step(f->y1 - f->y0, 6);
		for (double y = f->y0; y <= f->y1 + step / 1e6; y += step)
			fprintf(out,
			        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
			        "stroke=\"none\">%g</text>\n",
			        f->px0, py(f, y), f->px1, py(f, y), f->px0 - 6, py(f, y) + 4, y);
	}
	fprintf(out,
	        "</g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
	        "stroke=\"#333\"/>\n",
	        f->px0, f->py1, f->px1 - f->px0, f->py0 - f->py1);
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">",
	        (f->px0 + f->px1) / 2, f->py0 + 38);
	put_text(out, o->xlabel);
	fprintf(out,
	        "</text>\n<text transform=\"translate(16 %.1f) rotate(-90)\" "
	        "text-anchor=\"middle\" font-size=\"13\">",
	        (f->py0 + f->py1) / 2);
	put_text(out, o->ylabel);
	fprintf(out, "</text>\n<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">",
	        (f->px0 + f->px1) / 2);
	put_text(out, o->title);
	fprintf(out, "</text>\n");
}

/* The series' mean y per x bin, as one polyline through the bins that hold points. */
static int
mean_line(FILE *out, const struct frame *f, const struct bench_svg_series *s, double bin)
{
	size_t nb = (size_t)ceil((f->x1 - f->x0) / bin) + 1;
	double *sum = calloc(nb, sizeof(*sum));
	size_t *cnt = calloc(nb, sizeof(*cnt));

	if (!sum || !cnt) {
		free(sum);
		free(cnt);
		return -ENOMEM;
	}
	for (size_t j = 0; j < s->n; j++) {
		size_t b = (size_t)((s->x[j] - f->x0) / bin);

		if (s->x[j] < f->x0 || b >= nb)
			continue;
		sum[b] += s->y[j];
		cnt[b]++;
	}
	fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
	        s->color);
	for (size_t b = 0; b < nb; b++)
		if (cnt[b])
			fprintf(out, "%.1f,%.1f ", px(f, f->x0 + (b + 0.5) * bin),
			        py(f, sum[b] / cnt[b]));
	fprintf(out, "\"/>\n");
	free(sum);
	free(cnt);
	return 0;
}

int
bench_svg_chart(FILE *out, const struct bench_svg_opts *o, const struct bench_svg_series *s,
                unsigned ns)
{
	unsigned w = o->width ? o->width : 900, h = o->height ? o->height : 500;
	struct frame f = { .px0 = ML, .px1 = w - MR, .py0 = h - MB, .py1 = MT, .logy = o->logy };

	if (ns == 0)
		return -EINVAL;
	for (unsigned i = 0; i < ns; i++)
		if (s[i].n && (!s[i].x || !s[i].y))
			return -EINVAL;
	ranges(&f, s, ns);
	fprintf(out,
	        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" "
	        "viewBox=\"0 0 %u %u\" font-family=\"sans-serif\">\n"
	        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
	        w, h, w, h);
	axes(out, &f, o);
	for (unsigned i = 0; i < ns; i++) {
		fprintf(out, "<g fill=\"%s\" fill-opacity=\"0.35\">\n", s[i].color);
		for (size_t j = 0; j < s[i].n; j++)
			fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.6\"/>\n",
			        px(&f, s[i].x[j]), py(&f, s[i].y[j]));
		fprintf(out, "</g>\n");
		if (o->bin > 0 && s[i].n && mean_line(out, &f, &s[i], o->bin))
			return -ENOMEM;
	}
	for (unsigned i = 0; i < ns; i++) {
		double ly = f.py1 + 18 + 18 * i;

		fprintf(out,
		        "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>"
		        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">",
		        f.px0 + 12, ly - 6, s[i].color, f.px0 + 32, ly);
		put_text(out, s[i].label);
		fprintf(out, "</text>\n");
	}
	fprintf(out, "</svg>\n");
	return ferror(out) ? -EIO : 0;
}
