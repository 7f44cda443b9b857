/* The protocols volley speaks, and finding one by its ALPN id or its name.
 * SPDX-License-Identifier: MIT */
#include "proto.h"

#include <string.h>

const struct proto_ops *const proto_all[PROTO_COUNT] = {&proto_h1, &proto_h2};

size_t proto_index(const struct proto_ops *p)
{
    size_t i = 0;
    while (i + 1 < PROTO_COUNT && proto_all[i] != p)
        i++;
    return i;
}

const struct proto_ops *proto_by_alpn(const char *id, size_t len)
{
    for (size_t i = 0; i < PROTO_COUNT; i++)
        if (strlen(proto_all[i]->alpn) == len && memcmp(proto_all[i]->alpn, id, len) == 0)
            return proto_all[i];
    return NULL;
}

const struct proto_ops *proto_by_name(const char *name)
{
    for (size_t i = 0; i < PROTO_COUNT; i++)
        if (strcmp(proto_all[i]->name, name) == 0)
            return proto_all[i];
    return NULL;
}
