/*
 * open_files.h: the open files limit at start-up. Every connection is a descriptor, so the
 * limit caps the connections; a server raises its soft limit to the hard one, as operators
 * expect (arbor(8), LIMITS).
 */
#ifndef ARBOR_OPEN_FILES_H
#define ARBOR_OPEN_FILES_H

#include "config.h"

/* Raise the soft limit to the hard one and log what it allows; warn when max_connections
 * asks for more than that. */
void open_files_raise(const struct arbor_config *cfg);

#endif
