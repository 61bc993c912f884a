//! perftest's out-of-band exchange over TCP ("Ethernet" exchange, no `-R`), as perftest
//! 4.5-0.17 (Debian 12's package; upstream tag `v4.5-0.17`, commit e63987c4, whose
//! `configure.ac` says version 6.06) runs it. Function names below are those of
//! `src/perftest_communication.c` at that tag; the order of the steps is that of the tools'
//! `main` functions (`write_bw.c`, `send_bw.c`, `read_bw.c`, `atomic_bw.c`, `*_lat.c`).
//!
//! Every step is one `ctx_xchg_data` or `ctx_hand_shake`: **the client writes then reads, the
//! server reads then writes**, each message whole.
//!
//! 1. `exchange_versions`: 16 bytes, the version string NUL-padded (`"6.06"`);
//!    `check_version_compatibility` then refuses a peer older than 5.70;
//! 2. `check_sys_data`: the cycle buffer (page size) and the cache line size, each a 4-byte
//!    big-endian int in its own exchange; both sides keep the larger of each;
//! 3. `check_mtu`: the port's `ibv_mtu` enum as `sprintf("%d")`, 2 bytes (`"3\0"` for 1024);
//!    both use the smaller;
//! 4. key handshakes (`ctx_hand_shake`, `ethernet_write_keys` / `ethernet_read_keys`): a
//!    59-byte text without GID or 108 bytes with one (`-x`), see [`encode_keys`]. How many and
//!    where the QP is connected depends on the test, see [`Test`];
//! 5. the end: after a bandwidth test, a handshake, the report (`xchg_bw_reports`, five 8-byte
//!    big-endian values); then `ctx_close_connection`: one more handshake and `"done\0"`, which
//!    each side writes and then closes without reading the other's.
//!
//! With perftest's `-R` ([`Exchange::RdmaCm`]) the same steps run over an RC connection that
//! rdma_cm made to the server's port (service ID: TCP port space, `-p`), each message one SEND
//! of its own length; the keys are the binary `struct pingpong_dest` and there is no `"done"`.
//! Between the MTU and the first key handshake come one handshake, the data QPs' own rdma_cm
//! connections to the same port, and one more handshake ([`Session::rdma_cm_sync`]).
//!
//! [`Session`] runs these steps in order for one QP (or N, `-q N`) and stops where the tool
//! connects its QPs and where it starts its traffic; the free functions are the single steps.

mod keys_struct;
mod messages;
mod plan;
mod session;
mod steps;

pub use keys_struct::{KEY_STRUCT_SIZE, decode_keys_struct, encode_keys_struct};
pub use messages::{
    Amount, BwReport, Connection, IbvMtu, KEY_MSG_SIZE, KEY_MSG_SIZE_GID, MIN_PEER_VERSION,
    MTU_MSG_LEN, Modes, PeerVersion, PerftestDest, RUN_PARAMS_MAGIC, RunParams, SysData, VERSION,
    VERSION_LEN, decode_keys, decode_mtu, decode_version, encode_keys, encode_mtu, encode_version,
    encode_version_with,
};
pub use plan::{Kind, MAX_QPS, Test, Verb, check_qps};
pub use session::{Config, Finish, Session};
pub use steps::{
    Exchange, PeerDone, Side, close_connection, exchange_bw_reports, exchange_mtu,
    exchange_sys_data, exchange_versions, exchange_versions_with, hand_shake,
};

#[cfg(test)]
use crate::OobError;
#[cfg(test)]
use messages::atof;

#[cfg(test)]
mod tests;
