/* metrics_info.h - VERBPROXY INFO [section]: the figures of /metrics in
 * Redis's INFO style ("# Section" headers, name:value lines, CRLF, a blank
 * line between sections). Sections: server, clients, stats, upstream (the
 * default set), commandstats (cmdstat_<name>:calls=..,failed_calls=..[,usec=
 * ..,usec_per_call=..] as Redis's), latencystats (per command family), and
 * all / everything for every one. An unknown section gives an empty text,
 * as Redis's INFO does. */
#ifndef VP_METRICS_INFO_H
#define VP_METRICS_INFO_H

#include <stddef.h>

#include "proxy/buffer.h"

struct vp_server;

/* section: NULL for the default set; any case. */
void metrics_info_write(const struct vp_server *srv, const char *section, size_t section_len, vp_buf *out);

#endif
