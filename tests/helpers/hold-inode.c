/* hold-inode FILE OFFSET: holds FILE's inode lock (shared) until stdin
 * closes, for a test of what waits on it. An O_DIRECT pread of 4 KiB at
 * OFFSET (a range already restored: the read's pre-content event comes
 * first) into a buffer whose page userfaultfd keeps missing: btrfs and
 * xfs hold the inode lock shared while the read pins the buffer, and the
 * pin waits for the fault, which is answered only once stdin closes.
 * Prints "held" when the read is stuck in the fault (the lock is held by
 * then). Needs root (a userfaultfd that catches the kernel's faults). */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096

static int fd;
static off_t offset;
static char *buf;

static void *reader(void *arg) {
        (void)arg;
        ssize_t n = pread(fd, buf, PAGE, offset);
        if (n < 0)
                fprintf(stderr, "hold-inode: pread: %s\n", strerror(errno));
        return NULL;
}

static int fail(const char *what) {
        fprintf(stderr, "hold-inode: %s: %s\n", what, strerror(errno));
        return 1;
}

int main(int argc, char **argv) {
        if (argc != 3) {
                fprintf(stderr, "usage: hold-inode FILE OFFSET\n");
                return 2;
        }
        offset = (off_t)strtoull(argv[2], NULL, 0);
        if ((fd = open(argv[1], O_RDONLY | O_DIRECT)) < 0)
                return fail(argv[1]);
        int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
        struct uffdio_api api = { .api = UFFD_API };
        if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0)
                return fail("userfaultfd");
        buf = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        struct uffdio_register reg = { .range = { .start = (unsigned long)buf, .len = PAGE },
                                       .mode = UFFDIO_REGISTER_MODE_MISSING };
        if (buf == MAP_FAILED || ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
                return fail("UFFDIO_REGISTER");
        pthread_t t;
        if (pthread_create(&t, NULL, reader, NULL) != 0)
                return fail("pthread_create");
        /* The read is stuck once its fault is reported. */
        struct pollfd p = { .fd = uffd, .events = POLLIN };
        struct uffd_msg msg;
        if (poll(&p, 1, 30000) != 1 || read(uffd, &msg, sizeof(msg)) != sizeof(msg))
                return fail("no fault from the read within 30 s");
        printf("held\n");
        fflush(stdout);
        char c;
        while (read(STDIN_FILENO, &c, 1) > 0)
                ;
        struct uffdio_zeropage zero = { .range = { .start = (unsigned long)buf, .len = PAGE } };
        if (ioctl(uffd, UFFDIO_ZEROPAGE, &zero) < 0)
                return fail("UFFDIO_ZEROPAGE");
        pthread_join(t, NULL);
        return 0;
}
