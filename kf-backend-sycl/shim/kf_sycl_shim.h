/* kf_sycl_shim: a C ABI over the parts of the DPC++ SYCL runtime that kf-backend-sycl uses.
 *
 * Compiled by build.rs (plain g++ -std=c++17 against the headers of the intel-sycl-rt wheel,
 * linked with -lsycl) into a shared library that the Rust crate loads with dlopen at run time.
 * Every function catches every exception: it returns one of the KFS_* codes and, on failure,
 * a message in *err (malloc'd, release with kfs_free). Handles are opaque pointers.
 */
#ifndef KF_SYCL_SHIM_H
#define KF_SYCL_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a signature below changes; the Rust side refuses another version. */
#define KFS_ABI_VERSION 1

/* Return codes. */
#define KFS_OK 0
#define KFS_UNAVAILABLE 1 /* no SYCL platform / device */
#define KFS_COMPILE 2     /* the source did not build; *err holds clang's diagnostics */
#define KFS_LAUNCH 3      /* the kernel could not be launched or failed while running */
#define KFS_RESOURCES 4   /* out of memory or another resource */
#define KFS_INVALID 5     /* a bad argument */
#define KFS_OTHER 6       /* anything else */

/* Kernel argument kinds. */
#define KFS_ARG_PTR 0   /* value: a USM pointer */
#define KFS_ARG_I32 1   /* value: the low 32 bits */
#define KFS_ARG_U32 2   /* value: the low 32 bits */
#define KFS_ARG_I64 3   /* value: 64 bits */
#define KFS_ARG_F32 4   /* value: the low 32 bits are the float's bits */
#define KFS_ARG_LOCAL 5 /* value: bytes of a sycl::local_accessor<char, 1> */

typedef struct kfs_arg {
    int32_t kind;
    uint32_t reserved;
    uint64_t value;
} kfs_arg;

typedef struct kfs_queue kfs_queue;
typedef struct kfs_program kfs_program;

int kfs_abi_version(void);

/* Frees a string or blob returned by this library. */
void kfs_free(void* p);

/* The SYCL runtime's version text (for cache keys and messages). */
int kfs_runtime_version(char** out, char** err);

/* A JSON array describing every device of every platform, in platform order. */
int kfs_list_devices(char** json, char** err);

/* An in-order queue with profiling on device `index` of the flattened list above. */
int kfs_open(size_t index, kfs_queue** out, char** err);
void kfs_close(kfs_queue* q);

/* Builds SYCL source for the queue's device with `nopts` build options, and finds the
 * free-function kernel `entry`. `include_name` / `include_text` (both NULL for none) add one
 * virtual include file the source can #include "include_name". `register_name` != 0 builds
 * with registered_names{entry} (for kernels that are not extern "C"; such bundles cannot be
 * serialised). On KFS_COMPILE, *err holds the compiler's diagnostics. When the build succeeds
 * but has no kernel `entry`, returns KFS_COMPILE with a message starting "no kernel named".
 * *log receives the build log (may be empty). */
int kfs_build(kfs_queue* q, const char* src, size_t src_len, const char* include_name,
              const char* include_text, const char* const* opts, size_t nopts,
              const char* entry, int register_name, kfs_program** out, char** log, char** err);

/* Serialises a built program (SYCLBIN) for the compile cache. */
int kfs_program_content(kfs_program* p, void** data, size_t* len, char** err);

/* Loads a program serialised by kfs_program_content and finds kernel `entry`. */
int kfs_load(kfs_queue* q, const void* data, size_t len, const char* entry, kfs_program** out,
             char** err);

/* A JSON object of kernel facts (fields missing where the runtime does not say). */
int kfs_program_info(kfs_queue* q, kfs_program* p, char** json, char** err);

void kfs_program_free(kfs_program* p);

/* USM device memory. */
int kfs_malloc(kfs_queue* q, size_t bytes, void** out, char** err);
void kfs_free_device(kfs_queue* q, void* ptr);
/* Blocking copies (any direction, USM or host pointers). */
int kfs_memcpy(kfs_queue* q, void* dst, const void* src, size_t bytes, char** err);
/* Blocking fill of `count` 32-bit words. */
int kfs_fill_u32(kfs_queue* q, void* dst, uint32_t value, size_t count, char** err);

/* Launches the program's kernel over an nd_range of `dims` dimensions (sizes in work-items,
 * passed to sycl::nd_range as given), waits, and returns the device time from the profiling
 * events in *nanoseconds. */
int kfs_launch(kfs_queue* q, kfs_program* p, const kfs_arg* args, size_t nargs, uint32_t dims,
               const size_t* global, const size_t* local, uint64_t* nanoseconds, char** err);

#ifdef __cplusplus
}
#endif

#endif /* KF_SYCL_SHIM_H */
