/* config_env.c - directives from the environment: VERBPROXY_<DIRECTIVE>.
 *
 * The name after the prefix is the directive, '_' for '-', any case
 * (VERBPROXY_UPSTREAM_TLS=yes is `upstream-tls yes`). Values are taken
 * literally: no quotes, no comments. The repeatable directives (`verb`,
 * `user`) take one line per directive, newline-separated; every other one
 * takes exactly one line. reload.c applies them after the file and before
 * the flags, from a copy taken at start (conf_env_snapshot). */
#include "proxy/config_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The variables with this prefix that are no directive: the proxy reads
 * them itself (conf_finish's password, with its own precedence). */
static const char *const conf_env_own[] = {CONF_UPSTREAM_PASS_ENV};

static int conf_env_is_own(const char *var, size_t len)
{
    for (size_t i = 0; i < sizeof(conf_env_own) / sizeof(conf_env_own[0]); i++) {
        if (strlen(conf_env_own[i]) == len && strncmp(var, conf_env_own[i], len) == 0) return 1;
    }
    return 0;
}

/* "VERBPROXY_UPSTREAM_TLS" -> "upstream-tls". Returns -1 when the name is
 * too long to be a directive (it is then reported as unknown). */
static int conf_env_directive(const char *var, size_t len, char *out, size_t cap)
{
    size_t plen = strlen(CONF_ENV_PREFIX);
    if (len - plen >= cap) return -1;
    for (size_t i = plen; i < len; i++) {
        char ch = var[i];
        out[i - plen] = ch == '_' ? '-' : (char)((ch >= 'A' && ch <= 'Z') ? ch - 'A' + 'a' : ch);
    }
    out[len - plen] = '\0';
    return 0;
}

/* Apply one variable's value: one directive per line for the repeatable
 * ones, exactly one line for the rest. */
static int conf_env_apply(vp_config *c, const char *var, size_t varlen, const char *name, char *value,
                          char *err, size_t errlen)
{
    char why[512];
    if (!conf_is_repeatable(name)) {
        if (strchr(value, '\n')) {
            snprintf(err, errlen, "%.*s: '%s' takes one value, got several lines", (int)varlen, var, name);
            return -1;
        }
        if (conf_set(c, name, value, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "%.*s: %s", (int)varlen, var, why);
            return -1;
        }
        return 0;
    }
    /* Each line in place: the newline is put back after it was read, so
     * that a secret's value can be wiped whole afterwards. */
    for (char *line = value; line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        int rc = 0;
        if (*s) { /* blank lines are allowed (YAML block scalars end with one) */
            size_t n = strlen(s);
            int had_cr = n && s[n - 1] == '\r';
            if (had_cr) s[n - 1] = '\0';
            rc = conf_set(c, name, s, why, sizeof(why));
            if (had_cr) s[n - 1] = '\r';
        }
        if (nl) *nl = '\n';
        if (rc < 0) {
            snprintf(err, errlen, "%.*s: %s", (int)varlen, var, why);
            return -1;
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

int conf_apply_env(vp_config *c, char **env, char *err, size_t errlen)
{
    size_t plen = strlen(CONF_ENV_PREFIX);
    int rc = 0;
    for (char **e = env; e && *e; e++) {
        char *var = *e;
        if (strncmp(var, CONF_ENV_PREFIX, plen) != 0) continue;
        char *eq = strchr(var, '=');
        if (!eq) continue;
        size_t varlen = (size_t)(eq - var);
        if (conf_env_is_own(var, varlen)) continue;
        char *value = eq + 1;
        char name[64];
        if (rc == 0) {
            if (varlen == plen || conf_env_directive(var, varlen, name, sizeof(name)) < 0) {
                snprintf(err, errlen, "%.*s: unknown directive (every %s* variable must name one)",
                         (int)varlen, var, CONF_ENV_PREFIX);
                rc = -1;
            } else if (conf_env_apply(c, var, varlen, name, value, err, errlen) < 0) {
                rc = -1;
            }
        }
        /* A secret is wiped where it was read, whether it was taken or
         * not: /proc/<pid>/environ shows these very bytes. */
        if (varlen > plen && conf_env_directive(var, varlen, name, sizeof(name)) == 0 && conf_is_secret(name))
            memset(value, 0, strlen(value));
    }
    if (rc < 0 && strstr(err, "unknown directive '")) {
        /* conf_set's "unknown directive 'prot'": say which variable. */
        size_t n = strlen(err);
        if (n < errlen) snprintf(err + n, errlen - n, " (every %s* variable must name one)", CONF_ENV_PREFIX);
    }
    return rc;
}

void conf_env_unset_secrets(void)
{
    extern char **environ;
    size_t plen = strlen(CONF_ENV_PREFIX);
    char var[96], name[64];
    /* unsetenv reshuffles environ: start over after each removal. */
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; e && *e; e++) {
            char *eq = strchr(*e, '=');
            if (!eq || strncmp(*e, CONF_ENV_PREFIX, plen) != 0) continue;
            size_t varlen = (size_t)(eq - *e);
            /* VERBPROXY_UPSTREAM_PASS is read later (conf_finish), and wiped by main.c then. */
            if (conf_env_is_own(*e, varlen)) continue;
            if (varlen <= plen || varlen >= sizeof(var) ||
                conf_env_directive(*e, varlen, name, sizeof(name)) < 0 || !conf_is_secret(name))
                continue;
            memcpy(var, *e, varlen);
            var[varlen] = '\0';
            unsetenv(var);
            again = 1;
            break;
        }
    }
}

char **conf_env_snapshot(void)
{
    extern char **environ;
    size_t plen = strlen(CONF_ENV_PREFIX), n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    char **copy = calloc(n + 1, sizeof(char *));
    if (!copy) abort();
    size_t k = 0;
    for (char **e = environ; e && *e; e++) {
        char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, CONF_ENV_PREFIX, plen) != 0 || conf_env_is_own(*e, (size_t)(eq - *e)))
            continue;
        copy[k] = strdup(*e);
        if (!copy[k]) abort();
        k++;
        size_t varlen = (size_t)(eq - *e);
        char name[64];
        /* /proc/<pid>/environ shows these very bytes: the copy is all that stays. */
        if (varlen > plen && conf_env_directive(*e, varlen, name, sizeof(name)) == 0 && conf_is_secret(name))
            memset(eq + 1, 0, strlen(eq + 1));
    }
    conf_env_unset_secrets();
    return copy;
}
