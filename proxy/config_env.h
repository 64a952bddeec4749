/* config_env.h - every directive also from the environment:
 * VERBPROXY_<DIRECTIVE> (upper case, '-' as '_'), e.g.
 * VERBPROXY_UPSTREAM=redis:6379, VERBPROXY_UPSTREAM_TLS=yes.
 * Precedence (reload.c, at start and at SIGHUP): the config file, then the
 * environment, then the flags. VERBPROXY_UPSTREAM_PASS keeps its own rule (conf_finish). */
#ifndef VP_CONFIG_ENV_H
#define VP_CONFIG_ENV_H

#include "proxy/config.h"

#define CONF_ENV_PREFIX "VERBPROXY_"

/* Apply every VERBPROXY_* variable of env ("NAME=value" strings,
 * NULL-terminated: `environ`, or a test's array), in order. A variable that
 * names no directive is an error (a typo must not pass silently), except
 * those the proxy reads itself (VERBPROXY_UPSTREAM_PASS). `verb` and `user`
 * take one directive per line; the others exactly one line. The values of
 * secrets (conf_is_secret) are overwritten with zeros in place, taken or
 * not. Returns 0, or -1 with "VARIABLE: reason" in err (the first error;
 * every secret is still wiped). */
int conf_apply_env(vp_config *c, char **env, char *err, size_t errlen);
/* Remove the secret VERBPROXY_* variables from the process's environment
 * (after conf_apply_env wiped their values), so nothing started later
 * inherits them. Not VERBPROXY_UPSTREAM_PASS: conf_finish has yet to read
 * it (main.c wipes it after). */
void conf_env_unset_secrets(void);
/* Copies of the process's VERBPROXY_* variables ("NAME=value", but the
 * proxy's own, like VERBPROXY_UPSTREAM_PASS), NULL-terminated, for
 * conf_apply_env at start and again at every reload (reload.c); the
 * secrets' values in the environment are then wiped and the variables
 * unset. The caller frees each string and the array. */
char **conf_env_snapshot(void);

#endif
