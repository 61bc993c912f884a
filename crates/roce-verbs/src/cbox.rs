//! Memory handed to C: the only raw-pointer code besides the exported functions in `ffi.rs`.

#![allow(unsafe_code)]

use std::ptr::NonNull;

use crate::abi::{IbvContext, VerbsContext};

/// A heap object whose address C holds (an `ibv_device`, a `verbs_context`). Rust never makes
/// a reference to it while C may hold the pointer; it is written through [`CBox::ptr`] by the
/// functions of `ffi.rs` and freed when the `CBox` drops (by `ibv_close_device`, for example,
/// after which the application must not use the pointer, as with libibverbs).
#[derive(Debug)]
pub(crate) struct CBox<T> {
    ptr: NonNull<T>,
}

// SAFETY: a CBox owns its allocation like a Box. Its contents are C structures (integers, and
// pointers that Rust code never dereferences through the CBox), which the C program shares
// between its threads anyway; a CBox hands out only the raw address, never a reference.
unsafe impl<T> Send for CBox<T> {}
// SAFETY: as above: `&CBox` gives out only the raw address.
unsafe impl<T> Sync for CBox<T> {}

impl<T> CBox<T> {
    /// Moves `value` to the heap.
    pub(crate) fn new(value: T) -> Self {
        Self {
            ptr: NonNull::from(Box::leak(Box::new(value))),
        }
    }

    /// The address C gets.
    pub(crate) fn ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// The address as an integer (registry keys).
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }
}

impl<T> CBox<T> {
    /// Changes the object in place (a field the program reads, such as `ibv_qp.state`).
    pub(crate) fn update(&self, f: impl FnOnce(&mut T)) {
        // SAFETY: `ptr` is live; the reference lasts for `f` only. The program may read the
        // same field from another thread meanwhile, as it may while libibverbs writes it.
        f(unsafe { &mut *self.ptr.as_ptr() });
    }
}

impl<T: Copy> CBox<T> {
    /// A copy of the object.
    pub(crate) fn get(&self) -> T {
        // SAFETY: `ptr` is live and holds a T.
        unsafe { self.ptr.as_ptr().read() }
    }
}

impl CBox<VerbsContext> {
    /// The `ibv_context` inside: what the application holds.
    pub(crate) fn context_ptr(&self) -> *mut IbvContext {
        // SAFETY: `ptr` is a live allocation of a VerbsContext; taking a field's address
        // creates no reference.
        unsafe { &raw mut (*self.ptr.as_ptr()).context }
    }
}

impl<T> Drop for CBox<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from Box::leak in `new` and is freed only here, once.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}
