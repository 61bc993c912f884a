//! [`Sockets`]: one thing for each socket of a [`UdpBackend`], the first and the optional
//! link-local one.

use std::io;

#[cfg(doc)]
use super::UdpBackend;

/// One thing for each socket of a [`UdpBackend`]: the first socket's (bound by
/// [`UdpBackend::bind`] or [`UdpBackend::bind_interface`]), then the link-local one's, if
/// the backend has one.
#[derive(Debug)]
pub(super) struct Sockets<T> {
    pub(super) first: T,
    pub(super) link_local: Option<T>,
}

impl<T> Sockets<T> {
    pub(super) fn one(first: T) -> Self {
        Self {
            first,
            link_local: None,
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        std::iter::once(&self.first).chain(&self.link_local)
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        std::iter::once(&mut self.first).chain(&mut self.link_local)
    }

    pub(super) fn into_iter(self) -> impl Iterator<Item = T> {
        std::iter::once(self.first).chain(self.link_local)
    }

    pub(super) fn try_map<'a, U>(
        &'a self,
        mut f: impl FnMut(&'a T) -> io::Result<U>,
    ) -> io::Result<Sockets<U>> {
        Ok(Sockets {
            first: f(&self.first)?,
            link_local: self.link_local.as_ref().map(f).transpose()?,
        })
    }

    pub(super) fn len(&self) -> usize {
        1 + usize::from(self.link_local.is_some())
    }
}
