/* SPDX-License-Identifier: MIT */
/*
 * tierd: reads the policy, watches each tiered filesystem, places the tenant
 * views, starts a worker per tenant and serves D-Bus. Foreground, logs to
 * stderr.
 *
 * The only file that names both supervisor/ (what tierd does) and dbus/
 * (its face on the system bus): supervisor/ tells the face through
 * supervisor/face.h and never calls dbus/, dbus/ calls down into
 * supervisor/. tests/lint.sh fails on an arrow the other way.
 */
#include "daemon.h"
#include "managerbus.h"

int main(int argc, char **argv) {
        return tierd_main(argc, argv, &bus_face);
}
