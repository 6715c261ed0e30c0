/* Whose a directory is, by its handle (supervisor/store/catalogowner.c):
 * found, moved between tenants, forgotten, and bounded per tenant, the
 * least recently heard of going first and only the tenant's own. */
#include "unit.h"
#include "catalogowner.h"
#include "handle.h"

#include <errno.h>

static struct file_handle *handle(union file_handle_buf *h, uint32_t ino) {
        h->fh.handle_type = 1; /* FILEID_INO32_GEN, as ext4's */
        h->fh.handle_bytes = 8;
        memcpy(h->fh.f_handle, &ino, sizeof(ino));
        memset(h->fh.f_handle + 4, 0, 4);
        return &h->fh;
}

static void test_found_and_moved(void **state) {
        (void)state;
        struct catalog_owners *o = catalog_owners_new(2, 2);
        union file_handle_buf a, b;

        assert_non_null(o);
        assert_int_equal(catalog_owners_get(o, handle(&a, 10)), -1);
        assert_int_equal(catalog_owners_set(o, handle(&a, 10), 0), 0);
        assert_int_equal(catalog_owners_set(o, handle(&b, 11), 1), 0);
        assert_int_equal(catalog_owners_get(o, handle(&a, 10)), 0);
        assert_int_equal(catalog_owners_get(o, handle(&b, 11)), 1);
        b.fh.handle_type = 2; /* another type, the same bytes: another file */
        assert_int_equal(catalog_owners_get(o, &b.fh), -1);
        assert_int_equal(catalog_owners_set(o, handle(&a, 10), 1), 0); /* moved */
        assert_int_equal(catalog_owners_get(o, &a.fh), 1);
        assert_int_equal(catalog_owners_count(o, 0), 0);
        assert_int_equal(catalog_owners_count(o, 1), 2);
        assert_int_equal(catalog_owners_set(o, &a.fh, -1), 0); /* forgotten */
        assert_int_equal(catalog_owners_get(o, &a.fh), -1);
        assert_int_equal(catalog_owners_set(o, &a.fh, 7), 0); /* no such tenant: not kept */
        assert_int_equal(catalog_owners_get(o, &a.fh), -1);
        union file_handle_buf root;
        assert_int_equal(catalog_owners_pin(o, handle(&root, 2), 1), 0); /* tenant 1's root */
        assert_int_equal(catalog_owners_set(o, &root.fh, 0), 0);          /* stays pinned */
        assert_int_equal(catalog_owners_set(o, &root.fh, -1), 0);
        assert_int_equal(catalog_owners_count(o, 1), 1); /* 11 only: a pinned one is not counted */
        catalog_owners_clear(o);
        assert_int_equal(catalog_owners_get(o, handle(&b, 11)), -1);
        assert_int_equal(catalog_owners_count(o, 1), 0);
        assert_int_equal(catalog_owners_get(o, &root.fh), 1); /* not cleared */
        assert_int_equal(catalog_owners_pin(o, &root.fh, 9), -EINVAL);
        catalog_owners_free(o);
}

static void test_bounded_per_tenant(void **state) {
        (void)state;
        struct catalog_owners *o = catalog_owners_new(2, 2);
        union file_handle_buf h;

        assert_int_equal(catalog_owners_set(o, handle(&h, 1), 1), 0); /* tenant 1's one directory */
        for (uint32_t i = 0; i < OWNER_MAX; i++)
                assert_int_equal(catalog_owners_set(o, handle(&h, 1000 + i), 0), 0);
        assert_int_equal(catalog_owners_get(o, handle(&h, 1000)), 0); /* the oldest, now the most recent */
        for (uint32_t i = 0; i < 10; i++)                              /* tenant 0 makes 10 more */
                assert_int_equal(catalog_owners_set(o, handle(&h, 900000 + i), 0), 0);
        assert_int_equal(catalog_owners_count(o, 0), OWNER_MAX);
        assert_int_equal(catalog_owners_get(o, handle(&h, 1000)), 0);  /* heard of recently: kept */
        assert_int_equal(catalog_owners_get(o, handle(&h, 1001)), -1); /* the least recent: gone */
        assert_int_equal(catalog_owners_get(o, handle(&h, 1010)), -1);
        assert_int_equal(catalog_owners_get(o, handle(&h, 1011)), 0);
        assert_int_equal(catalog_owners_get(o, handle(&h, 1)), 1); /* tenant 1's is not pushed out */
        assert_int_equal(catalog_owners_count(o, 1), 1);
        catalog_owners_free(o);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_found_and_moved),
                cmocka_unit_test(test_bounded_per_tenant),
        };
        return UNIT_RUN("catalogowner", tests);
}
