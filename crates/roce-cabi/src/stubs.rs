//! The exported names that only fail ([`stubs!`](crate::stubs!)), and what says so once
//! ([`FirstTime`]).
//!
//! They exist because Debian's programs are linked BIND_NOW: the dynamic linker resolves every
//! imported name at load time, so a program must load even if it calls only some of them. The
//! functions take no parameters whatever their C signature: on x86_64 and aarch64 the caller
//! owns its arguments (registers, and stack slots it pops itself), so a callee that ignores
//! them is called correctly.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// The names already said (a `static` of each library): a stub says why it fails the first
/// time it is called only.
#[derive(Debug)]
pub struct FirstTime(Mutex<Option<HashSet<&'static str>>>);

impl FirstTime {
    /// None said yet.
    pub const fn new() -> Self {
        Self(Mutex::new(None))
    }

    /// True the first time `name` is given.
    pub fn first(&self, name: &'static str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(HashSet::new)
            .insert(name)
    }
}

impl Default for FirstTime {
    fn default() -> Self {
        Self::new()
    }
}

/// Exported C functions that call `$fail(name)` (which sets `errno` and says why) and return
/// a value: `stubs! { fail -> TYPE = VALUE, "what it returns"; name, name, }`, or with no
/// return value `stubs! { fail, "does nothing"; name, }`. The module that invokes it must
/// allow `unsafe_code` (`#[unsafe(no_mangle)]`).
#[macro_export]
macro_rules! stubs {
    ($fail:ident -> $ty:ty = $value:expr, $doc:literal; $($name:ident,)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: ", $doc, ".")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name() -> $ty {
            $fail(stringify!($name));
            $value
        }
    )*};
    ($fail:ident, $doc:literal; $($name:ident,)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: ", $doc, ".")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name() {
            $fail(stringify!($name));
        }
    )*};
}

#[cfg(test)]
mod tests {
    use super::FirstTime;

    #[test]
    fn each_name_is_first_once() {
        static SAID: FirstTime = FirstTime::new();
        assert!(SAID.first("a"));
        assert!(SAID.first("b"));
        assert!(!SAID.first("a"));
        assert!(!SAID.first("b"));
    }
}
