/* prom.h - a strict parser of Prometheus text exposition format 0.0.4, for
 * checking what the proxy's /metrics serves (and then reading values).
 *
 * Strict: every line is "# HELP name text", "# TYPE name type" (counter,
 * gauge, histogram, summary, untyped; once per name, before its samples)
 * or a sample `name{label="value",...} value` with valid metric and label
 * names, label values escaped (\\ \" \n only), no label twice, a float value
 * (or +Inf, -Inf, NaN); every sample's family (its name, or for a
 * histogram the name without _bucket/_sum/_count) has a TYPE and a HELP;
 * a family's samples are contiguous; no sample twice; counters are >= 0.
 * Each histogram series has buckets with `le` strictly ascending, counts
 * cumulative (never decreasing), an le="+Inf" bucket equal to _count, and
 * a _sum. The text ends with a line feed. */
#ifndef VT_PROM_H
#define VT_PROM_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vt_prom_sample {
    char *name;
    char *labels; /* canonical: name="value" pairs as written (escaped), comma separated; "" if none */
    double value;
} vt_prom_sample;

typedef struct vt_prom {
    vt_prom_sample *samples;
    size_t n, cap;
    char **type_names, **types;
    size_t ntypes;
    char **help_names;
    size_t nhelps;
} vt_prom;

/* Parse text; false with the first violation (line number and why) in why. */
bool vt_prom_parse(const char *text, size_t len, vt_prom *p, char *why, size_t whylen);
void vt_prom_free(vt_prom *p);
/* The value of the sample with exactly this name and labels ("" or e.g.
 * `cmd="get"`); `def` if there is none. */
double vt_prom_get(const vt_prom *p, const char *name, const char *labels, double def);
/* The family's TYPE ("counter"...), or NULL. */
const char *vt_prom_type(const vt_prom *p, const char *family);

#endif
