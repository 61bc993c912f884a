//! Memory handed to C: the only raw-pointer code of the two libraries besides their exported
//! functions.

#![allow(unsafe_code)]

use std::ptr::NonNull;

/// A heap object whose address C holds (an `ibv_device`, a `verbs_context`, an `rdma_cm_id`,
/// an `rdma_cm_event`, ...). Rust never keeps a reference to it while C may hold the pointer:
/// it is read and written through [`CBox::get`] and [`CBox::update`] (or through
/// [`CBox::ptr`] by the exported functions), and freed when the `CBox` drops (by
/// `ibv_close_device`, for example, after which the application must not use the pointer, as
/// with libibverbs).
#[derive(Debug)]
pub struct CBox<T> {
    ptr: NonNull<T>,
}

// SAFETY: a CBox owns its allocation like a Box. Its contents are C structures (integers, and
// pointers that Rust code never dereferences through the CBox), which the C program shares
// between its threads anyway; `&CBox` gives out only copies and the raw address.
unsafe impl<T> Send for CBox<T> {}
// SAFETY: as above: `&CBox` gives out only copies and the raw address.
unsafe impl<T> Sync for CBox<T> {}

impl<T> CBox<T> {
    /// Moves `value` to the heap.
    pub fn new(value: T) -> Self {
        Self {
            ptr: NonNull::from(Box::leak(Box::new(value))),
        }
    }

    /// The address C gets.
    pub fn ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// The address as an integer (table keys).
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Changes the object in place (a field the program reads, such as `ibv_qp.state` or
    /// `rdma_cm_id.verbs`).
    pub fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: `ptr` is live; the reference lasts for `f` only. The program may read the
        // same fields from another thread meanwhile, as it may while libibverbs or librdmacm
        // writes them.
        f(unsafe { &mut *self.ptr.as_ptr() })
    }
}

impl<T: Copy> CBox<T> {
    /// A copy of the object (with what the program may have written into it).
    pub fn get(&self) -> T {
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

#[cfg(test)]
mod tests {
    use super::CBox;

    #[test]
    fn update_writes_in_place_and_get_reads_what_c_would() {
        let b = CBox::new([1u32, 2]);
        let before = b.addr();
        assert_eq!(b.update(|v| std::mem::replace(&mut v[1], 7)), 2);
        assert_eq!(b.get(), [1, 7]);
        assert_eq!(b.addr(), before);
        assert_eq!(b.ptr() as usize, before);
    }
}
