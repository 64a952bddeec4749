/* resp_write.c - the RESP writer (resp_write.h). */
#include "protocol/resp_write.h"

#include <stdio.h>
#include <string.h>

size_t resp_write_null_array(char *out, int resp3)
{
    if (resp3) {
        memcpy(out, "_\r\n", 3);
        return 3;
    }
    memcpy(out, "*-1\r\n", 5);
    return 5;
}

size_t resp_write_null(char *out, int resp3)
{
    if (resp3) {
        memcpy(out, "_\r\n", 3);
        return 3;
    }
    memcpy(out, "$-1\r\n", 5);
    return 5;
}

static size_t write_line(char *out, char type, const char *s, size_t n)
{
    out[0] = type;
    memcpy(out + 1, s, n);
    memcpy(out + 1 + n, "\r\n", 2);
    return n + 3;
}

size_t resp_write_simple(char *out, const char *s, size_t n)
{
    return write_line(out, '+', s, n);
}

/* Error lines cannot hold CR or LF: any in text[0..n) become spaces. */
static void error_text_clean(char *text, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (text[i] == '\r' || text[i] == '\n') text[i] = ' ';
}

size_t resp_write_error(char *out, const char *s, size_t n)
{
    size_t len = write_line(out, '-', s, n);
    error_text_clean(out + 1, n);
    return len;
}

size_t resp_write_verrorf(char *out, size_t cap, const char *fmt, va_list ap)
{
    out[0] = '-';
    int n = vsnprintf(out + 1, cap - 3, fmt, ap);
    if (n < 0) n = 0;
    if ((size_t)n > cap - 4) n = (int)(cap - 4);
    error_text_clean(out + 1, (size_t)n);
    memcpy(out + 1 + n, "\r\n", 2);
    return (size_t)n + 3;
}

size_t resp_write_errorf(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = resp_write_verrorf(out, cap, fmt, ap);
    va_end(ap);
    return n;
}

/* Digits of n (>= 0), for a header's size without writing it. */
static size_t decimal_len(size_t n)
{
    size_t k = 1;
    while (n >= 10) {
        n /= 10;
        k++;
    }
    return k;
}

size_t resp_write_bulk_size(size_t n)
{
    return 3 + decimal_len(n) + n + 2;
}

size_t resp_write_command_size(int argc, const resp_arg *argv)
{
    size_t size = 3 + decimal_len((size_t)(argc < 0 ? 0 : argc));
    for (int i = 0; i < argc; i++)
        size += resp_write_bulk_size(argv[i].len);
    return size;
}

size_t resp_write_command(char *out, int argc, const resp_arg *argv)
{
    size_t len = resp_write_header(out, '*', argc);
    for (int i = 0; i < argc; i++)
        len += resp_write_bulk(out + len, argv[i].ptr, argv[i].len);
    return len;
}
