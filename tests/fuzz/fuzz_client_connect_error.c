/* Fuzz target: the client's Connect error JSON parser (client/
 * connect_error.h), which reads the service's unary error bodies and
 * end-of-stream frames without a JSON library: the input whole, into small
 * and roomy buffers. Must never crash, read past the input (which is not
 * NUL-terminated) or leave an output unterminated. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "connect_error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse(const uint8_t *data, size_t size, size_t code_size, size_t message_size)
{
    char code[64], message[256];
    /* An exact-size copy: ASan catches any read past the end. */
    char *json = malloc(size ? size : 1);
    if (!json)
        return;
    if (size)
        memcpy(json, data, size);
    kl__connect_error_parse(json, size, code, code_size, message, message_size);
    if (!memchr(code, 0, code_size) || !memchr(message, 0, message_size))
        abort();
    free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse(data, size, 8, 8);
    parse(data, size, 32, 160); /* as the client's transfers do */
    return 0;
}
