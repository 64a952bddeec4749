/* metrics_prom.h - every figure of the proxy as Prometheus text exposition
 * format 0.0.4 (what GET /metrics answers): a HELP and a TYPE line for
 * each family, base units (seconds, bytes), the `verbproxy_` prefix, and
 * Prometheus client libraries' process_* figures. Label values come from
 * bounded sets only (cmdid.h's names, fixed reasons).
 * docs/operations.md#every-metric lists every family. */
#ifndef VP_METRICS_PROM_H
#define VP_METRICS_PROM_H

#include "proxy/buffer.h"

struct vp_server;

void metrics_prom_write(const struct vp_server *srv, vp_buf *out);

#endif
