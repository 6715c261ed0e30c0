/* SPDX-License-Identifier: MIT */
/* A property getter's signature, as sd-bus calls it, and the shapes
 * tenants and containers share. */
#pragma once

#include <stddef.h>
#include <systemd/sd-bus.h>

#include "tierd.h"


/* A node enumerator's answer, built one path at a time: bus_nodes_add
 * takes path (NULL: out of memory) into *v, which holds *n paths and a
 * NULL after them, and frees it all on failure; bus_nodes_done hands v
 * (an empty list for none) to sd-bus. */
int bus_nodes_add(char ***v, size_t *n, char *path);
int bus_nodes_done(char **v, char ***nodes);

#define GETTER_SIGNATURE(fn) \
        int fn(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply, \
               void *userdata, sd_bus_error *error)
#define GETTER(fn) static GETTER_SIGNATURE(fn)

/* Getters of the field at the property's offset in its object (the offset
 * of SD_BUS_PROPERTY, which sd-bus adds to the object's userdata), as
 * systemd's bus_property_get_* are: one getter per type of field, never a
 * chain of property names. */
GETTER_SIGNATURE(bus_property_get_u64);    /* "t", a uint64_t */
GETTER_SIGNATURE(bus_property_get_u32);    /* "u", an unsigned */
GETTER_SIGNATURE(bus_property_get_bool);   /* "b", a bool */
GETTER_SIGNATURE(bus_property_get_string); /* "s", a char * ("" for NULL) */
GETTER_SIGNATURE(bus_property_get_pid);    /* "u", a pid_t (0 for none) */
/* "d" (seconds waited in all), "a(dt)" (buckets), "a{sd}" (percentiles) of a
 * struct wait_histogram. */
GETTER_SIGNATURE(bus_property_get_wait_seconds);
GETTER_SIGNATURE(bus_property_get_wait_buckets);
GETTER_SIGNATURE(bus_property_get_wait_percentiles);
/* Of a struct worker: its state's name ("s"), and its requests in flight ("u"). */
GETTER_SIGNATURE(bus_property_get_worker_state);
GETTER_SIGNATURE(bus_property_get_worker_in_flight);

/* A property read from the field of the object's struct type, which must
 * be of the type the getter reads (a compile error otherwise: an offset
 * into a field of another type would read garbage). */
#define BUS_FIELD_TYPE_IS(type, field, ctype) \
        (0 * sizeof(char[__builtin_types_compatible_p(__typeof__(((type *)0)->field), ctype) ? 1 : -1]))
#define BUS_FIELD_OF(name, sig, getter, type, field, ctype, flags) \
        SD_BUS_PROPERTY(name, sig, getter, offsetof(type, field) + BUS_FIELD_TYPE_IS(type, field, ctype), flags)
#define BUS_U64(name, type, field, flags) BUS_FIELD_OF(name, "t", bus_property_get_u64, type, field, uint64_t, flags)
#define BUS_U32(name, type, field, flags) BUS_FIELD_OF(name, "u", bus_property_get_u32, type, field, unsigned, flags)
#define BUS_BOOL(name, type, field, flags) BUS_FIELD_OF(name, "b", bus_property_get_bool, type, field, bool, flags)
#define BUS_PID(name, type, field, flags) BUS_FIELD_OF(name, "u", bus_property_get_pid, type, field, pid_t, flags)
#define BUS_STRING(name, type, field, flags) \
        SD_BUS_PROPERTY(name, "s", bus_property_get_string, \
                        offsetof(type, field) + \
                                0 * sizeof(char[__builtin_types_compatible_p(__typeof__(((type *)0)->field), char *) || \
                                                                __builtin_types_compatible_p(__typeof__(((type *)0)->field), \
                                                                                             const char *) ? 1 : -1]), \
                        flags)
#define BUS_WORKER(name, sig, getter, type, field, flags) \
        BUS_FIELD_OF(name, sig, getter, type, field, struct worker, flags)
/* The three forms of a wait histogram, at field. */
#define BUS_WAIT_PROPERTIES(type, field) \
        BUS_FIELD_OF("ReaderWaitBuckets", "a(dt)", bus_property_get_wait_buckets, type, field, struct wait_histogram, 0), \
        BUS_FIELD_OF("ReaderWaitSeconds", "d", bus_property_get_wait_seconds, type, field, struct wait_histogram, 0), \
        BUS_FIELD_OF("ReaderWaitPercentiles", "a{sd}", bus_property_get_wait_percentiles, type, field, \
                     struct wait_histogram, 0)
