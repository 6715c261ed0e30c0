# tierd: a hierarchical storage manager on fanotify pre-content events.
#   make            build tierd, tierd-worker, tierd-holder and tierctl into build/
#   sudo make demo  the main job on the embedded default (loop btrfs, file:// store)
#   sudo make check every test: unit (plain and ASan+UBSan) and integration
#   sudo make bench benchmarks, as ratios against baselines from the same run
#   make deps       install the Debian packages the build and tests need (only
#                   demo, check and bench run it; a plain make never installs)
#   make install    tierd, tierctl, helpers, D-Bus interfaces, bus policy, unit, man pages,
#                   bash completion (DESTDIR, PREFIX=/usr)

CC ?= gcc
BUILD ?= build
PREFIX ?= /usr
SBINDIR ?= $(PREFIX)/sbin
BINDIR ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec/tierd
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
SYSTEMDUNITDIR ?= /lib/systemd/system
PKGS := mount libsystemd json-c libcrypto libcurl libseccomp expat
VERSION := 0.3.0
BUILD_PKGS := gcc make pkg-config libmount-dev libsystemd-dev libjson-c-dev libcurl4-openssl-dev libssl-dev \
	libseccomp-dev libexpat1-dev
DEB_PKGS := $(BUILD_PKGS) libcmocka-dev btrfs-progs xfsprogs e2fsprogs attr dbus dbus-bin systemd util-linux procps \
	runc busybox-static python3-yaml clang clang-tidy cppcheck valgrind acl bc mandoc groff-base curl tinyproxy

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
WARN := -Wall -Wextra -Werror
# supervisor/ in families (supervisor/tierd.h): each folder on the include path.
SUPERVISOR_DIRS := supervisor $(addprefix supervisor/,events files store workers views restart traces)
BASE_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -g -Icommon -Ipolicy $(addprefix -I,$(SUPERVISOR_DIRS)) -Idbus -Iworker -Icli \
	-DTIERD_LIBEXECDIR='"$(LIBEXECDIR)"' -DTIERD_VERSION='"$(VERSION)"'
CFLAGS ?=
ALL_CFLAGS = $(BASE_CFLAGS) $(PKG_CFLAGS) $(CFLAGS)

COMMON_SRC := common/log.c common/ranges.c common/size.c common/url.c common/hex.c common/stub.c common/proto.c \
	common/utf8.c common/hash.c common/manifest.c common/catalog-format.c common/fdio.c common/objkey.c \
	common/inflight.c common/fanevent.c common/readeraccess.c common/treewalk.c
