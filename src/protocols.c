/* The protocols volley speaks, and finding one by its ALPN id or its name.
 * SPDX-License-Identifier: MIT */
#include "protocols.h"

#include <string.h>

#include "h1.h"
#include "h2.h"
#ifdef VOLLEY_HTTP3
#include "h3.h"
#endif

const struct proto_ops *const protocols_all[PROTOCOLS_COUNT] = {
    &proto_h1,
    &proto_h2,
#ifdef VOLLEY_HTTP3
    &proto_h3,
#endif
};

size_t protocols_index(const struct proto_ops *p)
{
    size_t i = 0;
    while (i + 1 < PROTOCOLS_COUNT && protocols_all[i] != p)
        i++;
    return i;
}

const struct proto_ops *protocols_by_alpn(const char *id, size_t len)
{
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++)
        if (strlen(protocols_all[i]->alpn) == len && memcmp(protocols_all[i]->alpn, id, len) == 0)
            return protocols_all[i];
    return NULL;
}

const struct proto_ops *protocols_by_name(const char *name)
{
    for (size_t i = 0; i < PROTOCOLS_COUNT; i++)
        if (strcmp(protocols_all[i]->name, name) == 0)
            return protocols_all[i];
    return NULL;
}
