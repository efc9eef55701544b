/* Fuzzes kubeconfig parsing (pure: no file is read): no crash, no leak, and
 * a successful parse has a server and credentials, and never a CA together
 * with insecure-skip-tls-verify. */
#include <stdint.h>
#include <stdlib.h>

#include "kube/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kube_kubeconfig_sel s;
    char err[512];
    const char *contexts[] = {NULL, "x"};
    for (int i = 0; i < 2; i++) {
        if (kube_kubeconfig_parse((const char *)data, size, contexts[i], &s, err, sizeof err) ==
            0) {
            if (!s.server || !s.context || !s.user ||
                (!s.token && !s.token_file && !s.cert_data && !s.cert_file) ||
                (s.insecure && (s.ca_data || s.ca_file)))
                abort();
            kube_kubeconfig_sel_clear(&s);
        }
    }
    return 0;
}
