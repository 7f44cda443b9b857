/* HTTP/3: the session of src/h3.c, over nghttp3, above QUIC (src/quic.c).
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_H3_H
#define VOLLEY_H3_H

#include "proto.h"

extern const struct proto_ops proto_h3;

#endif
