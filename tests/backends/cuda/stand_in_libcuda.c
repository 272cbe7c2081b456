/* The loader half of the test suite's stand-in for the CUDA driver (host_driver.py).

   cuda-python's bindings open libcuda.so.1 and ask its cuGetProcAddress_v2 for every
   driver function. This library answers with the functions that host_driver.py has
   registered (ctypes callbacks over host memory) and with "not found" for the rest, so
   the bindings' own argument conversion runs exactly as it does over the real driver,
   and a driver function the runtime calls but the stand-in lacks fails loudly. */
#include <stdlib.h>
#include <string.h>

#define CAPACITY 128
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_FOUND 500

static char *names[CAPACITY];
static void *functions[CAPACITY];
static int registered;

int stand_in_register(const char *name, void *function) {
    for (int i = 0; i < registered; i++) {
        if (strcmp(names[i], name) == 0) {
            functions[i] = function;
            return 0;
        }
    }
    if (registered == CAPACITY) return -1;
    names[registered] = strdup(name);
    functions[registered++] = function;
    return 0;
}

int cuGetProcAddress_v2(const char *symbol, void **function, int version,
                        unsigned long long flags, int *status) {
    (void)version;
    (void)flags;
    if (strcmp(symbol, "cuGetProcAddress") == 0) { /* the driver answers for itself too */
        *function = (void *)cuGetProcAddress_v2;
        if (status) *status = 0;
        return CUDA_SUCCESS;
    }
    for (int i = 0; i < registered; i++) {
        if (strcmp(names[i], symbol) == 0) {
            *function = functions[i];
            if (status) *status = 0;
            return CUDA_SUCCESS;
        }
    }
    *function = NULL;
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return CUDA_ERROR_NOT_FOUND;
}

/* Read with dlsym before cuGetProcAddress_v2 is asked for anything. */
int cuDriverGetVersion(int *version) {
    *version = 13000;
    return CUDA_SUCCESS;
}
