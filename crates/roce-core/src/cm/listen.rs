//! Listeners by service ID (ib_cm's `cm.listen_service_table`): a REQ goes to the listener of
//! its service ID; with none, it is rejected (INVALID_SERVICE_ID).

use std::collections::BTreeMap;

use super::{CmError, ListenHandle};

/// The listeners.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    by_service: BTreeMap<u64, ListenHandle>,
    next: u32,
    /// Listeners added or removed so far.
    changes: u64,
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
        self.changes += 1;
        Ok(handle)
    }

    /// Stops listening.
    pub(crate) fn remove(&mut self, handle: ListenHandle) -> Result<(), CmError> {
        let before = self.by_service.len();
        self.by_service.retain(|_, h| *h != handle);
        if self.by_service.len() == before {
            return Err(CmError::UnknownListener(handle));
        }
        self.changes += 1;
        Ok(())
    }

    /// The service IDs listened on.
    pub(crate) fn services(&self) -> Vec<u64> {
        self.by_service.keys().copied().collect()
    }

    /// How many times listeners were added or removed: a change of the set shows as a new
    /// count.
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    /// The listener of `service_id`.
    //= rxe:cm.c/cm_find_listen
    //# a REQ finds its listener by its service ID
    pub(crate) fn find(&self, service_id: u64) -> Option<ListenHandle> {
        self.by_service.get(&service_id).copied()
    }
}
