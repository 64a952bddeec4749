/* resp_frame.h - the reply framer.
 *
 * Finds where each reply ends in the byte stream an upstream Redis sends, so
 * the proxy can forward replies byte for byte and still know which request
 * each one answers. It does not build values: it only counts. Every RESP2 and
 * RESP3 type, any nesting depth (one counter of values still owed replaces a
 * stack), no allocation, resumable at any byte boundary.
 *
 * Calling convention: resp_frame_scan() consumes header lines ('$' '*' ...
 * and their length) only whole (a partial one is left unconsumed: *used stops
 * before it), and bulk payloads and the text of simple lines ('+' '-' ...) in
 * any amount (but a line's last byte while it is a CR: its LF may follow), so
 * a 64 MiB value or a 100 MB MONITOR line can be forwarded piece by piece. It
 * stops at the end of each top-level reply:
 *   RESP_FRAME_DONE    - the reply ends at buf + *used; f->type tells its
 *                        first byte ('>' = RESP3 push: out of band). The next
 *                        call starts a new reply.
 *   RESP_FRAME_PARTIAL - *used bytes belong to the current reply; call again
 *                        from buf + *used once more bytes are there.
 *   RESP_FRAME_ERROR   - not RESP; f->error says why. The stream is unusable.
 * A caller that wants a whole small reply in hand may instead
 * resp_frame_reset() and rescan from the reply's start later.
 *
 * Only what decides where a reply ends is checked (type bytes, lengths,
 * counts, the CRLF after a payload); a simple line's text is not, so every
 * line Redis sends is framed (a Lua big_number "(123  123", a "-nan" double).
 * RESP3 streamed strings and aggregates ("$?", "*?") are refused: Redis never
 * sends them. Attributes ('|') are counted with the value they annotate. */
#ifndef VP_RESP_FRAME_H
#define VP_RESP_FRAME_H

#include <stddef.h>

typedef enum resp_frame_status {
    RESP_FRAME_PARTIAL = 0,
    RESP_FRAME_DONE,
    RESP_FRAME_ERROR
} resp_frame_status;

typedef struct resp_framer {
    long long pending;   /* values still owed by the current reply (0 = between replies) */
    long long bulk_left; /* payload bytes + CRLF still to skip; 0 when not inside a bulk */
    int in_line;         /* inside a simple line's text, its CRLF still to come */
    size_t consumed;     /* bytes of the current reply consumed so far, over all calls */
    char type;           /* first byte of the current/last top-level reply, 0 before it */
    const char *error;   /* static text when RESP_FRAME_ERROR */
} resp_framer;

void resp_frame_reset(resp_framer *f);
resp_frame_status resp_frame_scan(resp_framer *f, const char *buf, size_t len, size_t *used);

#endif
