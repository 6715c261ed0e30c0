/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* path beneath dir_fd as O_PATH, never through a symlink, a magic link or
 * another mount, never out of dir_fd (a name a store or a thread gave):
 * the fd, or -1 with errno set. */
int open_path_beneath(int dir_fd, const char *path);
/* Does path, opened so, lead to the file of st (its device and inode)? */
bool path_beneath_is(int dir_fd, const char *path, const struct stat *st);

/* Writes all n bytes of buf at fd's offset (again after EINTR and short
 * writes): 0, or a negative errno. */
int write_full(int fd, const void *buf, size_t n);

/* Above every fd number open in the process of pidfd (a dead tierd's
 * keeper shares its fd table): where a sweep of its event numbers may
 * stop. fallback when that cannot be read. */
unsigned fd_numbers_in_use(int pidfd, unsigned fallback);

/* fsync of the directory that holds path: a file created or renamed there
 * is an entry of that directory, which a power cut can lose until it is
 * synced, although the file itself was. 0, or a negative errno. */
int fsync_dir_of(const char *path);

/* A socket of type (SOCK_SEQPACKET, SOCK_DGRAM, with SOCK_NONBLOCK if
 * wanted; SOCK_CLOEXEC is added) connected to the unix socket at path.
 * timeout_sec > 0 bounds the connect and every later send and receive
 * (SO_SNDTIMEO, SO_RCVTIMEO): a peer whose backlog is full fails it with
 * EAGAIN. The fd, or a negative errno. */
int unix_connect(const char *path, int type, unsigned timeout_sec);
