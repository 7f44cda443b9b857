/* HTTP/2: the session of src/h2.c, over libnghttp2, with its request check
 * and the start-up look at a cleartext target in its operations table.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_H2_H
#define VOLLEY_H2_H

#include "proto.h"

extern const struct proto_ops proto_h2;

#endif
