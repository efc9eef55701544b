/* The checks on JSON text that cJSON does not make, run on a document it
 * has parsed: cJSON skips every byte up to 0x20 between tokens (NUL
 * included), and keeps a string only up to its first NUL, raw or escaped as
 * \u0000, so "pod-a\u0000evil" would silently become "pod-a". Pure
 * functions, any thread. */
#ifndef KL_RPC_JSON_TEXT_H
#define KL_RPC_JSON_TEXT_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Checks text (len bytes), which cJSON parsed into root: outside strings
 * only JSON whitespace (space, tab, CR, LF) may separate tokens, and no
 * string, key or value, may contain a NUL. Returns 0, or -1 with a message
 * in err: the offending byte's offset, or the field whose string holds the
 * NUL ("field \"identity\": ..."). */
int rpc_json_text_check(const char *text, size_t len, const cJSON *root, char *err, size_t err_len);

#endif
