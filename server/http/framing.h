/* Strict HTTP/1.1 request framing (RFC 9112): a pure check of a request's
 * head as it arrived on the wire, before libmicrohttpd parses it.
 * libmicrohttpd 0.9.75 takes bare LF line ends and obs-folded headers,
 * keeps the first of two Content-Length headers and reads a body framed by
 * both Content-Length and Transfer-Encoding; behind an L7 proxy that reads
 * them otherwise, each lets a second request be smuggled inside the first.
 * RFC 9112 sections 2.2, 5.2 and 6.3 say a server rejects them: the
 * acceptor (accept.c) answers such a head 400 and closes the connection.
 *
 * Threads: pure, any thread. */
#ifndef KL_HTTP_FRAMING_H
#define KL_HTTP_FRAMING_H

#include <stddef.h>

typedef enum http_head_verdict {
    HTTP_HEAD_INCOMPLETE, /* no end of the head yet: wait for more bytes */
    HTTP_HEAD_OK,         /* a whole head, framed unambiguously */
    HTTP_HEAD_BAD,        /* framed ambiguously: answer 400 and close */
} http_head_verdict;

/* Checks the head at the start of buf (len bytes, not NUL-terminated; what
 * follows the head, a body or a pipelined request, is not looked at). On
 * HTTP_HEAD_OK, *head_len is the head's length with its empty line; on
 * HTTP_HEAD_BAD, why holds what is wrong ("bare LF line end", "obs-folded
 * header line", "two Content-Length headers", "Content-Length with
 * Transfer-Encoding", ...). Empty lines before the request line are
 * skipped, as RFC 9112 section 2.2 allows. */
http_head_verdict http_head_check(const char *buf, size_t len, size_t *head_len, char *why,
                                  size_t why_len);

#endif