POLICY_SRC := policy/policy.c policy/policyaws.c policy/policyfile.c policy/policyquery.c policy/policyvalue.c policy/json-strict.c policy/edit.c policy/engine.c
TIERD_SRC := cmd/tierd.c $(foreach d,$(SUPERVISOR_DIRS),$(wildcard $(d)/*.c)) $(wildcard dbus/*.c)
WORKER_SRC := $(wildcard worker/*.c)
HOLDER_SRC := holder/holder.c holder/guard.c common/log.c common/proto.c common/inflight.c common/fanevent.c \
	common/stub.c common/ranges.c common/hex.c common/objkey.c common/readeraccess.c common/fdio.c
TIERCTL_SRC := $(wildcard cli/*.c)
# release-groups, find and du read stubs; release-groups talks to tierd-holder.
TIERCTL_COMMON_SRC := common/treewalk.c common/stub.c common/ranges.c common/hex.c common/objkey.c common/proto.c \
	common/log.c common/fdio.c common/size.c

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

BINARIES := $(BUILD)/tierd $(BUILD)/tierd-worker $(BUILD)/tierd-holder $(BUILD)/tierctl
TEST_HELPERS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/%,$(wildcard tests/helpers/*.c))
UNIT_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test-*.c))

.PHONY: all deps build-deps build-deps-check demo bench fuzz check asan-daemons testhooks-daemons valgrind-daemons install clean
all: $(BINARIES)

# Installs only what is missing, so it is cheap when nothing is. Only the
# goals that run tests install (they need loop filesystems, runc, valgrind...);
# any other build only says which build packages are missing.
missing_pkgs = $$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	grep -q 'install ok installed' || echo $$p; done)
install_pkgs = missing=$(call missing_pkgs,$(1)); \
	if [ -n "$$missing" ]; then \
		echo "make: installing" $$missing; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends $$missing >/dev/null || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $$missing >/dev/null; }; \
	fi
deps:
	@$(call install_pkgs,$(DEB_PKGS))
	@$(get_promtool)
# promtool checks the metrics' format in make check. Debian has it only in
# the prometheus package, 96 MB that would also start a Prometheus server:
# only promtool is taken out of it, into the build directory.
PROMTOOL := $(BUILD)/tools/promtool
get_promtool = command -v promtool >/dev/null || [ -x $(PROMTOOL) ] || { \
	d=$$(mktemp -d) && chmod 755 $$d && cd $$d && \
	{ apt-get download -q prometheus >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null && apt-get download -q prometheus >/dev/null 2>&1; }; } && \
	cd - >/dev/null && mkdir -p $(dir $(PROMTOOL)) && \
	dpkg-deb --fsys-tarfile $$d/prometheus_*.deb | tar -xO ./usr/bin/promtool >$(PROMTOOL).tmp && \
	chmod 755 $(PROMTOOL).tmp && mv $(PROMTOOL).tmp $(PROMTOOL) && echo "make: promtool taken from Debian's prometheus"; \
	rm -rf $$d $(PROMTOOL).tmp; [ -x $(PROMTOOL) ] || echo "make: could not fetch promtool: the metrics format check will be skipped" >&2; }
# Only what building needs (an image build, say).
build-deps:
	@$(call install_pkgs,$(BUILD_PKGS))
build-deps-check:
	@command -v dpkg-query >/dev/null || exit 0; missing=$(call missing_pkgs,$(BUILD_PKGS)); \
	if [ -n "$$missing" ]; then \
		echo "make: the build needs these Debian packages: $$missing (sudo make deps installs them)" >&2; exit 1; \
	fi
ifneq ($(filter deps build-deps demo check bench,$(MAKECMDGOALS)),)
DEPS := deps
else
DEPS := build-deps-check
endif

$(BUILD)/obj/%.o: %.c | $(DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tierd: $(call obj,$(TIERD_SRC) $(POLICY_SRC) $(COMMON_SRC))
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/tierd-worker: $(call obj,$(WORKER_SRC) $(COMMON_SRC))
	$(CC) $(ALL_CFLAGS) -pthread -o $@ $^ $(PKG_LIBS)

# No library: it only keeps fds, and should rarely need an upgrade.
$(BUILD)/tierd-holder: $(call obj,$(HOLDER_SRC))
	$(CC) $(ALL_CFLAGS) -o $@ $^

$(BUILD)/tierctl: $(call obj,$(TIERCTL_SRC) $(TIERCTL_COMMON_SRC))
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(PKG_LIBS)

# Small programs the integration tests run (mmap reader, pread...).
$(BUILD)/tests/%: tests/helpers/%.c | $(DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(PKG_LIBS)

# Unit tests, built plain and with ASan+UBSan.
UNIT_LIB_SRC := $(COMMON_SRC) $(POLICY_SRC) supervisor/workers/credentials.c supervisor/workers/awsanswer.c supervisor/workers/proxy.c worker/http-check.c worker/mcache.c worker/s3xml.c supervisor/traces/traceformat.c cli/ocihook.c supervisor/events/inodework.c supervisor/events/loopnice.c supervisor/store/catalogowner.c supervisor/store/gcmarks.c
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
$(BUILD)/unit/%: tests/unit/%.c $(UNIT_LIB_SRC) | $(DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(PKG_LIBS) $(shell pkg-config --libs cmocka)
$(BUILD)/unit-asan/%: tests/unit/%.c $(UNIT_LIB_SRC) | $(DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -O1 $(SAN_FLAGS) -o $@ $^ $(PKG_LIBS) $(shell pkg-config --libs cmocka)

UNIT_BINS := $(addprefix $(BUILD)/unit/,$(UNIT_TESTS)) $(addprefix $(BUILD)/unit-asan/,$(UNIT_TESTS))

# Fuzz targets (tests/fuzz/fuzz-*.c, seeds in tests/fuzz/corpus/<target>/):
# make check runs each under libFuzzer for a few seconds (clang) and under
# its own driver (random mutations of the seeds, tests/fuzz/driver.c) with
# ASan+UBSan; make fuzz builds them for libFuzzer, to run for longer.
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz-*.c))
FUZZ_BINS := $(addprefix $(BUILD)/fuzz/,$(FUZZ_TARGETS))
FUZZ_LIB_SRC := $(COMMON_SRC) $(POLICY_SRC) worker/http-check.c worker/s3xml.c supervisor/workers/awsanswer.c cli/ocihook.c supervisor/traces/traceformat.c
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/driver.c $(FUZZ_LIB_SRC) | $(DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -O1 $(SAN_FLAGS) -o $@ $^ $(PKG_LIBS)
LIBFUZZER_BINS := $(addprefix $(BUILD)/libfuzzer/,$(FUZZ_TARGETS))
$(BUILD)/libfuzzer/%: tests/fuzz/%.c $(FUZZ_LIB_SRC) | $(DEPS)
	@mkdir -p $(dir $@)
	clang $(BASE_CFLAGS) $(PKG_CFLAGS) -O1 -g -DFUZZING_WITH_LIBFUZZER -fsanitize=fuzzer,address,undefined \
		-o $@ $^ $(PKG_LIBS)
fuzz: $(LIBFUZZER_BINS)
	@for t in $(LIBFUZZER_BINS); do echo "built $$t: run it with a scratch corpus directory first, then" \
		"tests/fuzz/corpus/$$(basename $$t) (read only); it fuzzes until stopped"; done

# The daemons built with ASan+UBSan, for one integration pass in make check;
# sanitizers cannot run under the worker's seccomp filter and Landlock, so
# this build leaves the sandbox out (a compile-time switch, never a flag).
asan-daemons:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="$(SAN_FLAGS) -DTIERD_NO_SANDBOX" \
		$(BUILD)/asan/tierd $(BUILD)/asan/tierd-worker $(BUILD)/asan/tierd-holder $(BUILD)/asan/tierctl \
		$(patsubst $(BUILD)/%,$(BUILD)/asan/%,$(TEST_HELPERS))

# The daemons for valgrind memcheck of the worker's fill path (no sandbox:
# valgrind cannot run under its seccomp filter; a compile-time switch).
valgrind-daemons:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/valgrind CFLAGS="-DTIERD_NO_SANDBOX -DTIERD_WORKER_UNDER_VALGRIND" \
		$(BUILD)/valgrind/tierd $(BUILD)/valgrind/tierd-worker $(BUILD)/valgrind/tierd-holder $(BUILD)/valgrind/tierctl \
		$(patsubst $(BUILD)/%,$(BUILD)/valgrind/%,$(TEST_HELPERS))

# The daemons with test hooks (worker/fill.c: objects that make the worker
# try what its sandbox forbids), for the sandbox test only.
testhooks-daemons:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/testhooks CFLAGS="-DTIERD_TEST_HOOKS" \
		$(BUILD)/testhooks/tierd $(BUILD)/testhooks/tierd-worker $(BUILD)/testhooks/tierd-holder \
		$(BUILD)/testhooks/tierctl \
		$(patsubst $(BUILD)/%,$(BUILD)/testhooks/%,$(TEST_HELPERS))

check: all $(TEST_HELPERS) $(UNIT_BINS) $(FUZZ_BINS) $(LIBFUZZER_BINS) asan-daemons testhooks-daemons valgrind-daemons
	@BUILD=$(abspath $(BUILD)) bash tests/run-all.sh

demo: all $(TEST_HELPERS)
	@BUILD=$(abspath $(BUILD)) bash tests/demo.sh

# Benchmarks: ratios against baselines measured in the same run (needs root).
bench: all $(TEST_HELPERS)
	@BUILD=$(abspath $(BUILD)) bash tests/bench/run.sh

# The D-Bus interfaces go where D-Bus tools look for them; the unit and the
# bus policy where systemd and dbus-daemon do; man pages and completion
# where man and bash do.
install: all
	install -Dm755 $(BUILD)/tierd $(DESTDIR)$(SBINDIR)/tierd
	install -Dm755 $(BUILD)/tierctl $(DESTDIR)$(BINDIR)/tierctl
	install -Dm755 $(BUILD)/tierd-worker $(DESTDIR)$(LIBEXECDIR)/tierd-worker
	install -Dm755 $(BUILD)/tierd-holder $(DESTDIR)$(LIBEXECDIR)/tierd-holder
	install -Dm644 -t $(DESTDIR)$(DATADIR)/dbus-1/interfaces dbus/org.tierd1.Manager.xml dbus/org.tierd1.Tenant.xml \
		dbus/org.tierd1.Job.xml dbus/org.tierd1.Container.xml
	install -Dm644 contrib/oci/tierd-hook.json $(DESTDIR)$(DATADIR)/containers/oci/hooks.d/tierd.json
	install -Dm644 contrib/dbus/org.tierd1.conf $(DESTDIR)$(DATADIR)/dbus-1/system.d/org.tierd1.conf
	install -Dm644 contrib/systemd/tierd.service $(DESTDIR)$(SYSTEMDUNITDIR)/tierd.service
	install -Dm644 man/tierd.8 $(DESTDIR)$(MANDIR)/man8/tierd.8
	install -Dm644 man/tierctl.1 $(DESTDIR)$(MANDIR)/man1/tierctl.1
	install -Dm644 man/tierd-policy.5 $(DESTDIR)$(MANDIR)/man5/tierd-policy.5
	install -Dm644 contrib/bash-completion/tierctl $(DESTDIR)$(DATADIR)/bash-completion/completions/tierctl

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
