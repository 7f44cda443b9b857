/* HTTP/1.1: the session of src/h1.c.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_H1_H
#define VOLLEY_H1_H

#include "proto.h"

extern const struct proto_ops proto_h1;

#endif
