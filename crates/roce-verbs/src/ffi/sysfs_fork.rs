//! `ibv_read_sysfs_file` and `ibv_get_sysfs_path`, the fork calls (nothing to protect), and
//! the private names provider libraries call.

use std::ffi::{CStr, c_char, c_int, c_void};

use super::{guard, set_errno};

/// `int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)`: reads
/// `dir/file` as libibverbs does (a trailing newline becomes NUL); the bytes read, or -1.
/// The device's own paths are the kernel's (`/sys/class/infiniband/<name>`): `roce exec` mounts
/// a tree there (crate `sysfs`); without it, reads under them fail.
///
/// # Safety
/// `dir` and `file` are NULL or NUL-terminated strings; `buf` is NULL or valid for writing `size`
/// bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard(-1, || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller passes NUL-terminated strings.
        let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        use std::os::unix::ffi::OsStrExt as _;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(dir.to_bytes()))
            .join(std::ffi::OsStr::from_bytes(file.to_bytes()));
        match std::fs::read(&path) {
            Ok(mut bytes) => {
                bytes.truncate(size);
                let n = bytes.len();
                if bytes.last() == Some(&b'\n') {
                    bytes[n - 1] = 0;
                }
                // SAFETY: the caller's buffer holds `size` >= n bytes.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n) };
                n as c_int
            }
            Err(err) => {
                set_errno(err.raw_os_error().unwrap_or(libc::EIO));
                -1
            }
        }
    })
}

/// `const char *ibv_get_sysfs_path(void)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

/// `int ibv_fork_init(void)`: 0. The device lives in this process; a forked child has the
/// memory but not the device's thread, so its verbs objects are unusable (as libibverbs says
/// of a child that did not re-open the device).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `enum ibv_fork_status ibv_is_fork_initialized(void)`: `IBV_FORK_UNNEEDED` (2).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

/// `int ibv_dontfork_range(void *base, size_t size)`: 0 (nothing to protect: no DMA).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `int ibv_dofork_range(void *base, size_t size)`: 0.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `void verbs_register_driver_34(const struct verbs_device_ops *)` (IBVERBS_PRIVATE_34):
/// called by the constructors of libmlx5/libefa, which perftest's binaries load. Ignored: the
/// only device is ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn verbs_register_driver_34(_ops: *const c_void) {}

/// `bool verbs_allow_disassociate_destroy` (IBVERBS_PRIVATE_34, a variable).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub(crate) static verbs_allow_disassociate_destroy: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
