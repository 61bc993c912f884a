//! Listeners by service ID (ib_cm's `cm.listen_service_table`): a REQ goes to the listener of
//! its service ID; with none, it is rejected (INVALID_SERVICE_ID).

use std::collections::BTreeMap;

use super::{CmError, ListenHandle};

/// The listeners.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    by_service: BTreeMap<u64, ListenHandle>,
    next: u32,
}

impl Listeners {
    /// A listener for `service_id`, unless it has one.
    pub(crate) fn add(&mut self, service_id: u64) -> Result<ListenHandle, CmError> {
        if self.by_service.contains_key(&service_id) {
            return Err(CmError::ServiceInUse(service_id));
        }
        self.next = self.next.wrapping_add(1);
        let handle = ListenHandle(self.next);
        self.by_service.insert(service_id, handle);
        Ok(handle)
    }

    /// Stops listening.
    pub(crate) fn remove(&mut self, handle: ListenHandle) -> Result<(), CmError> {
        let before = self.by_service.len();
        self.by_service.retain(|_, h| *h != handle);
        if self.by_service.len() == before {
            return Err(CmError::UnknownListener(handle));
        }
        Ok(())
    }

    /// The listener of `service_id`.
    //= rxe:cm.c/cm_find_listen
    //# a REQ finds its listener by its service ID
    pub(crate) fn find(&self, service_id: u64) -> Option<ListenHandle> {
        self.by_service.get(&service_id).copied()
    }
}
