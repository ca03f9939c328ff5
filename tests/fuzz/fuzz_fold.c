/*
 * libFuzzer target: the fold rules never crash, and the windows rule's key
 * agrees with smbd's strcasecmp_m(): names it calls equal share a key.
 *
 * Input: two names separated by a NUL byte.
 */

#include "replace.h"
#include "lib/util/charset/charset.h"
#include "fastcase_fold.h"

static const struct fastcase_fold_rules all_rules[] = {
	{ .mode = FASTCASE_FOLD_WINDOWS },
	{ .mode = FASTCASE_FOLD_WINDOWS, .normalize = FASTCASE_NORMALIZE_NFC },
	{ .mode = FASTCASE_FOLD_UNICODE },
	{ .mode = FASTCASE_FOLD_UNICODE, .language = "tr" },
	{ .mode = FASTCASE_FOLD_UNICODE, .normalize = FASTCASE_NORMALIZE_NFC },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char a[256], b[256];
	const uint8_t *sep = memchr(data, '\0', size);
	size_t la, lb, i;

	if (sep == NULL) {
		return 0;
	}
	la = MIN((size_t)(sep - data), sizeof(a) - 1);
	lb = MIN(size - (sep - data) - 1, sizeof(b) - 1);
	memcpy(a, data, la);
	a[la] = '\0';
	memcpy(b, sep + 1, lb);
	b[lb] = '\0';
	if (strlen(a) != la || memchr(sep + 1, '\0', lb) != NULL) {
		return 0;
	}

	for (i = 0; i < ARRAY_SIZE(all_rules); i++) {
		char ka[FASTCASE_KEY_MAX], kb[FASTCASE_KEY_MAX];
		size_t kla = 0, klb = 0;
		int ra, rb;
		bool equal;

		ra = fastcase_fold_key(&all_rules[i], a, ka, sizeof(ka), &kla);
		rb = fastcase_fold_key(&all_rules[i], b, kb, sizeof(kb), &klb);
		equal = fastcase_fold_equal(&all_rules[i], a, b);
		if (i == 0 && (strcasecmp_m(a, b) == 0) != equal) {
			abort();
		}
		if (equal && ra == 0 && rb == 0 &&
		    (kla != klb || memcmp(ka, kb, kla) != 0)) {
			/* equal names must share a key */
			abort();
		}
	}
	return 0;
}
