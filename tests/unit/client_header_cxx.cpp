// The public header compiles as C++ (the library's first users are C++
// programs), links against the shared library, and its table is usable there.
#include "kubelease.h"

#include <cstdio>
#include <cstring>

namespace
{
void on_holder(void *ctx, const char *holder, size_t len, int64_t epoch)
{
    (void)ctx;
    (void)holder;
    (void)len;
    (void)epoch;
}
} // namespace

int main()
{
    kl_error err = {};
    kl_client_options opts;
    kl_client_options_init(&opts);
    kl_client *c = kl_client_new_opts("http://127.0.0.1:1", &opts, &err);
    if (!c) {
        std::fprintf(stderr, "kl_client_new_opts: %s\n", err.message);
        return 1;
    }
    kl_holder_cb cb = on_holder;
    int rc = kl_watch_holder(c, "default", "cxx", cb, nullptr, &err);
    rc |= kl_cancel_watch(c, "default", "cxx", &err);
    int64_t valid = 0;
    rc |= kl_is_leader(c, "default", "cxx", &valid, &err);
    kl_client_free(c);
    if (rc != KL_OK || std::strcmp(kl_strerror(KL_ERR_LOST), "leadership lost") != 0 ||
        kl_version() == nullptr)
        return 1;
    return 0;
}
