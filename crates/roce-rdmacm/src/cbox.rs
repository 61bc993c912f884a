//! Memory handed to C (the same pattern as roce-verbs's `cbox.rs`): the only raw-pointer code
//! besides the exported functions.

#![allow(unsafe_code)]

use std::ptr::NonNull;

/// A heap object whose address C holds (an `rdma_cm_id`, an `rdma_cm_event`, ...). Rust never
/// keeps a reference to it while C may hold the pointer: it is read and written through
/// [`CBox::get`] and [`CBox::update`], and freed when the `CBox` drops.
#[derive(Debug)]
pub(crate) struct CBox<T> {
    ptr: NonNull<T>,
}

// SAFETY: a CBox owns its allocation like a Box. Its contents are C structures (integers and
// pointers Rust never dereferences through it) which the C program shares between its threads
// anyway; `&CBox` gives out only copies and the raw address.
unsafe impl<T> Send for CBox<T> {}
// SAFETY: as above.
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

    /// The address as an integer (table keys).
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Changes the object in place (fields the program reads, such as `rdma_cm_id.verbs`).
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: `ptr` is live; the reference lasts for `f` only. The program may read the
        // same fields from another thread meanwhile, as it may with librdmacm.
        f(unsafe { &mut *self.ptr.as_ptr() })
    }
}

impl<T: Copy> CBox<T> {
    /// A copy of the object (with what the program may have written into it).
    pub(crate) fn get(&self) -> T {
        // SAFETY: `ptr` is live and holds a T.
        unsafe { self.ptr.as_ptr().read() }
    }
}

impl<T> Drop for CBox<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from Box::leak in `new` and is freed only here, once.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}
